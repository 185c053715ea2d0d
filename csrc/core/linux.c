/* Linux process table: one pass over /proc, one read of <pid>/stat each.
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
 * - A process that exits while we scan is skipped (ESRCH/ENOENT, or a read of
 *   0 bytes); a stat line that does not parse is an error, never a half row.
 * - /proc/<pid>/environ and cmdline are opened with the target's mm checked
 *   (PTRACE_MODE_READ): another user's process fails the open with EACCES
 *   (or EPERM). A zombie or a kernel thread has no mm: older kernels open it
 *   and read 0 bytes, newer ones (6.18 here) fail the open with ESRCH while
 *   /proc/<pid> is still there. Both are an empty block; ESRCH is "gone"
 *   only once /proc/<pid> is gone too. Each read gives at most a page, so a
 *   block is read to end of file.
 */
#define _GNU_SOURCE
#include "platform.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* /proc/<pid>/stat is well under 1 KiB even with a 64-byte name. */
#define STAT_BUF 2048

/* Most processes have one thread; beyond this pt_children asks the caller to scan. */
#define MAX_THREADS 1024

/* Fields after the name that we parse, counting state as field 3. */
#define F_PPID        4
#define F_PGRP        5
#define F_SESSION     6
#define F_NUM_THREADS 20
#define F_STARTTIME   22

/* What one stat line tells beyond struct pt_proc. */
struct stat_extra {
    int64_t num_threads;
    char leader_state; /* the state stat printed: the leader thread's, even when others live */
};

/* Returns 0 with *out set, or -EINVAL if s..end does not start with a decimal. */
static int parse_int(const char **s, const char *end, int64_t *out)
{
    const char *p = *s;
    int neg = 0;
    int64_t v = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end || *p < '0' || *p > '9')
        return -EINVAL;
    while (p < end && *p >= '0' && *p <= '9') {
        v = v * 10 + (*p - '0');
        p++;
    }
    *out = neg ? -v : v;
    *s = p;
    return 0;
}

/* Returns 0 with *out filled from one stat line buf[0..len), or -EIO if malformed. */
static int parse_stat(const char *buf, size_t len, struct pt_proc *out, struct stat_extra *extra)
{
    const char *end = buf + len;
    const char *open = memchr(buf, '(', len);
    const char *close = memrchr(buf, ')', len);
    int64_t v;
    const char *p = buf;

    if (!open || !close || close < open)
        return -EIO;
    if (parse_int(&p, open, &v) != 0 || v <= 0 || v > INT32_MAX)
        return -EIO;
    out->pid = (int32_t)v;

    size_t name_len = (size_t)(close - open - 1);
    if (name_len > PT_NAME_MAX - 1)
        name_len = PT_NAME_MAX - 1;
    memcpy(out->name, open + 1, name_len);
    memset(out->name + name_len, 0, PT_NAME_MAX - name_len);

    p = close + 1;
    if (end - p < 3 || p[0] != ' ' || p[2] != ' ')
        return -EIO;
    out->state = p[1];
    out->leader_state = p[1];
    out->_pad = 0;
    extra->leader_state = p[1];
    p += 3; /* now at field 4 */

    for (int field = F_PPID; field <= F_STARTTIME; field++) {
        if (parse_int(&p, end, &v) != 0)
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
static int read_stat_at(int dirfd, const char *path, struct pt_proc *out, struct stat_extra *extra)
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
static int read_process_at(int dirfd, const char *dir, size_t dir_len, struct pt_proc *out, struct stat_extra *extra)
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
static int next_pid_name(DIR *dir, const char **name)
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

/* Returns an fd for path opened as a directory, or -errno. */
static int open_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int pt_snapshot(struct pt_proc *out, int cap)
{
    int count = 0, rc = 0;
    int dfd = open_dir("/proc");
    if (dfd < 0)
        return dfd;
    DIR *dir = fdopendir(dfd);
    if (!dir) {
        rc = -errno;
        close(dfd);
        return rc;
    }
    const char *name;
    int len;
    while ((len = next_pid_name(dir, &name)) > 0) {
        if (count >= cap) {
            rc = -ENOBUFS;
            break;
        }
        struct stat_extra extra;
        int r = read_process_at(dfd, name, (size_t)len, &out[count], &extra);
        if (r == -ESRCH)
            continue; /* exited while we scanned: not part of the table */
        if (r != 0) {
            rc = r;
            break;
        }
        count++;
    }
    closedir(dir); /* also closes dfd */
    if (len < 0)
        return len;
    return rc != 0 ? rc : count;
}

/* Returns 0 if pid is a thread group leader (a process), -ESRCH if it is another thread or gone, or -errno. */
static int check_leader(int32_t pid)
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
static int read_pid_stat_only(int32_t pid, struct pt_proc *out, struct stat_extra *extra)
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

/* Returns the number of pids appended to out[*n..cap) from the children file <dirfd>/<path>,
 * 0 if the thread is gone, -ENOBUFS, or -errno. The file is read to its end:
 * each read() yields at most a page, and the caller validates the result. */
static int read_children_file(int dirfd, const char *path, int32_t *out, int *n, int cap)
{
    char buf[4096];
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return (errno == ENOENT || errno == ESRCH) ? 0 : -errno;
    int64_t cur = -1; /* the number being parsed, carried across reads */
    int rc = 0;
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0) {
            rc = (errno == ESRCH || errno == ENOENT) ? 0 : -errno;
            break;
        }
        if (got == 0)
            break;
        for (ssize_t i = 0; i < got; i++) {
            char c = buf[i];
            if (c >= '0' && c <= '9') {
                cur = (cur < 0 ? 0 : cur * 10) + (c - '0');
                if (cur > INT32_MAX) {
                    rc = -EIO;
                    goto out;
                }
            } else if (cur >= 0) {
                if (*n >= cap) {
                    rc = -ENOBUFS;
                    goto out;
                }
                out[(*n)++] = (int32_t)cur;
                cur = -1;
            }
        }
    }
    if (rc == 0 && cur >= 0) {
        if (*n >= cap)
            rc = -ENOBUFS;
        else
            out[(*n)++] = (int32_t)cur;
    }
out:
    close(fd);
    return rc;
}

