/* Process facts on Linux: stat, and on request status, cmdline, exe and cwd, of one process or of the table.
 *
 * Why this shape:
 * - Every file of one process is opened relative to one open /proc/<pid> directory. That directory stands for
 *   one process, not for a number: once the process is gone, opening anything under it fails (ENOENT/ESRCH),
 *   even when a new process has the pid by then. So one stat read gives the start time, and the caller's start
 *   time, compared with it, pins every other file to the same process.
 * - stat alone gives the state, parent, name, start time, CPU ticks, virtual size, resident pages, threads,
 *   terminal and flags: memory comes from stat, not statm (the same counters), which saves a file per process.
 * - /proc/<tid> answers for any thread, though readdir lists only processes: a pid asked about by number is
 *   checked to be a thread group leader (status's Tgid) when it has more than one thread.
 * - cmdline and the exe and cwd links check the target's mm (PTRACE_MODE_READ): another user's process may
 *   refuse them (the bit goes to `denied`), a zombie or a kernel thread has none (ENOENT, or ESRCH while the
 *   process is still listed): an empty string, as psutil gives. A file refused is unknown, never empty.
 * - The kernel's units stay: clock ticks, pages. The binding converts, with the boot time and page size it reads.
 */
#define _GNU_SOURCE
#include "platform.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* /proc/<pid>/stat is well under 1 KiB even with a 64-byte name; status is about 1.5 KiB. */
#define STAT_BUF   2048
#define STATUS_BUF 8192

/* Where a row's strings go: buf[used..cap), advanced as each is written. */
struct arena {
    char *buf;
    size_t cap, used;
};

/* Returns an arena over buf[0..cap), its size bounded so that every offset fits a row's uint32_t fields. */
static struct arena arena_of(char *buf, size_t cap)
{
    struct arena a = {buf, buf ? (cap > UINT32_MAX ? UINT32_MAX : cap) : 0, 0};
    return a;
}

/* Returns -ESRCH for the errors that mean "the process is gone" (ENOENT, ESRCH), else -err. */
static int gone_or(int err)
{
    return (err == ENOENT || err == ESRCH) ? -ESRCH : -err;
}

/* Returns the number of bytes of <dirfd>/<name> read into buf (at most cap, to its end), or -errno. */
static int read_small_at(int dirfd, const char *name, char *buf, size_t cap)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    int rc = 0;
    while (n < cap) {
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    return rc != 0 ? rc : (int)n;
}

/* Returns 0 with the stat fields of *out read through dirfd, -ESRCH if the process is gone, or -errno. */
static int read_stat_facts(int dirfd, struct pt_facts *out)
{
    char buf[STAT_BUF];
    int n = read_small_at(dirfd, "stat", buf, sizeof buf);
    if (n < 0)
        return gone_or(-n);
    if (n == 0)
        return -ESRCH; /* reaped between open and read */
    if ((size_t)n == sizeof buf)
        return -EIO; /* never parse a cut line */
    return pt_parse_stat_facts(buf, (size_t)n, out);
}

/* Returns 0 with the uids of *out (and *tgid) read through dirfd's status, -ESRCH if gone, or -errno. */
static int read_status_ids(int dirfd, struct pt_facts *out, int32_t *tgid)
{
    char buf[STATUS_BUF];
    uint32_t uids[3];
    int n = read_small_at(dirfd, "status", buf, sizeof buf);
    if (n < 0)
        return gone_or(-n);
    if (n == 0)
        return -ESRCH;
    int rc = pt_parse_status_ids(buf, (size_t)n, tgid, uids);
    if (rc != 0)
        return rc == -ENODATA ? -EIO : rc;
    out->ruid = uids[0];
    out->euid = uids[1];
    out->suid = uids[2];
    return 0;
}

/* Returns 0 if the process behind dirfd still has its stat file (alive or a zombie), -ESRCH if it is gone. */
static int still_there(int dirfd)
{
    char buf[STAT_BUF];
    int n = read_small_at(dirfd, "stat", buf, sizeof buf);
    return n > 0 ? 0 : -ESRCH;
}

