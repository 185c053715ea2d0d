/* macOS, the whole table: pt_snapshot from one sysctl(KERN_PROC_ALL), a process's children (pt_children_of,
 * pt_children), and pt_now (the clock, in start_time units). One process's reads are macos_proc.c's.
 *
 * Why this shape (xnu line references are to bsd/kern/ in xnu-11417):
 * - The table is ONE sysctl(KERN_PROC_ALL), as ps and psutil read it: a
 *   648-byte kinfo_proc per process (zombies included: proc_iterate walks
 *   allproc and zombproc), each filled from one look at the process. Asking
 *   libproc per pid instead costs a sysctl(KERN_PROC_PID) for every process
 *   of another user (PROC_PIDTBSDINFO refuses them, CHECK_SAME_USER), and
 *   KERN_PROC_PID walks the whole process list in the kernel (it is
 *   KERN_PROC_ALL with a filter): O(N^2) for a root-less snapshot.
 * - kern_sysctl.c sysctl_prochandle: a NULL buffer returns the size needed
 *   plus 5 records of slop; a buffer too small is filled as far as it goes
 *   and the call fails with ENOMEM. The table can grow between the probe and
 *   the read, so ENOMEM means "grow and read again" (bounded below).
 * - proc_iterate collects the pids under the list lock and fills each record
 *   later, one process at a time: each row is one consistent read of its
 *   process, the table is not one instant. It skips processes in SIDL (being
 *   forked), so a process in creation is simply not listed yet.
 * - Rows come out in ascending pid order (the Python model bisects on pid;
 *   the kernel lists newest first, then zombies).
 * - pid 0 (kernel_task) is left out of the table, as on Linux: 0 is the
 *   parent of the roots (launchd has ppid 0), never a process to signal.
 * - The one allocation, in pt_snapshot, is bounded by the caller's cap
 *   (cap + 1 records) and freed before it returns.
 */
#define _DARWIN_C_SOURCE /* struct kinfo_proc, struct extern_proc */
#include "macos.h"
#include "platform.h"

#include <errno.h>
#include <libproc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/proc.h>
#include <sys/sysctl.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

/* The kernel has no pid above 99999; this bounds every request size. */
#define PIDS_REQUEST_MAX (1 << 24)

/* How many times pt_snapshot re-reads a table that outgrew its buffer. Each
 * retry at least doubles the buffer up to cap + 1 records, so this is never
 * the bound that ends the loop for cap below 2^24. */
#define TABLE_TRIES 32

/* Returns <0, 0 or >0 as the record *a's pid sorts before, with or after *b's (ascending, for qsort and bsearch). */
int cmp_kinfo_pid(const void *a, const void *b)
{
    pid_t x = ((const struct kinfo_proc *)a)->kp_proc.p_pid;
    pid_t y = ((const struct kinfo_proc *)b)->kp_proc.p_pid;
    return (x > y) - (x < y);
}

/* Returns 0 with *list (malloc'd, the caller frees it) holding *n records of every process,
 * -ENOBUFS if more than cap exist, or -errno. */
static int read_table(int cap, struct kinfo_proc **list, size_t *n)
{
    int mib[3] = {CTL_KERN, KERN_PROC, KERN_PROC_ALL};
    const size_t rec = sizeof(struct kinfo_proc);
    /* One record more than cap: a table that fills cap + 1 has more than cap. */
    const size_t limit = (size_t)(cap < PIDS_REQUEST_MAX ? cap : PIDS_REQUEST_MAX) + 1;
    size_t want = 0;

    *list = NULL;
    *n = 0;
    for (int attempt = 0; attempt < TABLE_TRIES; attempt++) {
        size_t probe = 0;
        if (sysctl(mib, 3, NULL, &probe, NULL, 0) != 0)
            return -errno;
        /* The probe already adds 5 records of slop; an eighth more covers a
         * fork burst, and a retry at least doubles what the last one asked. */
        size_t guess = probe / rec + probe / rec / 8 + 1;
        want = guess > 2 * want ? guess : 2 * want;
        if (want > limit)
            want = limit;
        struct kinfo_proc *buf = malloc(want * rec);
        if (!buf)
            return -ENOMEM;
        size_t len = want * rec;
        if (sysctl(mib, 3, buf, &len, NULL, 0) != 0) {
            int err = errno;
            free(buf);
            if (err != ENOMEM)
                return -err;
            if (want == limit)
                return -ENOBUFS; /* cap + 1 records did not hold it */
            continue;            /* the table grew past the buffer: read again */
        }
        if (len % rec != 0 || len == 0) {
            free(buf);
            return -EIO; /* layout drift, or an empty table (we are in it) */
        }
        if (len / rec > (size_t)cap) {
            free(buf);
            return -ENOBUFS;
        }
        *list = buf;
        *n = len / rec;
        return 0;
    }
    return -EAGAIN; /* unreachable for cap < 2^24 (see TABLE_TRIES) */
}