/* Returns the number of thread ids of pid written to tids (at most cap), -ESRCH, or -errno.
 * More than cap threads gives -ENOBUFS. */
static int list_threads(int32_t pid, int32_t *tids, int cap)
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
static int thread_state(int32_t pid, int32_t tid, char *state)
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

/* Returns 1 if thread tid of pid still exists and has not exited, 0 if not, or -errno. */
static int thread_alive(int32_t pid, int32_t tid)
{
    char state;
    return thread_state(pid, tid, &state);
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

/*
 * /proc/<pid>/task/<tid>/children lists the children forked by one thread and
 * is documented as unreliable while children exit: the kernel resumes its walk
 * by position when the child it returned last has left the list, which can
 * skip a sibling. That can only happen when a child we returned is reaped (or
 * reparented) during the read, so the walk (walk.c) reads every listed child back and
 * retries when one vanished or changed parent. What this function guards
 * itself is the thread side: children move between a process's threads when a
 * thread exits, so it returns -EAGAIN when any thread it read exited meanwhile.
 */
int pt_children_of(const struct pt_proc *parent, int32_t *out, int cap)
{
    struct pt_proc after;
    struct stat_extra xa;
    char path[64];
    int32_t pid = parent->pid;
    int n = 0, rc;

    if (!parent->threaded && parent->leader_state != 'Z') {
        /* One thread when the row was read: a thread made since then can only
         * hold children forked since then, and the leader's own children can
         * move to it only if the leader exits, which the after-read catches. */
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
        rc = read_children_file(AT_FDCWD, path, out, &n, cap);
        if (rc < 0)
            return rc;
    } else {
        int32_t tids[MAX_THREADS];
        int nt = list_threads(pid, tids, MAX_THREADS);
        if (nt == -ENOBUFS)
            return -EAGAIN;
        if (nt < 0)
            return nt;
        for (int i = 0; i < nt; i++) {
            snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)tids[i]);
            rc = read_children_file(AT_FDCWD, path, out, &n, cap);
            if (rc < 0)
                return rc;
        }
        for (int i = 0; i < nt; i++) {
            int alive = thread_alive(pid, tids[i]);
            if (alive < 0)
                return alive;
            /* The leader of a live process stays listed as a zombie after it exits. */
            if (!alive && !(tids[i] == pid && parent->leader_state == 'Z'))
                return -EAGAIN;
        }
    }

    rc = read_pid_stat_only(pid, &after, &xa);
    if (rc != 0)
        return rc;
    if (after.start_time != parent->start_time)
        return -ESRCH; /* pid was reused: the process we were asked about is gone */
    if (parent->leader_state != 'Z' && xa.leader_state == 'Z')
        return -EAGAIN; /* its leader exited: its children moved while we read */
    return n;
}

int pt_children(int32_t pid, int32_t *out, int cap)
{
    struct pt_proc before;
    struct stat_extra xb;
    int rc = read_pid_stat_only(pid, &before, &xb);
    if (rc != 0)
        return rc;
    return pt_children_of(&before, out, cap);
}

