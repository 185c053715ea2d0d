/*
 * proctree-enter: the exec step of proctree.Popen (Linux).
 *
 * Popen's own child (forked by _posixsubprocess, with its stdio, cwd, umask,
 * session and signals already set) execs this program, which puts itself
 * into the command's cgroup, takes the command's credentials, and execs the
 * command in place: the command keeps the pid Python forked, so it stays the
 * caller's own child (os.waitpid, pidfds and child watchers see it).
 *
 *   proctree-enter <err fd> <cgroup.procs|-> <uid|-> <gid|-> <groups|-> <n> <exe>... -- <argv>...
 *   proctree-enter hold
 *
 * <groups> is "g" followed by comma-separated gids ("g" alone: none), or "-"
 * to leave them. Each <exe> is tried in turn, as _posixsubprocess tries its
 * executable list: the first error that is not ENOENT/ENOTDIR is reported.
 * Failures are written to <err fd> (a copy of Popen's error pipe, kept open
 * across this program's own exec) in _posixsubprocess's format, so Popen
 * raises what it raises for its own child: "OSError:<hex errno>:" for a
 * failed exec, "OSError:<hex errno>:noexec" before it, and a SubprocessError
 * for a cgroup that cannot be joined. "hold" waits for a signal: the process
 * that keeps the owner's holding tree alive.
 *
 * It never forks, never allocates, and touches nothing but its own process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

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

/* Returns 0, or -errno from the write into cgroup.procs. */
static int join_cgroup(const char *procs)
{
    int fd = open(procs, O_WRONLY | O_CLOEXEC);
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

/* Returns only on a signal it does not die of (never, under the holding keeper). */
static int hold(void)
{
    for (;;)
        pause();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "hold") == 0)
        return hold();
    if (argc < 9)
        return 127;
    long errfd, n, uid = -1, gid = -1;
    if (parse_id(argv[1], &errfd) || parse_id(argv[6], &n) || n < 1 || 7 + n >= argc)
        return 127;
    if (strcmp(argv[7 + n], "--") != 0 || 8 + n >= argc)
        return 127;
    if ((strcmp(argv[3], "-") && parse_id(argv[3], &uid)) || (strcmp(argv[4], "-") && parse_id(argv[4], &gid)))
        return 127;
    int fd = (int)errfd;

    if (strcmp(argv[2], "-") != 0) {
        int rc = join_cgroup(argv[2]);
        if (rc < 0) {
            put(fd, "SubprocessError:0:proctree.Popen could not start the command in its cgroup (");
            put(fd, argv[2]);
            put(fd, "): ");
            put(fd, strerror(-rc));
            _exit(255);
        }
    }
    /* The order of _posixsubprocess: groups, then gid, then uid. */
    int rc = 0;
    if (argv[5][0] == 'g')
        rc = set_groups(argv[5]);
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
    char **cmd = argv + 8 + n;
    int saved = 0;
    for (long i = 0; i < n; i++) {
        execve(argv[7 + i], cmd, environ);
        if (errno != ENOENT && errno != ENOTDIR && saved == 0)
            saved = errno;
    }
    report_errno(fd, saved ? saved : errno, "");
    _exit(255);
}
