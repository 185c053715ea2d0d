/* macOS process table: libproc (proc_listallpids, proc_pidinfo,
 * proc_listchildpids) with sysctl(KERN_PROC_PID) where libproc refuses.
 *
 * Why this shape:
 * - The libproc wrappers return a COUNT of pids but take the buffer size in
 *   BYTES, report errors as 0 (not -1) with errno set, and truncate silently
 *   when the buffer is too small. So: errno is cleared before each call, 0 is
 *   an error only when errno says so, and a full buffer means "maybe more".
 * - PROC_PIDT_SHORTBSDINFO needs no same-user check, so it reads other users'
 *   processes; PROC_PIDTBSDINFO (start time, long name) gives EPERM for them.
 *   Both have been seen failing with ESRCH for zombies on real machines
 *   (https://github.com/netdata/netdata/pull/23297,
 *   https://github.com/unslothai/unsloth/pull/8493, and psutil's zombie
 *   guessing in https://github.com/giampaolo/psutil/issues/2650), even though
 *   xnu looks zombies up when arg != 0 (we pass 1). sysctl(KERN_PROC_PID) is
 *   what ps uses and answers for every process, zombies included, so it is
 *   the fallback for both refusals. Its p_starttime and pbi_start_* are both
 *   copied from the kernel's p_start, so start_time is the same whichever
 *   path read it: identity checks compare equal values.
 * - sysctl(KERN_PROC_PID) "succeeds" with length 0 for a pid that is gone
 *   (psutil documents this in psutil/arch/osx/proc_utils.c): that is ESRCH.
 * - proc_pidinfo may return fewer bytes than the struct: that is a layout
 *   mismatch, an error, never a half-filled row (psutil checks the same).
 * - getsid() uses proc_find(), which skips zombies: a zombie's sid is
 *   reported as 0, "unknown" (zombies count as gone; no session rule may
 *   match them).
 * - pid 0 (kernel_task) is left out of the table, as on Linux: 0 is the
 *   parent of the roots (launchd has ppid 0), never a process to signal.
 * - No allocation: pt_snapshot keeps the pid list in the tail of the
 *   caller's row buffer (see pt_snapshot), rows come out in ascending pid
 *   order (the Python model bisects on pid; the kernel lists newest first).
 */
#define _DARWIN_C_SOURCE /* struct kinfo_proc, struct extern_proc */
#include "proctree.h"

#include <errno.h>
#include <libproc.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/proc.h>
#include <sys/proc_info.h>
#include <sys/sysctl.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

/* The kernel copies these structs out by size: a header that drifts from the
 * kernel's layout must fail the build, not silently misread fields. */
_Static_assert(sizeof(struct proc_bsdinfo) == 136, "proc_bsdinfo size");
_Static_assert(offsetof(struct proc_bsdinfo, pbi_status) == 4, "pbi_status");
_Static_assert(offsetof(struct proc_bsdinfo, pbi_ppid) == 16, "pbi_ppid");
_Static_assert(offsetof(struct proc_bsdinfo, pbi_uid) == 20, "pbi_uid");
_Static_assert(offsetof(struct proc_bsdinfo, pbi_comm) == 48, "pbi_comm");
_Static_assert(offsetof(struct proc_bsdinfo, pbi_name) == 64, "pbi_name");
_Static_assert(offsetof(struct proc_bsdinfo, pbi_pgid) == 100, "pbi_pgid");
_Static_assert(offsetof(struct proc_bsdinfo, pbi_start_tvsec) == 120, "pbi_start_tvsec");
_Static_assert(offsetof(struct proc_bsdinfo, pbi_start_tvusec) == 128, "pbi_start_tvusec");

