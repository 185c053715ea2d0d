/*
 * proctree-enter: the exec step of proctree.Popen (Linux).
 *
 * Popen's own forked child (X: forked by _posixsubprocess, its stdio, cwd,
 * umask, signals and fds already set as Popen sets them) execs this program.
 * X clones the command's process Y straight into the command's cgroup
 * (clone3 CLONE_INTO_CGROUP: born there, never migrated, so no wait for an
 * RCU grace period) with CLONE_PARENT, so that Y's parent is X's: Y is the
 * caller's own child, which os.waitpid, pidfds and child watchers see. X
 * writes Y's pid to <pid fd> and exits (the caller reaps it and takes Y's pid
 * as the command's). Y takes the session, process group and credentials
 * asked for and execs the command in place.
 *
 *   proctree-enter <err fd> <pid fd> <cgroup dir> <setsid 0|1> <pgid|-> <uid|-> <gid|-> <groups|-> <mask> <n>
 *       <exe>... -- <argv>...
 *   proctree-enter hold
 *
 * Signals: no signal but SIGKILL may end X, or Y before its exec, or a group
 * signal (a Ctrl+C, a hang-up, an application's killpg) would pass the step
 * off as the command. So every signal is blocked from the step's first system
 * call (the caller blocks them too, around its fork, so they are blocked from
 * the fork on), and Y sets <mask> (hex, bit n-1 for signal n: the caller's
 * own mask, what Popen's child would have had) just before it execs. The
 * dispositions pass through untouched, as Popen's child had them at exec
 * (ignored ones ignored, the rest default). X writes "E" instead of a pid
 * when it reports an error on <err fd>; a step that wrote neither died, and
 * the caller raises SubprocessError rather than take any pid for the command.
 *
 * <groups> is "g" followed by comma-separated gids ("g" alone: none), or "-"
 * to leave them. Each <exe> is tried in turn, as _posixsubprocess tries its
 * executable list: the first error that is not ENOENT/ENOTDIR is reported.
 * Failures are written to <err fd> (a copy of Popen's error pipe, kept open
 * across this program's own exec) in _posixsubprocess's format, so Popen
 * raises what it raises for its own child: "OSError:<hex errno>:" for a
 * failed exec, "OSError:<hex errno>:noexec" before it, and a SubprocessError
 * for a cgroup the command cannot be started in. "hold" is the command of the
 * owner's holding tree: it blocks every signal and waits for SIGKILL, so that
 * no stray signal (nor one its keeper forwards) ends the owner's commands.
 *
 * Where clone3 is refused (ENOSYS: kernels before 5.3, seccomp profiles), Y
 * is forked with the legacy clone(CLONE_PARENT) and writes itself into the
 * cgroup before it execs (a migration: slower, same containment).
 *
 * It never allocates, and touches nothing but its own two processes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef SYS_clone3
#define SYS_clone3 435 /* the same number on every architecture */
#endif
#ifndef CLONE_PARENT
#define CLONE_PARENT 0x00008000
#endif

/* clone3's argument block up to its cgroup field (CLONE_ARGS_SIZE_VER2), declared here for older headers. */
struct pt_clone_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};
#define PT_CLONE_INTO_CGROUP 0x200000000ULL

extern char **environ;

#define MAX_GROUPS 65536

/* Returns nothing: writes s whole (or as much as the pipe takes) to fd. */
static void put(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* Returns nothing: writes "OSError:<hex code>:<tail>" to fd. */
static void report_errno(int fd, int code, const char *tail)
{
    char buf[64];
    char hex[16];
    int i = 0;
    unsigned int v = (unsigned int)code;
    do {
        hex[i++] = "0123456789abcdef"[v & 0xf];
        v >>= 4;
    } while (v && i < (int)sizeof hex);
    size_t n = 0;
    memcpy(buf, "OSError:", 8);
    n = 8;
    while (i > 0)
        buf[n++] = hex[--i];
    buf[n++] = ':';
    buf[n] = '\0';
    put(fd, buf);
    put(fd, tail);
}

/* Returns 0 and the value in *out, or -1 for a field that is not a decimal number. */
static int parse_id(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0)
        return -1;
    *out = v;
    return 0;
}

/* Returns 0, or -errno from the write into <dir>/cgroup.procs (the fallback: a migration). */
static int join_cgroup(int dir)
{
    int fd = openat(dir, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t w;
    do
        w = write(fd, "0", 1);
    while (w < 0 && errno == EINTR);
    int err = w == 1 ? 0 : (w < 0 ? errno : EIO);
    close(fd);
    return -err;
}

/* Returns 0, or -errno from setgroups(); "g" with no numbers clears the groups. */
static int set_groups(const char *spec)
{
    static gid_t gids[MAX_GROUPS];
    size_t n = 0;
    const char *p = spec + 1;
    while (*p) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        if (errno || end == p || n == MAX_GROUPS)
            return -EINVAL;
        gids[n++] = (gid_t)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -EINVAL;
    }
    return setgroups(n, gids) == 0 ? 0 : -errno;
}

/* Returns nothing: every signal blocked (the kernel leaves SIGKILL and SIGSTOP out); 8: the kernel's sigset size. */
static void block_all(void)
{
    uint64_t all = ~(uint64_t)0;
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, 8);
}

/* Returns nothing: the signal mask set to mask (bit n-1 for signal n). */
static void set_mask(uint64_t mask)
{
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &mask, NULL, 8);
}

