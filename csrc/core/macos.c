/* macOS process table: sysctl(KERN_PROC_ALL) for the table, libproc
 * (proc_pidinfo, proc_listchildpids) for single processes and children.
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
 * - p_comm holds up to MAXCOMLEN (16) bytes of the executable's name; only
 *   a name that fills all 16 may be cut short, and only then is BSDINFO
 *   asked for its 31-byte pbi_name (own processes, or as root).
 * - getsid() is one call per row: proc_find() skips zombies (P_REF_DEAD), and
 *   exit clears the session's leader link, so a zombie's sid is unknown and
 *   reported as 0 (the engine carries the sid it recorded while the process
 *   was alive). Pids are handed out by an incrementing counter (nextpid,
 *   wrapping at PID_MAX 99999), so a pid freed between the list and getsid
 *   is not handed out again within that window.
 * - A traced process (P_TRACED, set from P_LTRACED) has the tracer as p_ppid;
 *   ptrace(PT_ATTACH) saved the real parent in p_oppid (mach_process.c), and
 *   PT_DETACH or the tracer's exit hands the process back to it, or to
 *   launchd if it is gone (kern_exit.c). Rows report that parent, so a member
 *   under lldb stays in its tree. Exit clears P_LTRACED: a traced process
 *   that exited shows the tracer until the tracer reaps it.
 * - SIDL (being forked) is retried, bounded: such a process is alive, and a
 *   read that cannot see it yet must never make it "gone".
 * - The libproc wrappers report errors as 0 (not -1) with errno set: errno is
 *   cleared before each call, and 0 is an error only when errno says so. A
 *   proc_pidinfo that copies fewer bytes than the struct is layout drift, an
 *   error, never a half-filled row (psutil checks the same).
 * - sysctl(KERN_PROC_PID) "succeeds" with length 0 for a pid that is gone
 *   (psutil/arch/osx/proc_utils.c) or in SIDL: ESRCH, unless libproc still
 *   sees the pid in SIDL.
 * - pid 0 (kernel_task) is left out of the table, as on Linux: 0 is the
 *   parent of the roots (launchd has ppid 0), never a process to signal.
 * - The one allocation, in pt_snapshot, is bounded by the caller's cap
 *   (cap + 1 records) and freed before it returns.
 * - Environments and argv come from sysctl(KERN_PROCARGS2) (kern_sysctl.c
 *   sysctl_procargsx), into the caller's buffer, never an allocation here:
 *   int argc, the exec path, NUL padding, argv, the environment. A buffer
 *   larger than KERN_ARGMAX is refused (EINVAL), so the request is clamped
 *   to it; a smaller buffer than the area gets the area's TAIL with argc in
 *   front, not an error, so a reply that fills the buffer may be cut and is
 *   reported as -E2BIG (the binding retries with a bigger buffer).
 *   EINVAL also means "not found" (gone, or a zombie: proc_find skips it),
 *   "another user's process" (is_procargs_content_read_permitted), or a task
 *   that is not IPC-active (being created or exiting): a read of the process
 *   tells these apart, and an alive process refused is -EACCES, as psutil
 *   reads it. Since macOS 11 the kernel omits the environment of a
 *   cs_restricted process (and a no-read-procargs process shows argv[0]
 *   only): that area ends after argv and reads as an empty environment,
 *   which the caller must take as "unknown", never as "has no variable".
 */
#define _DARWIN_C_SOURCE /* struct kinfo_proc, struct extern_proc */
#include "platform.h"

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
#include <time.h>
#include <unistd.h>

/* The kernel copies these structs out by size: a header that drifts from the
 * kernel's layout must fail the build, not silently misread fields. */
_Static_assert(sizeof(struct proc_bsdinfo) == 136, "proc_bsdinfo size");
_Static_assert(offsetof(struct proc_bsdinfo, pbi_flags) == 0, "pbi_flags");
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

/* The 64-bit kinfo_proc the kernel fills for KERN_PROC_ALL and KERN_PROC_PID
 * (struct user64_kinfo_proc in xnu; 648 bytes, p_stat at 36 and p_pid at 40
 * as measured on macOS 14 in https://github.com/unslothai/unsloth/pull/8493;
 * the other offsets are the SDK's, for every field read here). */
