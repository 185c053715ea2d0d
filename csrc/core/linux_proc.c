/* Linux, one process: its /proc/<pid>/stat line, its owner, its threads, and pt_proc. The table and the children
 * lists are linux_table.c's; argv and environment linux_procargs.c's.
 *
 * Why this shape:
 * - The name (field 2) sits between the FIRST '(' and the LAST ')': a name may
 *   itself hold spaces, parentheses and newlines, so stopping at the first
 *   ')' (as util-linux does) misparses every field after it.
 * - The uid is the owner of the /proc/<pid> directory, not of the stat file:
 *   procfs hands the files of a non-dumpable process (any setuid() drop) to
 *   root, but keeps the directory's owner the process's euid (task_dump_owner).
 * - A process whose main thread exited while others run shows the leader's
 *   'Z'; it is alive, so we report the state of one of its live threads.
 */
#define _GNU_SOURCE /* openat, fstatat, O_CLOEXEC under any -std */
#include "linux.h"
#include "stat_parse.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* /proc/<pid>/stat is well under 1 KiB even with a 64-byte name. */
#define STAT_BUF 2048

/* Fields after the name that we parse, counting state as field 3. */
#define F_PPID        4
#define F_PGRP        5
#define F_SESSION     6
#define F_NUM_THREADS 20
#define F_STARTTIME   22

/* Returns 0 with *out filled from one stat line buf[0..len), or -EIO if malformed. */
static int parse_stat(const char *buf, size_t len, struct pt_proc *out, struct stat_extra *extra)
{
    const char *end = buf + len;
    const char *p;
    int64_t v;

    if (pt_parse_stat_head(buf, len, &out->pid, out->name, &out->state, &p) != 0)
        return -EIO;
    out->leader_state = out->state;
    out->_pad = 0;
    extra->leader_state = out->state;

    for (int field = F_PPID; field <= F_STARTTIME; field++) {
        if (pt_parse_decimal(&p, end, &v) != 0)
            return -EIO;
        switch (field) {
        case F_PPID: out->ppid = (int32_t)v; break;
        case F_PGRP: out->pgid = (int32_t)v; break;
        case F_SESSION: out->sid = (int32_t)v; break;
        case F_NUM_THREADS:
            extra->num_threads = v;
            out->threaded = v > 1;
            break;
        case F_STARTTIME: out->start_time = (uint64_t)v; break;
        default: break;
        }
        if (field < F_STARTTIME) {
            if (p >= end || *p != ' ')
                return -EIO;
            p++;
        }
    }
    return 0;
}

/* Returns 0 with *out filled from <dirfd>/<path> (uid left alone), -ESRCH if the process is gone, or -errno. */
int read_stat_at(int dirfd, const char *path, struct pt_proc *out, struct stat_extra *extra)
{
    char buf[STAT_BUF];
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return (errno == ENOENT || errno == ESRCH) ? -ESRCH : -errno;
    ssize_t n = read(fd, buf, sizeof buf);
    int err = n < 0 ? errno : 0;
    close(fd);
    if (n < 0)
        return (err == ESRCH || err == ENOENT) ? -ESRCH : -err;
    if (n == 0)
        return -ESRCH; /* the task was reaped between open and read */
    if ((size_t)n == sizeof buf)
        return -EIO; /* cannot happen with today's kernels; never parse a cut line */
    return parse_stat(buf, (size_t)n, out, extra);
}

/* Returns 0 with out->uid set from the owner of <dirfd>/<dir>, -ESRCH if gone, or -errno. */
static int read_owner_at(int dirfd, const char *dir, struct pt_proc *out)
{
    struct stat st;
    if (fstatat(dirfd, dir, &st, 0) != 0)
        return (errno == ENOENT || errno == ESRCH) ? -ESRCH : -errno;
    out->uid = (uint32_t)st.st_uid;
    return 0;
}

static int live_thread_state(int32_t pid, char *state);

/* Returns 0 with *out filled for the process whose /proc entry is <dirfd>/<dir>, -ESRCH, or -errno. */
int read_process_at(int dirfd, const char *dir, size_t dir_len, struct pt_proc *out, struct stat_extra *extra)
{
    char path[48];
    if (dir_len + sizeof "/stat" > sizeof path)
        return -EINVAL;
    memcpy(path, dir, dir_len);
    memcpy(path + dir_len, "/stat", sizeof "/stat");
    int rc = read_stat_at(dirfd, path, out, extra);
    path[dir_len] = '\0';
    if (rc == 0)
        rc = read_owner_at(dirfd, path, out);
    if (rc == 0 && out->state == 'Z' && extra->num_threads > 1)
        rc = live_thread_state(out->pid, &out->state);
    return rc;
}

