/* Starting the command: fork (clone3 into its cgroup on Linux) and exec, and what the keeper reads about itself.
 */
#include "keeper.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* Returns how many inherited fds (above 2, not close-on-exec) it closed: at most 256, one reading of the fd list. */
static int close_inherited_batch(void)
{
    DIR *d = opendir(FD_DIR);
    if (!d)
        return 0;
    int own = dirfd(d);
    int close_list[256], n = 0;
    struct dirent *de;
    while (n < 256 && (de = readdir(d)) != NULL) {
        long long v;
        if (parse_uint(de->d_name, INT_MAX, &v) < 0 || v <= 2 || v == own)
            continue;
        int flags = fcntl((int)v, F_GETFD);
        if (flags >= 0 && !(flags & FD_CLOEXEC))
            close_list[n++] = (int)v;
    }
    closedir(d);
    for (int i = 0; i < n; i++)
        close(close_list[i]);
    return n;
}

/* Returns nothing: /dev/null on 0-2 and every fd we inherited (not close-on-exec) closed: the command's alone now. */
void detach_stdio(void)
{
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        for (int i = 0; i < 3; i++)
            dup2(fd, i);
        if (fd > 2)
            close(fd);
    }
    close_inherited();
}

/* Returns nothing: every fd we inherited above 2 (not close-on-exec) closed: the command's alone now. */
void close_inherited(void)
{
    while (close_inherited_batch() == 256) {
    }
}

/* Returns errno once exec failed (it does not return otherwise): exe run as Popen runs it. A name without a slash is
 * looked up in the command's PATH (unset: /bin:/usr/bin, Python's os.defpath), every directory tried in turn; the
 * error is the first that is not ENOENT/ENOTDIR, else the last. Unlike execvp, a file the kernel cannot execute
 * (ENOEXEC: a script without #!) is an error, never handed to /bin/sh. */
static int exec_as_popen(const char *exe)
{
    if (strchr(exe, '/')) {
        execv(exe, K.argv);
        return errno;
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin";
    int first = 0, last = ENOENT;
    char buf[PATH_MAX];
    for (const char *dir = path;; dir++) {
        const char *colon = strchr(dir, ':');
        size_t len = colon ? (size_t)(colon - dir) : strlen(dir);
        /* os.path.join("", exe) is exe itself: an empty PATH entry is the working directory */
        int n = snprintf(buf, sizeof buf, "%.*s%s%s", (int)len, dir, len && dir[len - 1] != '/' ? "/" : "", exe);
        if (n < 0 || (size_t)n >= sizeof buf) {
            last = ENAMETOOLONG;
        } else {
            execv(buf, K.argv);
            last = errno;
        }
        if (last != ENOENT && last != ENOTDIR && first == 0)
            first = last;
        if (colon == NULL)
            break;
        dir = colon;
    }
    return first ? first : last;
}

/* Returns nothing (never returns): the child between fork and exec; reports {stage, errno} on fd w if it
 * cannot exec. */
static void exec_child(const char *exe, int w, bool join_cgroup)
{
    int report[2] = {0, 0}; /* stage (0: exec, 1: pty, 2: cgroup), errno */
    setpgid(0, 0);
    int rc = join_cgroup ? cg_join_self() : 0;
    if (rc < 0) {
        report[0] = 2;
        report[1] = -rc;
    } else if (K.pty && tcsetpgrp(0, getpid()) != 0) {
        /* The terminal's foreground group before the command runs: its first read never meets SIGTTIN. SIGTTOU
         * is blocked (inherited from the keeper), so a background group may make itself the foreground. */
        report[0] = 1;
        report[1] = errno;
    } else {
        if (K.restore_signals) {
            signal(SIGPIPE, SIG_DFL);
            signal(SIGXFSZ, SIG_DFL);
        }
        sigprocmask(SIG_SETMASK, &K.orig_mask, NULL);
        report[1] = exec_as_popen(exe);
    }
    ssize_t r;
    do {
        r = write(w, report, sizeof report);
    } while (r < 0 && errno == EINTR);
    _exit(127);
}

/* Returns 0 once the command runs (K.cmd set), or -errno (nothing is left running; *stage says which step failed):
 * fork (clone3 into the tree's cgroup where it must start there and can), then exec_child; a close-on-exec pipe
 * carries the child's errno if a step before exec, or exec itself, fails. */
static int start_command_forked(const char *exe, const char **stage)
{
    int p[2];
    if (pipe(p) != 0)
        return -errno;
    fcntl(p[0], F_SETFD, FD_CLOEXEC);
    fcntl(p[1], F_SETFD, FD_CLOEXEC);
    bool into_cgroup = K.cgroup != NULL; /* we stay outside: the command is born inside */
    bool born_inside = false;
    pid_t pid = fork_child(into_cgroup, &born_inside);
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        *stage = into_cgroup ? STAGE_CGROUP : STAGE_EXEC;
        return pid;
    }
    if (pid == 0)
        exec_child(exe, p[1], into_cgroup && !born_inside);
    close(p[1]);
    setpgid(pid, pid); /* either side may run first: both set it (EACCES once it has exec'd: fine) */
    int report[2] = {0, 0};
    ssize_t r;
    do {
        r = read(p[0], report, sizeof report);
    } while (r < 0 && errno == EINTR);
    close(p[0]);
    if (r == (ssize_t)sizeof report) {
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        *stage = report[0] == 1 ? STAGE_PTY : report[0] == 2 ? STAGE_CGROUP : STAGE_EXEC;
        return -(report[1] ? report[1] : ECHILD);
    }
    K.cmd = pid;
    return 0;
}

/* Returns 0 once the command runs (K.cmd set), or -errno (nothing was started; *stage names the step for the err
 * line). Always fork + exec, never posix_spawn: glibc's posix_spawn leaves its internal signals (32, 33) ignored in
 * the child of a static program, and the command must start with nothing ignored that Popen's child would not. */
int start_command(const char **stage)
{
    const char *exe = K.exe;
    *stage = STAGE_EXEC;
    if (exe[0] == '\0')
        return -EACCES; /* as Popen: PATH's directories joined with "" are directories */
    return start_command_forked(exe, stage);
}

/* Returns nothing: K.tree_id set in session mode from our PROCTREE_TREE (its first id: ours; those after it are
 * enclosing trees'), else left "". */
void read_tree_id(void)
{
    const char *v = getenv(TREE_KEY);
    if (K.mode != M_SESSION || !v || !chain_names(v, strlen(v), v))
        return;
    memcpy(K.tree_id, v, TREE_ID_LEN);
    K.tree_id[TREE_ID_LEN] = '\0';
}

/* Returns nothing: K.self_start read from the core (0 if unreadable: then no receipt and no marker is trusted). */
void read_self_start(void)
{
    struct pt_proc me;
    for (int i = 0; i < 20; i++) {
        int rc = pt_proc(K.self, &me);
        if (rc == 0) {
            K.self_start = me.start_time;
            return;
        }
        if (rc != -EBUSY)
            return;
        sleep_ms(1);
    }
}

/* Returns the start time of the process pid in the core's units, 0 if it cannot be read. */
uint64_t start_of(pid_t pid)
{
    struct pt_proc row;
    for (int i = 0; i < 20; i++) {
        int rc = pt_proc(pid, &row);
        if (rc == 0)
            return row.start_time;
        if (rc != -EBUSY)
            return 0;
        sleep_ms(1);
    }
    return 0;
}