_Static_assert(sizeof(struct kinfo_proc) == 648, "kinfo_proc size");
_Static_assert(offsetof(struct kinfo_proc, kp_proc.p_starttime) == 0, "kp_proc.p_starttime");
_Static_assert(offsetof(struct kinfo_proc, kp_proc.p_flag) == 32, "kp_proc.p_flag");
_Static_assert(offsetof(struct kinfo_proc, kp_proc.p_stat) == 36, "kp_proc.p_stat");
_Static_assert(offsetof(struct kinfo_proc, kp_proc.p_pid) == 40, "kp_proc.p_pid");
_Static_assert(offsetof(struct kinfo_proc, kp_proc.p_oppid) == 44, "kp_proc.p_oppid");
_Static_assert(offsetof(struct kinfo_proc, kp_proc.p_comm) == 243, "kp_proc.p_comm");
_Static_assert(sizeof(((struct kinfo_proc *)0)->kp_proc.p_comm) == MAXCOMLEN + 1, "p_comm size");
_Static_assert(offsetof(struct kinfo_proc, kp_eproc) == 296, "kp_eproc");
_Static_assert(offsetof(struct kinfo_proc, kp_eproc.e_ucred.cr_uid) == 420, "e_ucred.cr_uid");
_Static_assert(offsetof(struct kinfo_proc, kp_eproc.e_ppid) == 560, "e_ppid");
_Static_assert(offsetof(struct kinfo_proc, kp_eproc.e_pgid) == 564, "e_pgid");

/* How often a process seen in SIDL (or not yet findable by pid) is read
 * again, 20 us apart: fork takes it out of SIDL within microseconds
 * (kern_fork.c: SRUN right after pinsertchild), so the bound is ~2 ms. */
#define CREATION_TRIES    100
#define CREATION_PAUSE_NS 20000

/* The kernel has no pid above 99999; this bounds every request size. */
#define PIDS_REQUEST_MAX (1 << 24)

/* How many times pt_snapshot re-reads a table that outgrew its buffer. Each
 * retry at least doubles the buffer up to cap + 1 records, so this is never
 * the bound that ends the loop for cap below 2^24. */
#define TABLE_TRIES 32

/* Returns nothing; sleeps CREATION_PAUSE_NS so a process being forked can finish. */
static void creation_pause(void)
{
    struct timespec ts = {0, CREATION_PAUSE_NS};
    nanosleep(&ts, NULL);
}

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

/* Returns 0 with *out filled, -ESRCH if pid is gone (or libproc refuses it), or -errno. */
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

/* Returns 0 with *out filled, -ESRCH if pid is gone or in SIDL (sysctl reports both as length 0), or -errno. */
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

/* Returns the start time of a proc_bsdinfo record in start_time units. */
static uint64_t bsd_start(const struct proc_bsdinfo *bi)
{
    return bi->pbi_start_tvsec * 1000000u + bi->pbi_start_tvusec;
}

/* Returns the original parent of a traced process (p_oppid), or 0 if kp is not traced. */
static int32_t traced_parent(const struct kinfo_proc *kp)
{
    if (!(kp->kp_proc.p_flag & P_TRACED))
        return 0;
    return kp->kp_proc.p_oppid > 0 ? kp->kp_proc.p_oppid : 0;
}

/* Returns 1 if a live (not zombie) process started at or before `born` holds pid oppid, judged from its own record, else 0. */
static int parent_fits(int stat, uint64_t parent_start, uint64_t born)
{
    /* The kernel hands a traced process back to p_oppid only if proc_find()
     * finds it (not a zombie); a pid reused since started after the child. */
    return stat != SZOMB && parent_start <= born;
}

/* Returns 0 with *fits set for the process now at pid oppid (see parent_fits), or -errno for a read that failed. */
static int live_parent_fits(int32_t oppid, uint64_t born, int *fits)
{
    struct proc_bsdinfo bi;
    struct kinfo_proc kp;
    *fits = 0;
    if (bsd_info(oppid, &bi) == 0) {
        *fits = parent_fits((int)bi.pbi_status, bsd_start(&bi), born);
        return 0;
    }
    int rc = kinfo(oppid, &kp);
    if (rc == -ESRCH)
        return 0; /* the original parent exited: launchd will get the child */
    if (rc != 0)
        return rc;
    *fits = parent_fits(kp.kp_proc.p_stat, kinfo_start(&kp), born);
    return 0;
}

/* Returns 0 with *ppid set to kp's parent as proctree reports it (p_oppid when traced), or -errno. */
static int reported_parent(const struct kinfo_proc *kp, int32_t *ppid)
{
    int32_t oppid = traced_parent(kp);
    int fits;
    *ppid = kp->kp_eproc.e_ppid;
    if (oppid == 0 || oppid == *ppid)
        return 0;
    int rc = live_parent_fits(oppid, kinfo_start(kp), &fits);
    if (rc != 0)
        return rc;
    *ppid = fits ? oppid : 1; /* PT_DETACH gives it to launchd when the parent is gone */
    return 0;
}

/* Returns 0 with *out filled from a kinfo_proc record, except ppid (reported_parent) and sid (the caller's). */
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