/* Returns 0 and the mask in *out, or -1 for a field that is not 1 to 16 hex digits. */
static int parse_mask(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    int n = 0;
    for (; *s; s++, n++) {
        int d = *s >= '0' && *s <= '9' ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 : -1;
        if (d < 0 || n == 16)
            return -1;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return n > 0 ? 0 : -1;
}

/* Never returns: every signal stays blocked, so only SIGKILL ends it (the explicit end, or its keeper's teardown). */
static int hold(void)
{
    for (;;)
        pause();
    return 0;
}

/* Returns Y's pid in X, 0 in Y, or -errno; *born_inside says whether the kernel placed Y in the cgroup at birth. */
static long clone_sibling(int dir, int *born_inside)
{
    struct pt_clone_args a;
    memset(&a, 0, sizeof a);
    a.flags = PT_CLONE_INTO_CGROUP | CLONE_PARENT;
    /* 0, as clone3 requires with CLONE_PARENT: Y takes X's own exit signal (SIGCHLD, from Popen's fork). */
    a.exit_signal = 0;
    a.cgroup = (uint64_t)dir;
    long pid = syscall(SYS_clone3, &a, sizeof a);
    if (pid >= 0) {
        *born_inside = 1;
        return pid;
    }
    if (errno != ENOSYS && errno != E2BIG)
        return -errno;
    *born_inside = 0;
    /* The legacy clone: flags in the first argument on every architecture; the rest 0. */
    pid = syscall(SYS_clone, (unsigned long)(CLONE_PARENT | SIGCHLD), 0UL, 0UL, 0UL, 0UL);
    return pid < 0 ? -errno : pid;
}

/* Returns nothing: X's part once Y exists; writes Y's pid for the caller, then exits. */
static void report_pid(int fd, long pid)
{
    char buf[24];
    int i = (int)sizeof buf;
    buf[--i] = '\n';
    do {
        buf[--i] = (char)('0' + pid % 10);
        pid /= 10;
    } while (pid > 0 && i > 0);
    ssize_t w;
    do
        w = write(fd, buf + i, sizeof buf - (size_t)i);
    while (w < 0 && errno == EINTR);
}

int main(int argc, char **argv)
{
    block_all(); /* before any other system call: the step is never a signal's victim */
    if (argc == 2 && strcmp(argv[1], "hold") == 0)
        return hold();
    if (argc < 13)
        return 127;
    long errfd, pidfd, setsid_flag, n, pgid = -1, uid = -1, gid = -1;
    uint64_t mask;
    if (parse_id(argv[1], &errfd) || parse_id(argv[2], &pidfd) || parse_id(argv[4], &setsid_flag) ||
        parse_mask(argv[9], &mask) || parse_id(argv[10], &n) || n < 1 || 11 + n >= argc)
        return 127;
    if (strcmp(argv[11 + n], "--") != 0 || 12 + n >= argc)
        return 127;
    if ((strcmp(argv[5], "-") && parse_id(argv[5], &pgid)) || (strcmp(argv[6], "-") && parse_id(argv[6], &uid)) ||
        (strcmp(argv[7], "-") && parse_id(argv[7], &gid)))
        return 127;
    int fd = (int)errfd;

    /* The command's cgroup is made here when the caller left that to us (none made ahead of need) or it went
     * missing (an empty cgroup is anyone's to remove): here, in the forked child, never on the caller's thread. */
    int dir = open(argv[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0 && errno == ENOENT && (mkdir(argv[3], 0755) == 0 || errno == EEXIST))
        dir = open(argv[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int born_inside = 0;
    long pid = dir < 0 ? -errno : clone_sibling(dir, &born_inside);
    if (pid < 0) {
        put(fd, "SubprocessError:0:proctree.Popen could not start the command in its cgroup (");
        put(fd, argv[3]);
        put(fd, "): ");
        put(fd, strerror((int)-pid));
        put((int)pidfd, "E\n"); /* the caller: "no command, the error pipe says why" */
        _exit(255);
    }
    if (pid > 0) {
        report_pid((int)pidfd, pid);
        _exit(0);
    }
    /* Y: the command, the caller's own child. */
    close((int)pidfd);
    int rc = born_inside ? 0 : join_cgroup(dir);
    if (rc < 0) {
        put(fd, "SubprocessError:0:proctree.Popen could not move the command into its cgroup (");
        put(fd, argv[3]);
        put(fd, "): ");
        put(fd, strerror(-rc));
        _exit(255);
    }
    close(dir);
    /* The order of _posixsubprocess: session, process group, groups, gid, uid. */
    if (setsid_flag && setsid() < 0)
        rc = -errno;
    if (rc == 0 && pgid >= 0 && setpgid(0, (pid_t)pgid) < 0)
        rc = -errno;
    if (rc == 0 && argv[8][0] == 'g')
        rc = set_groups(argv[8]);
    if (rc == 0 && gid >= 0 && setregid((gid_t)gid, (gid_t)gid) != 0)
        rc = -errno;
    if (rc == 0 && uid >= 0 && setreuid((uid_t)uid, (uid_t)uid) != 0)
        rc = -errno;
    if (rc < 0) {
        report_errno(fd, -rc, "noexec");
        _exit(255);
    }

    /* The command's exec closes the error pipe: Popen's parent then reads EOF, as for its own child. */
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        report_errno(fd, errno, "noexec");
        _exit(255);
    }
    char **cmd = argv + 12 + n;
    int saved = 0;
    set_mask(mask); /* the caller's mask, as Popen's own child execs with it; a pending signal lands now */
    for (long i = 0; i < n; i++) {
        execve(argv[11 + i], cmd, environ);
        if (errno != ENOENT && errno != ENOTDIR && saved == 0)
            saved = errno;
    }
    report_errno(fd, saved ? saved : errno, "");
    _exit(255);
}