/*
 * A walk's read of a listed child with its own children list first, so the
 * record's stat read is also the read back pt_children_of makes after a list.
 * The list stands only if task/'s link count (2 + threads, an exited leader
 * still counted) said one thread before it, the record shows the leader
 * alive, and the record's start time is a whole tick before the reads began
 * (a reused pid starts later; the tick covers the kernel's NMI-safe fork
 * stamp reading a hair behind clock_gettime). docs/platforms.md says why each
 * suffices. The owner is task/'s, which procfs sets as /proc/<pid>'s.
 */
int pt_proc_listed(int32_t pid, struct pt_proc *out, int32_t *kids, int cap)
{
    char path[64];
    struct stat task;
    struct stat_extra extra;
    uint64_t began;
    int n = 0;
    if (pid <= 0)
        return -ESRCH;
    int rc = pt_now(&began);
    if (rc != 0)
        return rc;
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    if (stat(path, &task) != 0)
        return (errno == ENOENT || errno == ESRCH) ? -ESRCH : -errno;
    if (task.st_nlink == 3) {
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
        rc = read_children_file(AT_FDCWD, path, kids, &n, cap);
        if (rc == -ENOBUFS)
            return rc;
        if (rc == 0) {
            snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
            rc = read_stat_at(AT_FDCWD, path, out, &extra);
            if (rc == 0 && extra.num_threads > 1)
                rc = check_leader(pid); /* one thread at the start: only a reused pid could be a thread's */
            if (rc != 0)
                return rc;
            if (out->leader_state != 'Z' && out->start_time + 1 < began) {
                out->uid = (uint32_t)task.st_uid;
                return n;
            }
        }
    }
    rc = pt_proc(pid, out);
    return rc != 0 ? rc : -EAGAIN;
}

int pt_now(uint64_t *out)
{
    struct timespec ts;
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0)
        return -EINVAL;
    if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
        return -errno;
    /* stat's starttime is boot time in clock ticks, rounded down. */
    *out = (uint64_t)ts.tv_sec * (uint64_t)hz + (uint64_t)ts.tv_nsec / (1000000000UL / (uint64_t)hz);
    return 0;
}

/* Returns an fd for /proc/<pid>/<name>, -ENODATA if pid has no mm to read (a zombie, a
 * kernel thread, one exiting), -ESRCH if pid is gone, -EACCES/-EPERM if refused, or -errno. */
static int open_pid_file(int32_t pid, const char *name)
{
    char path[48];
    struct stat st;
    if (pid <= 0)
        return -ESRCH;
    int len = snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        return fd;
    int err = errno;
    if (err == ESRCH) {
        path[len - strlen(name) - 1] = '\0'; /* /proc/<pid> */
        if (stat(path, &st) == 0)
            return -ENODATA; /* still listed: it has no mm, not "gone" */
    }
    return (err == ENOENT || err == ESRCH) ? -ESRCH : -err;
}

/* Returns the number of bytes of /proc/<pid>/<name> read into buf, -E2BIG if longer than cap, -ESRCH, or -errno. */
static int read_pid_block(int32_t pid, const char *name, char *buf, size_t cap)
{
    if (cap > INT32_MAX)
        cap = INT32_MAX; /* the count must fit the return */
    int fd = open_pid_file(pid, name);
    if (fd == -ENODATA)
        return 0;
    if (fd < 0)
        return fd;
    size_t n = 0;
    int rc = 0;
    for (;;) {
        char probe;
        /* Once buf is full, one byte more tells a block of exactly cap from a longer one. */
        ssize_t got = n < cap ? read(fd, buf + n, cap - n) : read(fd, &probe, 1);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            rc = (errno == ESRCH || errno == ENOENT) ? -ESRCH : -errno;
            break;
        }
        if (got == 0)
            break;
        if (n >= cap) {
            rc = -E2BIG;
            break;
        }
        n += (size_t)got;
    }
    close(fd);
    return rc != 0 ? rc : (int)n;
}

int pt_environ(int32_t pid, char *buf, size_t cap)
{
    return read_pid_block(pid, "environ", buf, cap);
}

int pt_cmdline(int32_t pid, char *buf, size_t cap)
{
    return read_pid_block(pid, "cmdline", buf, cap);
}

/* Returns what pt_stream_find returns for /proc/<pid>/environ (scanning at most PT_ENV_SCAN_MAX bytes), -ESRCH, or -errno. */
int pt_env_find_checked(int32_t pid, const char *key, size_t keylen, char *val, size_t valcap, char *scratch,
                        size_t scratchcap)
{
    int fd = open_pid_file(pid, "environ");
    if (fd < 0)
        return fd;
    int rc = pt_stream_find(fd, key, keylen, val, valcap, scratch, scratchcap, PT_ENV_SCAN_MAX);
    close(fd);
    return rc == -ENOENT ? -ESRCH : rc;
}