_Static_assert(sizeof(struct proc_bsdshortinfo) == 64, "proc_bsdshortinfo size");
_Static_assert(offsetof(struct proc_bsdshortinfo, pbsi_pid) == 0, "pbsi_pid");
_Static_assert(offsetof(struct proc_bsdshortinfo, pbsi_ppid) == 4, "pbsi_ppid");
_Static_assert(offsetof(struct proc_bsdshortinfo, pbsi_pgid) == 8, "pbsi_pgid");
_Static_assert(offsetof(struct proc_bsdshortinfo, pbsi_status) == 12, "pbsi_status");
_Static_assert(offsetof(struct proc_bsdshortinfo, pbsi_comm) == 16, "pbsi_comm");
_Static_assert(offsetof(struct proc_bsdshortinfo, pbsi_flags) == 32, "pbsi_flags");
_Static_assert(offsetof(struct proc_bsdshortinfo, pbsi_uid) == 36, "pbsi_uid");
_Static_assert(offsetof(struct proc_bsdshortinfo, pbsi_gid) == 40, "pbsi_gid");
_Static_assert(offsetof(struct proc_bsdshortinfo, pbsi_ruid) == 44, "pbsi_ruid");
_Static_assert(offsetof(struct proc_bsdshortinfo, pbsi_rgid) == 48, "pbsi_rgid");
_Static_assert(offsetof(struct proc_bsdshortinfo, pbsi_svuid) == 52, "pbsi_svuid");
_Static_assert(offsetof(struct proc_bsdshortinfo, pbsi_svgid) == 56, "pbsi_svgid");
_Static_assert(offsetof(struct proc_bsdshortinfo, pbsi_rfu) == 60, "pbsi_rfu");

/* The 64-bit kinfo_proc the kernel fills for KERN_PROC_PID (648 bytes, p_stat
 * at 36 and p_pid at 40, as measured on macOS 14 in unsloth#8493 above). */
_Static_assert(sizeof(struct kinfo_proc) == 648, "kinfo_proc size");
_Static_assert(offsetof(struct kinfo_proc, kp_proc.p_stat) == 36, "kp_proc.p_stat");
_Static_assert(offsetof(struct kinfo_proc, kp_proc.p_pid) == 40, "kp_proc.p_pid");

/* pt_snapshot keeps its pid list inside the row buffer; the proof above
 * pt_snapshot needs a row of at least two pids. */
_Static_assert(sizeof(struct pt_proc) >= 2 * sizeof(int32_t), "row holds two pids");

/* Returns the Linux letter for a BSD p_stat value. */
static char state_letter(uint32_t st)
{
    switch (st) {
    case SRUN: return 'R';
    case SSLEEP: return 'S';
    case SSTOP: return 'T';
    case SZOMB: return 'Z';
    /* SIDL is "being created by fork": alive and about to run, waiting on no
     * I/O, so 'R' (not 'D', which means stuck in uninterruptible sleep). A
     * teardown must treat it as alive, never as gone. */
    case SIDL: return 'R';
    /* A state this code does not know: report it as alive ('R'), because a
     * read we cannot interpret is "unknown", never "dead". */
    default: return 'R';
    }
}

/* Returns 0 after copying src (at most srclen bytes, maybe unterminated) into name as a NUL-padded string. */
static int copy_name(char name[PT_NAME_MAX], const char *src, size_t srclen)
{
    size_t len = strnlen(src, srclen);
    if (len > PT_NAME_MAX - 1)
        len = PT_NAME_MAX - 1;
    memcpy(name, src, len);
    memset(name + len, 0, PT_NAME_MAX - len);
    return 0;
}

/* Returns 0 with *out filled, -ESRCH if pid is gone (or a zombie libproc refuses), or -errno. */
static int short_info(int32_t pid, struct proc_bsdshortinfo *out)
{
    errno = 0;
    int n = proc_pidinfo(pid, PROC_PIDT_SHORTBSDINFO, 1, out, (int)sizeof *out);
    if (n == (int)sizeof *out)
        return 0;
    if (n <= 0)
        return errno ? -errno : -EIO; /* no errno: we cannot say it is gone */
    return -EIO;                      /* short copy: layout drift */
}

