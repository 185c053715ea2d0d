/* Linux, the whole table: pt_snapshot in one pass over /proc, one read of <pid>/stat each; a process's children
 * (pt_children_of, pt_children, pt_proc_listed); and pt_now (the clock, in start_time units). One process's reads are
 * linux_proc.c's.
 *
 * Why this shape:
 * - A process that exits while we scan is skipped (ESRCH/ENOENT, or a read of
 *   0 bytes); a stat line that does not parse is an error, never a half row.
 */
#define _GNU_SOURCE
#include "linux.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* Returns 1 if thread tid of pid still exists and has not exited, 0 if not, or -errno. */
static int thread_alive(int32_t pid, int32_t tid)
{
    char state;
    return thread_state(pid, tid, &state);
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