/* Returns 0 with *list (malloc'd, the caller frees it) holding *n records of every process in ascending pid order,
 * -ENOBUFS if more than cap exist, or -errno. */
int sorted_kinfo_table(int cap, struct kinfo_proc **list, size_t *n)
{
    int rc = read_table(cap, list, n);
    if (rc == 0)
        qsort(*list, *n, sizeof **list, cmp_kinfo_pid);
    return rc;
}

/* Returns 0 with *ppid set for the record kp, resolving a traced parent from the sorted table itself. */
int table_parent(const struct kinfo_proc *table, size_t n, const struct kinfo_proc *kp, int32_t *ppid)
{
    int32_t oppid = traced_parent(kp);
    *ppid = kp->kp_eproc.e_ppid;
    if (oppid == 0 || oppid == *ppid)
        return 0;
    struct kinfo_proc key;
    key.kp_proc.p_pid = oppid;
    const struct kinfo_proc *parent = bsearch(&key, table, n, sizeof *table, cmp_kinfo_pid);
    /* Not in the table: it exited before its record was filled. */
    int fits = parent && parent_fits(parent->kp_proc.p_stat, kinfo_start(parent), kinfo_start(kp));
    *ppid = fits ? oppid : 1;
    return 0;
}

/* Returns 0 after replacing row->name with BSDINFO's 31-byte pbi_name when p_comm fills MAXCOMLEN bytes and the kernel gives it for the same process. */
static int table_long_name(const struct kinfo_proc *kp, struct pt_proc *row)
{
    struct proc_bsdinfo bi;
    /* p_comm is the exec name cut at MAXCOMLEN (kern_exec.c), p_name the same
     * name cut at 2*MAXCOMLEN: only a p_comm of full length can differ. */
    if (strnlen(kp->kp_proc.p_comm, sizeof kp->kp_proc.p_comm) < MAXCOMLEN)
        return 0;
    if (bsd_info(row->pid, &bi) != 0 || bsd_start(&bi) != row->start_time)
        return 0; /* another user's (EPERM), or gone: the 16 bytes stand */
    if (strncmp(bi.pbi_name, kp->kp_proc.p_comm, MAXCOMLEN) != 0)
        return 0;
    return copy_name(row->name, bi.pbi_name, sizeof bi.pbi_name);
}

/* Returns 0 with row->sid set: getsid's answer, else 0 ("unknown") for a zombie, a process
 * still being created after the bounded retries, or one that exited since its record was read. */
static int table_sid(const struct kinfo_proc *kp, struct pt_proc *row)
{
    row->sid = 0;
    if (kp->kp_proc.p_stat == SZOMB)
        return 0; /* getsid skips zombies; exit cleared the leader link */
    int tries = kp->kp_proc.p_stat == SIDL ? CREATION_TRIES : 1;
    for (int i = 0; i < tries; i++) {
        pid_t sid = getsid(row->pid);
        if (sid >= 0) {
            row->sid = sid;
            return 0;
        }
        if (errno != ESRCH)
            return 0;
        if (i + 1 < tries)
            creation_pause();
    }
    return 0;
}