/* Returns 0 with *out filled, -EPERM for another user's process, -ESRCH, or -errno. */
static int bsd_info(int32_t pid, struct proc_bsdinfo *out)
{
    errno = 0;
    int n = proc_pidinfo(pid, PROC_PIDTBSDINFO, 1, out, (int)sizeof *out);
    if (n == (int)sizeof *out)
        return 0;
    if (n <= 0)
        return errno ? -errno : -EIO;
    return -EIO;
}

/* Returns 0 with *out filled, -ESRCH if pid is gone (sysctl reports that as length 0), or -errno. */
static int kinfo(int32_t pid, struct kinfo_proc *out)
{
    int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID, (int)pid};
    size_t len = sizeof *out;
    if (sysctl(mib, 4, out, &len, NULL, 0) != 0)
        return errno == ENOENT ? -ESRCH : -errno;
    if (len == 0)
        return -ESRCH;
    if (len != sizeof *out || out->kp_proc.p_pid != pid)
        return -EIO;
    return 0;
}

/* Returns the start time of a kinfo_proc record in start_time units (microseconds since the epoch). */
static uint64_t kinfo_start(const struct kinfo_proc *kp)
{
    const struct timeval *tv = &kp->kp_proc.p_starttime;
    return (uint64_t)tv->tv_sec * 1000000u + (uint64_t)tv->tv_usec;
}

/* Returns 0 with *out filled from a kinfo_proc record (sid left for the caller). */
static int fill_from_kinfo(const struct kinfo_proc *kp, struct pt_proc *out)
{
    out->pid = kp->kp_proc.p_pid;
    out->ppid = kp->kp_eproc.e_ppid;
    out->pgid = kp->kp_eproc.e_pgid;
    out->uid = (uint32_t)kp->kp_eproc.e_ucred.cr_uid;
    out->state = state_letter((uint32_t)(unsigned char)kp->kp_proc.p_stat);
    out->start_time = kinfo_start(kp);
    return copy_name(out->name, kp->kp_proc.p_comm, sizeof kp->kp_proc.p_comm);
}

/* Returns 0 with out->sid set (0 where getsid refuses a process that is still there), -ESRCH if pid is gone, or -errno. */
static int fill_sid(int32_t pid, struct pt_proc *out)
{
    pid_t sid = getsid(pid);
    if (sid >= 0) {
        out->sid = sid;
        return 0;
    }
    int err = errno;
    if (err != ESRCH)
        return -err;
    /* getsid() goes through proc_find(), which skips zombies (and processes
     * still being created): ask sysctl whether the process we read is there. */
    struct kinfo_proc kp;
    int rc = kinfo(pid, &kp);
    if (rc != 0)
        return rc;
    if (kinfo_start(&kp) != out->start_time)
        return -ESRCH; /* the process we read is gone; this is another one */
    if (kp.kp_proc.p_stat == SZOMB)
        out->state = 'Z';
    out->sid = 0; /* unknown, never guessed: no session rule can match it */
    return 0;
}

/* Returns 0 with *out filled for pid, -ESRCH if it is gone, or -errno. */
static int read_one(int32_t pid, struct pt_proc *out)
{
    struct proc_bsdshortinfo si;
    struct proc_bsdinfo bi;
    struct kinfo_proc kp;
    int rc;

    memset(out, 0, sizeof *out);
    if (pid <= 0)
        return -ESRCH;
    rc = short_info(pid, &si);
    if (rc != 0) {
        /* Refused (a zombie, a sandbox rule) or gone: sysctl decides which. */
        rc = kinfo(pid, &kp);
        if (rc != 0)
            return rc;
        fill_from_kinfo(&kp, out);
        return fill_sid(pid, out);
    }
    out->pid = (int32_t)si.pbsi_pid;
    out->ppid = (int32_t)si.pbsi_ppid;
    out->pgid = (int32_t)si.pbsi_pgid;
    out->uid = (uint32_t)si.pbsi_uid;
    out->state = state_letter(si.pbsi_status);

    rc = bsd_info(pid, &bi);
    if (rc == 0) {
        out->start_time = bi.pbi_start_tvsec * 1000000u + bi.pbi_start_tvusec;
        /* pbi_name is the executable's name up to 31 bytes; pbi_comm (and
         * pbsi_comm) stop at 15. Prefer the longer one when it is set. */
        if (bi.pbi_name[0])
            copy_name(out->name, bi.pbi_name, sizeof bi.pbi_name);
        else
            copy_name(out->name, bi.pbi_comm, sizeof bi.pbi_comm);
    } else {
        /* EPERM for another user's process; ESRCH if it became a zombie. */
        rc = kinfo(pid, &kp);
        if (rc != 0)
            return rc;
        out->start_time = kinfo_start(&kp);
        if (kp.kp_proc.p_stat == SZOMB)
            out->state = 'Z';
        copy_name(out->name, si.pbsi_comm, sizeof si.pbsi_comm);
    }
    return fill_sid(pid, out);
}