/* Returns the length of name if it is all digits (a /proc/<pid> entry) and short enough to be a pid, else 0. */
static size_t pid_name_len(const char *name)
{
    size_t len = 0;
    for (; name[len]; len++)
        if (name[len] < '0' || name[len] > '9' || len >= 10)
            return 0;
    return len;
}

/* Returns the length of the next name in dir that is a decimal pid or tid (*name set to it), 0 at its end, or -errno. */
int next_pid_name(DIR *dir, const char **name)
{
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(dir);
        if (!de)
            return errno ? -errno : 0;
        size_t len = pid_name_len(de->d_name);
        if (len > 0) {
            *name = de->d_name;
            return (int)len;
        }
    }
}

/* Returns 0 if pid is a thread group leader (a process), -ESRCH if it is another thread or gone, or -errno. */
int check_leader(int32_t pid)
{
    char path[48], buf[STAT_BUF];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return (errno == ENOENT || errno == ESRCH) ? -ESRCH : -errno;
    /* Tgid is the fourth line, well inside the first read: Name (at most 64
     * bytes, escaped x2 at worst), Umask, State, Tgid. */
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int err = n < 0 ? errno : 0;
    close(fd);
    if (n < 0)
        return (err == ESRCH || err == ENOENT) ? -ESRCH : -err;
    buf[n] = '\0';
    const char *t = strstr(buf, "\nTgid:");
    if (!t)
        return n == 0 ? -ESRCH : -EIO;
    long tgid = strtol(t + 6, NULL, 10);
    return tgid == pid ? 0 : -ESRCH;
}

/* Returns 0 with *out filled for pid, -ESRCH, or -errno; also fills *extra. */
static int read_pid_stat(int32_t pid, struct pt_proc *out, struct stat_extra *extra)
{
    char dir[32];
    if (pid <= 0)
        return -ESRCH;
    int len = snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
    int rc = read_process_at(AT_FDCWD, dir, (size_t)len, out, extra);
    /* /proc/<tid> answers for any thread, though readdir lists only processes:
     * a thread id is not a pid. Only a multi-threaded process can be asked about
     * by a thread id, so only those pay for the Tgid check. */
    if (rc == 0 && extra->num_threads > 1)
        rc = check_leader(pid);
    return rc;
}

/* Returns 0 with *out's stat fields (not uid) filled for pid, -ESRCH if it is gone or not a process, or -errno.
 * For pt_children's before/after reads, which need identity and threads, not the owner. */
int read_pid_stat_only(int32_t pid, struct pt_proc *out, struct stat_extra *extra)
{
    char path[48];
    if (pid <= 0)
        return -ESRCH;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int rc = read_stat_at(AT_FDCWD, path, out, extra);
    if (rc == 0 && extra->num_threads > 1)
        rc = check_leader(pid);
    return rc;
}

int pt_proc(int32_t pid, struct pt_proc *out)
{
    struct stat_extra extra;
    return read_pid_stat(pid, out, &extra);
}

/* Returns the number of thread ids of pid written to tids (at most cap), -ESRCH, or -errno.
 * More than cap threads gives -ENOBUFS. */
int list_threads(int32_t pid, int32_t *tids, int cap)
{
    char path[48];
    int n = 0;
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *dir = opendir(path);
    if (!dir)
        return (errno == ENOENT || errno == ESRCH) ? -ESRCH : -errno;
    const char *name;
    int len;
    while ((len = next_pid_name(dir, &name)) > 0 && n < cap)
        tids[n++] = (int32_t)strtol(name, NULL, 10);
    closedir(dir);
    if (len < 0)
        return len;
    return len > 0 ? -ENOBUFS : n; /* a name left over: more than cap threads */
}

/* Returns 1 with *state set if thread tid of pid exists and has not exited, 0 if not, or -errno. */
int thread_state(int32_t pid, int32_t tid, char *state)
{
    char path[64];
    struct pt_proc t;
    struct stat_extra extra;
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    int rc = read_stat_at(AT_FDCWD, path, &t, &extra);
    if (rc == -ESRCH)
        return 0;
    if (rc != 0)
        return rc;
    *state = t.state;
    return (t.state == 'Z' || t.state == 'X') ? 0 : 1;
}

/* Returns 0 with *state set to the state of a live thread of pid other than
 * its (exited) leader, leaving it alone if there is none, or -errno. */
static int live_thread_state(int32_t pid, char *state)
{
    int32_t tids[MAX_THREADS];
    int nt = list_threads(pid, tids, MAX_THREADS);
    if (nt == -ENOBUFS)
        nt = MAX_THREADS; /* the first MAX_THREADS are plenty to find a live one */
    if (nt < 0)
        return nt;
    for (int i = 0; i < nt; i++) {
        char s;
        if (tids[i] != pid && thread_state(pid, tids[i], &s) == 1) {
            *state = s;
            break;
        }
    }
    return 0;
}
