/* macOS, one process: its libproc and sysctl records (their layouts asserted), its parent when traced, its
 * session id; pt_proc, and the reads macos_table.c and macos_procargs.c build on (declared in macos.h).
 *
 * Why this shape (xnu line references are to bsd/kern/ in xnu-11417):
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
 */
#define _DARWIN_C_SOURCE /* struct kinfo_proc, struct extern_proc */
#include "macos.h"

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

/* Returns nothing; sleeps CREATION_PAUSE_NS so a process being forked can finish. */
void creation_pause(void)
{
    struct timespec ts = {0, CREATION_PAUSE_NS};
    nanosleep(&ts, NULL);
}

/* Returns the Linux letter for a BSD p_stat value. */
char state_letter(uint32_t st)
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
int copy_name(char name[PT_NAME_MAX], const char *src, size_t srclen)
{
    size_t len = strnlen(src, srclen);
    if (len > PT_NAME_MAX - 1)
        len = PT_NAME_MAX - 1;
    memcpy(name, src, len);
    memset(name + len, 0, PT_NAME_MAX - len);
    return 0;
}

/* Returns 0 with *out filled, -ESRCH if pid is gone (or libproc refuses it), or -errno. */
int short_info(int32_t pid, struct proc_bsdshortinfo *out)
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
int bsd_info(int32_t pid, struct proc_bsdinfo *out)
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
int kinfo(int32_t pid, struct kinfo_proc *out)
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
uint64_t kinfo_start(const struct kinfo_proc *kp)
{
    const struct timeval *tv = &kp->kp_proc.p_starttime;
    return (uint64_t)tv->tv_sec * 1000000u + (uint64_t)tv->tv_usec;
}

/* Returns the start time of a proc_bsdinfo record in start_time units. */
uint64_t bsd_start(const struct proc_bsdinfo *bi)
{
    return bi->pbi_start_tvsec * 1000000u + bi->pbi_start_tvusec;
}

/* Returns the original parent of a traced process (p_oppid), or 0 if kp is not traced. */
int32_t traced_parent(const struct kinfo_proc *kp)
{
    if (!(kp->kp_proc.p_flag & P_TRACED))
        return 0;
    return kp->kp_proc.p_oppid > 0 ? kp->kp_proc.p_oppid : 0;
}

/* Returns 1 if a live (not zombie) process started at or before `born` holds pid oppid, judged from its own record, else 0. */
int parent_fits(int stat, uint64_t parent_start, uint64_t born)
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
int reported_parent(const struct kinfo_proc *kp, int32_t *ppid)
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
int fill_from_kinfo(const struct kinfo_proc *kp, struct pt_proc *out)
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
int in_creation(int32_t pid)
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

/* Returns 0 with *out filled, -ESRCH if pid does not exist, -EBUSY if it stayed in creation, or -errno. */
int pt_proc(int32_t pid, struct pt_proc *out)
{
    return read_one(pid, out);
}