/* Returns 0 with cmdline appended to *a (off/len set; empty for a process without mm), 1 if refused, -ESRCH,
 * -ENOBUFS if it does not fit, or -errno. */
static int read_cmdline_at(int dirfd, struct arena *a, uint32_t *off, uint32_t *len)
{
    *off = (uint32_t)a->used;
    *len = 0;
    int fd = openat(dirfd, "cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == EACCES || err == EPERM)
            return 1;
        /* ESRCH while the process is still listed: it has no mm (a zombie, a kernel thread). */
        return (err == ESRCH || err == ENOENT) ? still_there(dirfd) : -err;
    }
    size_t n = 0, room = a->cap - a->used;
    int rc = 0;
    for (;;) {
        char probe;
        /* Once the room is full, one byte more tells a block that fits exactly from a longer one. */
        ssize_t got = n < room ? read(fd, a->buf + a->used + n, room - n) : read(fd, &probe, 1);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            rc = gone_or(errno);
            break;
        }
        if (got == 0)
            break;
        if (n >= room || n + (size_t)got > UINT32_MAX) {
            rc = -ENOBUFS;
            break;
        }
        n += (size_t)got;
    }
    close(fd);
    if (rc != 0)
        return rc;
    *len = (uint32_t)n;
    a->used += n;
    return 0;
}

/* Returns 0 with link `name` of dirfd appended to *a (empty where the kernel has none), 1 if refused, -ESRCH,
 * -ENOBUFS if it does not fit, or -errno. */
static int read_link_at(int dirfd, const char *name, struct arena *a, uint32_t *off, uint32_t *len)
{
    size_t room = a->cap - a->used;
    *off = (uint32_t)a->used;
    *len = 0;
    char probe;
    /* No room at all (or no buffer): one byte still tells a link that exists from one that does not. */
    ssize_t n = room ? readlinkat(dirfd, name, a->buf + a->used, room) : readlinkat(dirfd, name, &probe, 1);
    if (n < 0) {
        int err = errno;
        if (err == EACCES || err == EPERM)
            return 1;
        /* A zombie or a kernel thread has no exe (and a zombie no cwd): ENOENT while its stat is still there. */
        return (err == ENOENT || err == ESRCH) ? still_there(dirfd) : -err;
    }
    if ((size_t)n >= room)
        return -ENOBUFS; /* readlink cuts silently: a full buffer may be a cut path */
    *len = (uint32_t)n;
    a->used += (size_t)n;
    return 0;
}

/* Returns 0 with *out filled for the process whose /proc directory is dirfd, checked to be `pid`, a leader (unless
 * `listed`: readdir of /proc lists leaders only) and to have started at *start (if not NULL); -ESRCH, -ENOBUFS or
 * -errno. Strings go to *a. */