/* Returns 0 with *out filled from a proc_bsdinfo record, except sid. */
static int fill_from_bsd(const struct proc_bsdinfo *bi, struct pt_proc *out)
{
    out->pid = (int32_t)bi->pbi_pid;
    out->ppid = (int32_t)bi->pbi_ppid;
    out->pgid = (int32_t)bi->pbi_pgid;
    out->uid = (uint32_t)bi->pbi_uid;
    out->state = state_letter(bi->pbi_status);
    out->start_time = bsd_start(bi);
    /* pbi_name is the executable's name up to 31 bytes; pbi_comm stops at 15. */
    if (bi->pbi_name[0])
        return copy_name(out->name, bi->pbi_name, sizeof bi->pbi_name);
    return copy_name(out->name, bi->pbi_comm, sizeof bi->pbi_comm);
}

/* Returns 1 if libproc sees pid in SIDL (being forked), else 0. */
static int in_creation(int32_t pid)
{
    struct proc_bsdshortinfo si;
    return short_info(pid, &si) == 0 && si.pbsi_status == SIDL;
}

/* Returns 0 with out->sid set, -EBUSY if pid is alive but getsid cannot find it yet
 * and final is 0, -ESRCH if the process in *out is gone, or -errno. */
static int fill_sid(int32_t pid, struct pt_proc *out, int final)
{
    out->sid = 0; /* unknown, never guessed: no session rule can match it */
    if (out->state == 'Z')
        return 0; /* getsid skips zombies; exit cleared the leader link */
    pid_t sid = getsid(pid);
    if (sid >= 0) {
        out->sid = sid;
        return 0;
    }
    int err = errno;
    if (err != ESRCH)
        return -err;
    /* getsid() goes through proc_find(), which skips zombies and processes
     * still being created: ask sysctl whether the process we read is there. */
    struct kinfo_proc kp;
    int rc = kinfo(pid, &kp);
    if (rc == -ESRCH && in_creation(pid))
        return final ? 0 : -EBUSY;
    if (rc != 0)
        return rc;
    if (kinfo_start(&kp) != out->start_time)
        return -ESRCH; /* the process we read is gone; this is another one */
    if (kp.kp_proc.p_stat == SZOMB) {
        out->state = 'Z';
        return 0;
    }
    return final ? 0 : -EBUSY; /* alive, not findable yet: being created */
}

/* Returns 0 with *out filled for pid, -EBUSY if it is still being created (unless final),
 * -ESRCH if it is gone, or -errno. */
static int read_one_once(int32_t pid, struct pt_proc *out, int final)
{
    struct proc_bsdinfo bi;
    struct kinfo_proc kp;
    int rc;

    memset(out, 0, sizeof *out);
    rc = bsd_info(pid, &bi);
    if (rc == 0 && bi.pbi_status == SIDL && !final)
        return -EBUSY;
    if (rc == 0 && !(bi.pbi_flags & PROC_FLAG_TRACED)) {
        fill_from_bsd(&bi, out); /* one read: own process (or root) */
        return fill_sid(pid, out, final);
    }
    /* Another user's process (EPERM), a zombie libproc refuses (ESRCH on
     * some releases), or a traced process whose p_oppid only sysctl gives. */
    rc = kinfo(pid, &kp);
    if (rc == -ESRCH && in_creation(pid))
        return -EBUSY; /* sysctl skips SIDL: never "gone" for that */
    if (rc != 0)
        return rc;
    if (kp.kp_proc.p_stat == SIDL && !final)
        return -EBUSY;
    fill_from_kinfo(&kp, out);
    rc = reported_parent(&kp, &out->ppid);
    if (rc != 0)
        return rc;
    if (strnlen(kp.kp_proc.p_comm, sizeof kp.kp_proc.p_comm) >= MAXCOMLEN && bsd_info(pid, &bi) == 0 &&
        bsd_start(&bi) == out->start_time && strncmp(bi.pbi_name, kp.kp_proc.p_comm, MAXCOMLEN) == 0)
        copy_name(out->name, bi.pbi_name, sizeof bi.pbi_name); /* traced own process: the long name */
    return fill_sid(pid, out, final);
}

/* Returns 0 with *out filled for pid, -ESRCH if it is gone, -EBUSY if it stayed in creation past the bound, or -errno. */
static int read_one(int32_t pid, struct pt_proc *out)
{
    if (pid <= 0) {
        memset(out, 0, sizeof *out);
        return -ESRCH;
    }
    for (int i = 0; i < CREATION_TRIES; i++) {
        int rc = read_one_once(pid, out, i == CREATION_TRIES - 1);
        if (rc != -EBUSY)
            return rc;
        creation_pause();
    }
    return -EBUSY;
}