/*
 * One sysctl(KERN_PROC_ALL) gives every row's pid, ppid, pgid, uid, state,
 * start time and name from one read of that process; getsid() adds the sid,
 * and BSDINFO the long name where p_comm may be cut short. Nothing per row
 * walks the process list again.
 */
int pt_snapshot(struct pt_proc *out, int cap)
{
    struct kinfo_proc *table;
    size_t n;

    if (cap < 0)
        return -EINVAL;
    if (cap == 0)
        return -ENOBUFS; /* there is always at least one process: us */
    int rc = sorted_kinfo_table(cap, &table, &n);
    if (rc != 0)
        return rc;

    int count = 0;
    for (size_t i = 0; i < n; i++) {
        const struct kinfo_proc *kp = &table[i];
        if (kp->kp_proc.p_pid <= 0)
            continue; /* kernel_task (pid 0) is not part of the table */
        if (i > 0 && kp->kp_proc.p_pid == table[i - 1].kp_proc.p_pid)
            continue; /* the model needs unique pids; xnu lists each once (allproc or zombproc, one lock) */
        struct pt_proc *row = &out[count];
        memset(row, 0, sizeof *row);
        fill_from_kinfo(kp, row);
        table_parent(table, n, kp, &row->ppid);
        table_long_name(kp, row);
        table_sid(kp, row);
        count++;
    }
    free(table);
    return count;
}

/* Returns 0 with *start set for pid, -ESRCH if it is gone, or -errno. */
static int start_of(int32_t pid, uint64_t *start)
{
    struct proc_bsdinfo bi;
    struct kinfo_proc kp;
    if (bsd_info(pid, &bi) == 0) {
        *start = bsd_start(&bi);
        return 0;
    }
    int rc = kinfo(pid, &kp);
    if (rc != 0)
        return rc;
    *start = kinfo_start(&kp);
    return 0;
}

/* Returns 0 with *ppid set for pid as rows report it (the original parent while traced), -ESRCH if it is gone, or -errno. */
static int ppid_of(int32_t pid, int32_t *ppid)
{
    struct proc_bsdshortinfo si;
    struct kinfo_proc kp;
    int rc = short_info(pid, &si);
    if (rc == 0 && !(si.pbsi_flags & PROC_FLAG_TRACED)) {
        *ppid = (int32_t)si.pbsi_ppid; /* set by pinsertchild, so valid in SIDL too */
        return 0;
    }
    rc = kinfo(pid, &kp);
    if (rc != 0)
        return rc;
    return reported_parent(&kp, ppid);
}

/*
 * proc_listchildpids is PROC_PPID_ONLY under the kernel's process-list lock:
 * one consistent list (no skipped siblings, unlike Linux's children files),
 * zombies included. Two traps: it truncates silently, so a full buffer is
 * reported as -ENOBUFS (the binding grows and retries), and it lists a traced
 * process both under the tracer (p_ppid) and under its original parent
 * (p_oppid). Each listed pid's parent is read as rows report it (p_oppid
 * while traced) and kept only where it matches, so children() agrees with
 * snapshot().
 */
/* Returns the number of direct children of parent->pid written to out, -ENOBUFS if cap or more, -ESRCH, or -errno. */
int pt_children_of(const struct pt_proc *parent, int32_t *out, int cap)
{
    uint64_t before = parent->start_time, after;
    int32_t pid = parent->pid;
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

    rc = start_of(pid, &after);
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
    if (pid <= 0)
        return -ESRCH;
    memset(&parent, 0, sizeof parent);
    parent.pid = pid;
    int rc = start_of(pid, &parent.start_time);
    if (rc != 0)
        return rc;
    return pt_children_of(&parent, out, cap);
}

/* Returns -EAGAIN with *out filled for pid (its list is read at its turn: there is no cheaper pair here), -ESRCH,
 * or -errno. */
int pt_proc_listed(int32_t pid, struct pt_proc *out, int32_t *kids, int cap)
{
    (void)kids;
    (void)cap;
    int rc = pt_proc(pid, out);
    return rc != 0 ? rc : -EAGAIN;
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