static int read_facts_at(int dirfd, int32_t pid, int listed, const uint64_t *start, uint32_t want, struct pt_facts *out,
                         struct arena *a)
{
    int32_t tgid = pid;
    int rc = read_stat_facts(dirfd, out);
    if (rc != 0)
        return rc;
    out->have = PT_FACT_STAT;
    if (out->pid != pid || (start && out->start_time != *start))
        return -ESRCH; /* another process has the pid now */
    if (want & PT_FACT_UIDS || (!listed && out->num_threads > 1)) {
        rc = read_status_ids(dirfd, out, &tgid);
        if (rc != 0)
            return rc;
        if (tgid != pid)
            return -ESRCH; /* a thread id, not a process */
        if (want & PT_FACT_UIDS)
            out->have |= PT_FACT_UIDS;
    }
    if (want & PT_FACT_CMDLINE) {
        rc = pt_facts_record_string(read_cmdline_at(dirfd, a, &out->cmdline_off, &out->cmdline_len), PT_FACT_CMDLINE,
                                    out);
        if (rc != 0)
            return rc;
    }
    if (want & PT_FACT_EXE) {
        rc = pt_facts_record_string(read_link_at(dirfd, "exe", a, &out->exe_off, &out->exe_len), PT_FACT_EXE, out);
        if (rc != 0)
            return rc;
    }
    if (want & PT_FACT_CWD) {
        rc = pt_facts_record_string(read_link_at(dirfd, "cwd", a, &out->cwd_off, &out->cwd_len), PT_FACT_CWD, out);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Returns the status of one row, for <procfd>/<name> (pid; `listed` as read_facts_at), also written to
 * out->status: 0 or -errno. Its strings go to *a, and are taken back if the row fails. */
static int facts_row(int procfd, const char *name, int32_t pid, int listed, const uint64_t *start, uint32_t want,
                     struct pt_facts *out, struct arena *a)
{
    size_t mark = a->used;
    memset(out, 0, sizeof *out);
    out->pid = pid;
    int rc;
    int dirfd = openat(procfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        rc = gone_or(errno);
    } else {
        rc = read_facts_at(dirfd, pid, listed, start, want, out, a);
        close(dirfd);
    }
    if (rc != 0) {
        a->used = mark;
        out->have = 0;
        out->pid = pid;
    }
    out->status = rc;
    return rc;
}

/* Returns 0 for a wanted mask the reader knows, else -EINVAL. */
static int check_want(uint32_t want)
{
    return (want & ~(uint32_t)PT_FACT_ALL) ? -EINVAL : 0;
}

int pt_facts(int32_t pid, const uint64_t *start_time, uint32_t want, struct pt_facts *out, char *buf, size_t cap)
{
    struct arena a = arena_of(buf, cap);
    char name[32];
    if (check_want(want) != 0 || !out)
        return -EINVAL;
    if (pid <= 0)
        return -ESRCH;
    snprintf(name, sizeof name, "/proc/%d", (int)pid);
    return facts_row(AT_FDCWD, name, pid, 0, start_time, want, out, &a);
}

int pt_facts_scan(const int32_t *pids, const uint64_t *starts, int n, uint32_t want, struct pt_facts *out, char *buf,
                  size_t cap)
{
    if (n < 0 || (n > 0 && (!pids || !out)) || check_want(want) != 0)
        return -EINVAL;
    int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (procfd < 0)
        return -errno;
    struct arena a = arena_of(buf, cap);
    char name[16];
    for (int i = 0; i < n; i++) {
        const uint64_t *start = starts ? &starts[i] : NULL;
        if (pids[i] <= 0) {
            memset(&out[i], 0, sizeof out[i]);
            out[i].pid = pids[i];
            out[i].status = -ESRCH;
            continue;
        }
        snprintf(name, sizeof name, "%d", (int)pids[i]);
        (void)facts_row(procfd, name, pids[i], 0, start, want, &out[i], &a);
    }
    close(procfd);
    return 0;
}

/* Returns the pid a /proc entry's name spells if it is all digits and fits a pid, else 0. */
static int32_t pid_of_name(const char *name)
{
    int64_t v = 0;
    size_t i = 0;
    for (; name[i]; i++) {
        if (name[i] < '0' || name[i] > '9' || i >= 10)
            return 0;
        v = v * 10 + (name[i] - '0');
    }
    return (i > 0 && v <= INT32_MAX) ? (int32_t)v : 0;
}

int pt_facts_table(uint32_t want, struct pt_facts *out, int cap, char *buf, size_t bufcap)
{
    if (check_want(want) != 0 || cap < 0 || (cap > 0 && !out))
        return -EINVAL;
    int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (procfd < 0)
        return -errno;
    DIR *dir = fdopendir(procfd);
    if (!dir) {
        int err = errno;
        close(procfd);
        return -err;
    }
    struct arena a = arena_of(buf, bufcap);
    int count = 0, rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(dir);
        if (!de) {
            rc = errno ? -errno : 0;
            break;
        }
        int32_t pid = pid_of_name(de->d_name);
        if (pid == 0)
            continue;
        if (count >= cap) {
            rc = -ENOBUFS;
            break;
        }
        if (facts_row(procfd, de->d_name, pid, 1, NULL, want, &out[count], &a) == -ESRCH)
            continue; /* exited while we scanned: not part of the table */
        count++;
    }
    closedir(dir); /* also closes procfd */
    return rc != 0 ? rc : count;
}