/* Returns <0, 0 or >0 as the record *a's pid sorts before, with or after *b's (ascending, for qsort and bsearch). */
static int cmp_kinfo_pid(const void *a, const void *b)
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

/* Returns 0 with *ppid set for the record kp, resolving a traced parent from the sorted table itself. */
static int table_parent(const struct kinfo_proc *table, size_t n, const struct kinfo_proc *kp, int32_t *ppid)
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
    int rc = read_table(cap, &table, &n);
    if (rc != 0)
        return rc;
    qsort(table, n, sizeof *table, cmp_kinfo_pid);

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

/* Returns 0 with *out filled, -ESRCH if pid does not exist, -EBUSY if it stayed in creation, or -errno. */
int pt_proc(int32_t pid, struct pt_proc *out)
{
    return read_one(pid, out);
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

/* Returns 0 with *out set to now in microseconds since the epoch (start_time units), or -errno. */
int pt_now(uint64_t *out)
{
    struct timeval tv;
    if (gettimeofday(&tv, NULL) != 0)
        return -errno;
    *out = (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
    return 0;
}

/* Returns KERN_ARGMAX (the largest procargs area the kernel accepts a request for), or -errno. */
static int args_max(void)
{
    int mib[2] = {CTL_KERN, KERN_ARGMAX};
    int argmax = 0;
    size_t len = sizeof argmax;
    if (sysctl(mib, 2, &argmax, &len, NULL, 0) != 0)
        return -errno;
    return argmax > 0 ? argmax : -EIO;
}

/* Returns the length of pid's KERN_PROCARGS2 area read into buf, 0 if pid is a
 * zombie (it has none), -E2BIG if the area may not have fit cap, -ESRCH if
 * pid is gone, -EACCES if the kernel refuses an alive process (EINVAL: another
 * user's, or not IPC-active), or -errno. */
static int read_procargs2(int32_t pid, char *buf, size_t cap)
{
    if (pid <= 0)
        return -ESRCH; /* pid 0 (kernel_task) has no user stack; nothing below 0 is a process */
    int argmax = args_max();
    if (argmax < 0)
        return argmax;
    size_t want = cap < (size_t)argmax ? cap : (size_t)argmax;
    if (want <= sizeof(int))
        return -E2BIG;
    int mib[3] = {CTL_KERN, KERN_PROCARGS2, (int)pid};
    size_t len = want;
    if (sysctl(mib, 3, buf, &len, NULL, 0) == 0) {
        if (len >= want)
            return -E2BIG; /* filled: the kernel may have cut the area's head */
        return (int)len;
    }
    int err = errno;
    /* Every failure is asked about: gone, a zombie, or alive and refused. */
    struct kinfo_proc kp;
    int rc = kinfo(pid, &kp);
    if (rc != 0)
        return rc == -ESRCH && in_creation(pid) ? -EACCES : rc;
    if (kp.kp_proc.p_stat == SZOMB)
        return 0;
    return err == EINVAL ? -EACCES : -err;
}

/* Returns the length of one part of pid's procargs area moved to buf's start (argv if want_env is 0), or as read_procargs2. */
static int procargs_part(int32_t pid, char *buf, size_t cap, int want_env)
{
    size_t argv_off, argv_len, env_off, env_len;
    int n = read_procargs2(pid, buf, cap);
    if (n <= 0)
        return n;
    if (pt_procargs2_split(buf, (size_t)n, &argv_off, &argv_len, &env_off, &env_len) != 0)
        return -EIO; /* not the layout we know: never guess */
    size_t off = want_env ? env_off : argv_off, len = want_env ? env_len : argv_len;
    memmove(buf, buf + off, len);
    return (int)len;
}

int pt_environ(int32_t pid, char *buf, size_t cap)
{
    return procargs_part(pid, buf, cap, 1);
}

int pt_cmdline(int32_t pid, char *buf, size_t cap)
{
    return procargs_part(pid, buf, cap, 0);
}

/* Returns what pt_block_find returns for pid's environment, read whole into scratch (so -E2BIG if it does not fit), -ESRCH, or -errno. */
int pt_env_find_checked(int32_t pid, const char *key, size_t keylen, char *val, size_t valcap, char *scratch,
                        size_t scratchcap)
{
    int n = procargs_part(pid, scratch, scratchcap, 1);
    if (n < 0)
        return n;
    /* KERN_ARGMAX bounds the area, so the whole environment is already here:
     * PT_ENV_SCAN_MAX is the Linux stream's bound. */
    return pt_block_find(scratch, (size_t)n, key, keylen, val, valcap);
}