/* Returns <0, 0 or >0 as pid *a sorts before, with or after pid *b (ascending, for qsort). */
static int cmp_pid(const void *a, const void *b)
{
    int32_t x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    return (x > y) - (x < y);
}

/* The kernel has no pid above this (PID_MAX is 99999); it bounds the request size. */
#define PIDS_REQUEST_MAX (1 << 24)

/*
 * The pid list lives in the tail of the caller's buffer, so the table needs
 * no allocation beyond the rows the caller sized. With R = sizeof(struct
 * pt_proc), w <= cap + 1 pid slots ending at byte cap*R, and n <= cap pids
 * returned, pid j sits at cap*R - 4w + 4j. Row k <= i is written only after
 * pid i was read, and ends at R(i+1); the next unread pid (j = i+1 <= n-1
 * <= cap-1) starts at cap*R - 4w + 4(i+1) >= R(i+1) whenever R >= 8, so no
 * row ever covers a pid not yet read. The kernel builds its answer under
 * its process-list lock: one consistent list.
 */
int pt_snapshot(struct pt_proc *out, int cap)
{
    if (cap < 0)
        return -EINVAL;
    if (cap == 0)
        return -ENOBUFS; /* there is always at least one process: us */

    char *base = (char *)out;
    size_t row = sizeof(struct pt_proc);
    size_t total = (size_t)cap * row;
    /* Ask for one pid more than cap: the kernel truncates silently, so only
     * an answer of at most cap pids is known to be the whole table. */
    int want = cap < PIDS_REQUEST_MAX ? cap + 1 : PIDS_REQUEST_MAX;
    char *pids = base + total - (size_t)want * sizeof(int32_t);

    errno = 0;
    int n = proc_listallpids(pids, want * (int)sizeof(int32_t));
    if (n <= 0)
        return errno ? -errno : -EIO; /* never an empty table: we are in it */
    if (n > cap || n >= want)
        return -ENOBUFS;

    /* Sort the pids in place so rows come out in ascending pid order. */
    qsort(pids, (size_t)n, sizeof(int32_t), cmp_pid);

    int count = 0;
    for (int i = 0; i < n; i++) {
        int32_t pid;
        memcpy(&pid, pids + (size_t)i * sizeof(int32_t), sizeof pid);
        if (pid <= 0)
            continue; /* kernel_task (pid 0) is not part of the table */
        struct pt_proc p;
        int rc = read_one(pid, &p);
        if (rc == -ESRCH)
            continue; /* exited (and was reaped) while we scanned */
        if (rc != 0)
            return rc;
        memcpy(base + (size_t)count * row, &p, row);
        count++;
    }
    return count;
}

/* Returns 0 with *out filled, -ESRCH if pid does not exist, or -errno. */
int pt_proc(int32_t pid, struct pt_proc *out)
{
    return read_one(pid, out);
}

/* Returns 0 with *start and *ppid set for pid, -ESRCH if it is gone, or -errno. */
static int start_and_ppid(int32_t pid, uint64_t *start, int32_t *ppid)
{
    struct proc_bsdinfo bi;
    struct kinfo_proc kp;
    if (bsd_info(pid, &bi) == 0) {
        *start = bi.pbi_start_tvsec * 1000000u + bi.pbi_start_tvusec;
        *ppid = (int32_t)bi.pbi_ppid;
        return 0;
    }
    int rc = kinfo(pid, &kp);
    if (rc != 0)
        return rc;
    *start = kinfo_start(&kp);
    *ppid = kp.kp_eproc.e_ppid;
    return 0;
}

/* Returns 0 with *ppid set for pid, -ESRCH if it is gone, or -errno. */
static int ppid_of(int32_t pid, int32_t *ppid)
{
    struct proc_bsdshortinfo si;
    struct kinfo_proc kp;
    if (short_info(pid, &si) == 0) {
        *ppid = (int32_t)si.pbsi_ppid;
        return 0;
    }
    int rc = kinfo(pid, &kp);
    if (rc != 0)
        return rc;
    *ppid = kp.kp_eproc.e_ppid;
    return 0;
}

/*
 * proc_listchildpids is PROC_PPID_ONLY under the kernel's process-list lock:
 * one consistent list (no skipped siblings, unlike Linux's children files),
 * zombies included. Two traps: it truncates silently, so a full buffer is
 * reported as -ENOBUFS (the binding grows and retries), and it also lists a
 * traced process under its original parent (p_oppid) while its ppid is the
 * tracer's, so each listed pid's ppid is checked and the others dropped,
 * keeping children() consistent with snapshot().
 */
/* Returns the number of direct children of parent->pid written to out, -ENOBUFS if cap or more, -ESRCH, or -errno. */
int pt_children_of(const struct pt_proc *parent, int32_t *out, int cap)
{
    uint64_t before = parent->start_time, after;
    int32_t pid = parent->pid;
    int32_t unused;
    int32_t one;
    int rc;

    if (cap < 0)
        return -EINVAL;
    if (pid <= 0)
        return -ESRCH;

    /* With cap 0 there is no room: a one-slot probe says whether that is enough. */
    int32_t *buf = cap > 0 ? out : &one;
    int slots = cap > 0 ? (cap < PIDS_REQUEST_MAX ? cap : PIDS_REQUEST_MAX) : 1;
    errno = 0;
    int n = proc_listchildpids(pid, buf, slots * (int)sizeof(int32_t));
    if (n <= 0) {
        if (errno)
            return -errno;
        n = 0;
    }
    if (n >= slots && n > 0)
        return -ENOBUFS;

    int kept = 0;
    for (int i = 0; i < n; i++) {
        int32_t child = buf[i], pp;
        rc = ppid_of(child, &pp);
        if (rc == -ESRCH)
            continue; /* reaped since the list: no longer a child */
        if (rc != 0)
            return rc;
        if (pp == pid)
            out[kept++] = child;
    }

    rc = start_and_ppid(pid, &after, &unused);
    if (rc != 0)
        return rc;
    if (after != before)
        return -ESRCH; /* pid was reused: the process we were asked about is gone */
    return kept;
}

/* Returns the number of direct children of pid written to out, -ENOBUFS if cap or more, -ESRCH, or -errno. */
int pt_children(int32_t pid, int32_t *out, int cap)
{
    struct pt_proc parent;
    int32_t unused;
    if (pid <= 0)
        return -ESRCH;
    memset(&parent, 0, sizeof parent);
    parent.pid = pid;
    int rc = start_and_ppid(pid, &parent.start_time, &unused);
    if (rc != 0)
        return rc;
    return pt_children_of(&parent, out, cap);
}

/* Returns 0 with *out set to now in microseconds since the epoch (start_time units), or -errno. */
int pt_now(uint64_t *out)
{
    struct timeval tv;
    if (gettimeofday(&tv, NULL) != 0)
        return -errno;
    *out = (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
    return 0;
}
