/* macOS, one process's facts row: its BSD record and task counters (one PROC_PIDTASKALLINFO), its parent as rows
 * report it, and on request its argv (KERN_PROCARGS2), executable (proc_pidpath) and cwd (PROC_PIDVNODEPATHINFO).
 *
 * Why this shape (xnu line references are to bsd/kern/ in xnu-11417):
 * - PROC_PIDTASKALLINFO is proc_bsdinfo and proc_taskinfo filled under ONE proc_find (proc_info.c
 *   proc_pidtaskallinfo): the identity (pbi_start_tvsec/usec), uids, status, tty and the counters of the same
 *   process, in one system call, where PROC_PIDTBSDINFO then PROC_PIDTASKINFO would be two lookups by number.
 * - It is CHECK_SAME_USER: another user's process is EPERM unless we are root. Its BSD fields then come from
 *   sysctl(KERN_PROC_PID)'s kinfo_proc (or the table's record), which anyone may read (ps does), and the task's
 *   counters (memory, CPU times, threads) are unknown: PT_FACT_STAT goes to `denied` while its bit in `have`
 *   says the kinfo fields are there. psutil raises AccessDenied for the same counters.
 * - A zombie has no task: TASKALLINFO answers ESRCH (proc_find skips it). kinfo_proc still holds it (SZOMB), so
 *   the row is filled from there with zero counters, an empty argv, exe and cwd, as on Linux. A process alive in
 *   kinfo whose task is not readable (being created or exiting) has its counters unknown (`denied`), not zero.
 * - The task's CPU times are Mach absolute time units: nanoseconds on Intel, 24 MHz ticks on Apple silicon.
 *   mach_timebase_info converts them; the row holds nanoseconds. Memory is in bytes (pti_resident_size,
 *   pti_virtual_size): the row's rss_pages field holds bytes on macOS.
 * - A traced process has the tracer as pbi_ppid; rows report the original parent (macos_proc.c
 *   reported_parent), so the row's ppid is kinfo's, as pt_proc gives it.
 * - Identity: the start time of the first read is compared with the caller's (or with the table's record). The
 *   strings are read by pid afterwards, one system call each, so the start time is read once more after them:
 *   a pid that another process took in between (xnu hands pids out by an incrementing counter, so this takes
 *   a wrap of 99,999 forks) fails the row (-ESRCH) instead of mixing two processes.
 * - proc_pidpath (PROC_PIDPATHINFO) is NO_CHECK_SAME_USER: another user's exe is known. KERN_PROCARGS2 and
 *   PROC_PIDVNODEPATHINFO refuse another user's process (EINVAL read as -EACCES, EPERM): `denied`.
 * - KERN_PROCARGS2 copies the whole area (exec path, argv, environment) or its tail: the row's free room in the
 *   caller's buffer is the scratch it is read into (macos_procargs.c), and argv alone is kept. So a row needs
 *   room for its environment too while it is read, or it gets -ENOBUFS and is read again alone.
 * - The libproc wrappers report errors as 0 with errno set (macos_proc.c): errno is cleared before each call.
 */
#define _DARWIN_C_SOURCE /* struct kinfo_proc, struct extern_proc */
#include "facts_macos.h"
#include "platform.h"

#include <errno.h>
#include <libproc.h>
#include <mach/mach_time.h>
#include <stddef.h>
#include <string.h>
#include <sys/proc.h>
#include <sys/proc_info.h>
#include <sys/sysctl.h>
#include <sys/types.h>

/* The kernel copies these structs out by size: a header that drifts from the kernel's layout must fail the
 * build, not silently misread fields (proc_bsdinfo's own asserts are macos_proc.c's). */
_Static_assert(sizeof(struct proc_taskinfo) == 96, "proc_taskinfo size");
_Static_assert(offsetof(struct proc_taskinfo, pti_virtual_size) == 0, "pti_virtual_size");
_Static_assert(offsetof(struct proc_taskinfo, pti_resident_size) == 8, "pti_resident_size");
_Static_assert(offsetof(struct proc_taskinfo, pti_total_user) == 16, "pti_total_user");
_Static_assert(offsetof(struct proc_taskinfo, pti_total_system) == 24, "pti_total_system");
_Static_assert(offsetof(struct proc_taskinfo, pti_threadnum) == 84, "pti_threadnum");
_Static_assert(sizeof(struct proc_taskallinfo) == 232, "proc_taskallinfo size");
_Static_assert(offsetof(struct proc_taskallinfo, pbsd) == 0, "proc_taskallinfo.pbsd");
_Static_assert(offsetof(struct proc_taskallinfo, ptinfo) == 136, "proc_taskallinfo.ptinfo");
_Static_assert(offsetof(struct proc_bsdinfo, pbi_ruid) == 28, "pbi_ruid");
_Static_assert(offsetof(struct proc_bsdinfo, pbi_svuid) == 36, "pbi_svuid");
_Static_assert(offsetof(struct proc_bsdinfo, e_tdev) == 108, "pbi e_tdev");
_Static_assert(sizeof(struct vnode_info_path) == 1176, "vnode_info_path size");
_Static_assert(sizeof(struct proc_vnodepathinfo) == 2352, "proc_vnodepathinfo size");
_Static_assert(offsetof(struct proc_vnodepathinfo, pvi_cdir.vip_path) == 152, "pvi_cdir.vip_path");
_Static_assert(sizeof(((struct proc_vnodepathinfo *)0)->pvi_cdir.vip_path) == 1024, "vip_path size");
_Static_assert(offsetof(struct kinfo_proc, kp_eproc.e_pcred.p_ruid) == 392, "e_pcred.p_ruid");
_Static_assert(offsetof(struct kinfo_proc, kp_eproc.e_pcred.p_svuid) == 396, "e_pcred.p_svuid");
_Static_assert(offsetof(struct kinfo_proc, kp_eproc.e_tdev) == 572, "kp_eproc.e_tdev");
_Static_assert(sizeof(((struct kinfo_proc *)0)->kp_eproc.e_tdev) == 4, "e_tdev size");
_Static_assert(sizeof(struct mach_timebase_info) == 8, "mach_timebase_info size");
_Static_assert(PROC_PIDPATHINFO_MAXSIZE == 4096, "PROC_PIDPATHINFO_MAXSIZE");

/* The PT_FACT_* bits read by pid after the first read, each checked against the identity afterwards. */
#define STRING_FACTS (PT_FACT_CMDLINE | PT_FACT_EXE | PT_FACT_CWD)

/* Returns an arena over buf[0..cap), its size bounded so that every offset fits a row's uint32_t fields. */
struct arena arena_of(char *buf, size_t cap)
{
    struct arena a = {buf, buf ? (cap > UINT32_MAX ? UINT32_MAX : cap) : 0, 0};
    return a;
}

/* Returns 0 with *tb filled from mach_timebase_info, or -EIO if the kernel refuses it. */
int read_timebase(struct timebase *tb)
{
    struct mach_timebase_info info;
    if (mach_timebase_info(&info) != 0 || info.numer == 0 || info.denom == 0)
        return -EIO;
    tb->numer = info.numer;
    tb->denom = info.denom;
    return 0;
}

/* Returns t Mach absolute time units in nanoseconds, without overflowing t * numer. */
static uint64_t to_ns(uint64_t t, const struct timebase *tb)
{
    return t / tb->denom * tb->numer + t % tb->denom * tb->numer / tb->denom;
}

/* Returns the terminal's device number, 0 for none (the kernel's NODEV is -1). */
static int32_t tty_of(uint32_t dev)
{
    return dev == UINT32_MAX ? 0 : (int32_t)dev;
}

/* Returns 0 with *all filled, -EPERM for another user's process, -ESRCH if pid is gone or a zombie, or -errno. */
static int task_all_info(int32_t pid, struct proc_taskallinfo *all)
{
    errno = 0;
    int n = proc_pidinfo(pid, PROC_PIDTASKALLINFO, 0, all, (int)sizeof *all);
    if (n == (int)sizeof *all)
        return 0;
    if (n <= 0)
        return errno ? -errno : -EIO;
    return -EIO; /* short copy: layout drift */
}

/* Returns 0 after filling the BSD fields of *out (all but ppid) from a proc_bsdinfo record. */
static int fill_bsd(const struct proc_bsdinfo *bi, struct pt_facts *out)
{
    out->ppid = (int32_t)bi->pbi_ppid;
    out->state = state_letter(bi->pbi_status);
    out->ruid = bi->pbi_ruid;
    out->euid = bi->pbi_uid;
    out->suid = bi->pbi_svuid;
    out->tty_nr = tty_of(bi->e_tdev);
    out->start_time = bsd_start(bi);
    /* pbi_name is the executable's name up to 31 bytes; pbi_comm stops at 15. */
    if (bi->pbi_name[0])
        return copy_name(out->name, bi->pbi_name, sizeof bi->pbi_name);
    return copy_name(out->name, bi->pbi_comm, sizeof bi->pbi_comm);
}

/* Returns 0 after filling the BSD fields of *out (all but ppid) from a kinfo_proc record. */
static int fill_kinfo(const struct kinfo_proc *kp, struct pt_facts *out)
{
    out->state = state_letter((uint32_t)(unsigned char)kp->kp_proc.p_stat);
    out->ruid = kp->kp_eproc.e_pcred.p_ruid;
    out->euid = kp->kp_eproc.e_ucred.cr_uid;
    out->suid = kp->kp_eproc.e_pcred.p_svuid;
    out->tty_nr = tty_of((uint32_t)kp->kp_eproc.e_tdev);
    out->start_time = kinfo_start(kp);
    return copy_name(out->name, kp->kp_proc.p_comm, sizeof kp->kp_proc.p_comm);
}

/* Returns 0 after filling the task's counters of *out (bytes, nanoseconds, threads). */
static int fill_task(const struct proc_taskinfo *ti, const struct timebase *tb, struct pt_facts *out)
{
    out->vsize = ti->pti_virtual_size;
    out->rss_pages = ti->pti_resident_size; /* bytes on macOS */
    out->utime = to_ns(ti->pti_total_user, tb);
    out->stime = to_ns(ti->pti_total_system, tb);
    out->num_threads = ti->pti_threadnum;
    return 0;
}

/* Returns 0 with *kp (pid's record, from the table if listed, else read now) and *ppid as rows report it,
 * -ESRCH if pid is gone, or -errno. fresh forces a read now (the table's record may be older than a change). */
static int record_of(int32_t pid, const struct listed_row *listed, int fresh, struct kinfo_proc *kp, int32_t *ppid)
{
    if (listed && !fresh) {
        *kp = *listed->kp;
        *ppid = listed->ppid;
        return 0;
    }
    int rc = kinfo(pid, kp);
    if (rc != 0)
        return rc;
    return reported_parent(kp, ppid);
}

/* Returns 0 with the BSD fields and counters of *out (PT_FACT_STAT, and PT_FACT_UIDS if wanted) for pid,
 * -ESRCH if it is gone (or the table's record is another process's), or -errno. */
static int read_counted(int32_t pid, const struct listed_row *listed, uint32_t want, const struct timebase *tb,
                        struct pt_facts *out)
{
    struct proc_taskallinfo all;
    struct kinfo_proc kp;
    int rc = task_all_info(pid, &all);
    if (rc != 0 && rc != -EPERM && rc != -ESRCH)
        return rc;
    if (rc == 0) {
        fill_bsd(&all.pbsd, out);
        fill_task(&all.ptinfo, tb, out);
        if (listed && kinfo_start(listed->kp) != out->start_time)
            return -ESRCH; /* the pid was taken by another process since the table was read */
        if (all.pbsd.pbi_flags & PROC_FLAG_TRACED) {
            int ro = record_of(pid, listed, 0, &kp, &out->ppid);
            if (ro != 0)
                return ro;
            if (kinfo_start(&kp) != out->start_time)
                return -ESRCH;
        }
    } else {
        /* Another user's (EPERM), or no task (ESRCH): a zombie, gone, or alive without a readable task. A
         * table's record may predate an exit, so ESRCH asks the kernel again. */
        int ro = record_of(pid, listed, rc == -ESRCH, &kp, &out->ppid);
        if (ro != 0)
            return ro;
        fill_kinfo(&kp, out);
        if (listed && kinfo_start(listed->kp) != out->start_time)
            return -ESRCH;
        if (out->state != 'Z')
            out->denied |= PT_FACT_STAT; /* its counters are unknown, never zero */
    }
    out->have = PT_FACT_STAT | (want & PT_FACT_UIDS);
    return 0;
}

/* Returns 0 if the process that started at `start` still holds pid (alive or a zombie), -ESRCH if it is gone
 * or another process has the pid, or -errno. */
static int still_there(int32_t pid, uint64_t start)
{
    struct proc_bsdinfo bi;
    struct kinfo_proc kp;
    if (bsd_info(pid, &bi) == 0)
        return bsd_start(&bi) == start ? 0 : -ESRCH;
    int rc = kinfo(pid, &kp); /* another user's, or a zombie libproc refuses */
    if (rc != 0)
        return rc;
    return kinfo_start(&kp) == start ? 0 : -ESRCH;
}

/* Returns 0 with pid's argv appended to *a (empty for a zombie), 1 if refused, -ESRCH, -ENOBUFS if the whole
 * procargs area does not fit the room left, or -errno. */
static int read_cmdline(int32_t pid, struct arena *a, uint32_t *off, uint32_t *len)
{
    *off = (uint32_t)a->used;
    *len = 0;
    int n = pt_cmdline(pid, a->buf ? a->buf + a->used : NULL, a->cap - a->used);
    if (n == -E2BIG)
        return -ENOBUFS;
    if (n == -EACCES || n == -EPERM)
        return 1;
    if (n < 0)
        return n;
    *len = (uint32_t)n;
    a->used += (size_t)n;
    return 0;
}

/* Returns 0 after appending src[0..n) to *a (off/len set), or -ENOBUFS if it does not fit. */
static int append(struct arena *a, const char *src, size_t n, uint32_t *off, uint32_t *len)
{
    *off = (uint32_t)a->used;
    *len = 0;
    if (n > a->cap - a->used)
        return -ENOBUFS;
    if (n > 0)
        memcpy(a->buf + a->used, src, n);
    *len = (uint32_t)n;
    a->used += n;
    return 0;
}

/* Returns what a string read that failed with errno err means: 1 refused, 0 (empty) if the process is there
 * without one (a zombie by now), -ESRCH if it is gone, or -err. */
static int string_failure(int err, int32_t pid, uint64_t start)
{
    if (err == EPERM || err == EACCES)
        return 1;
    if (err == ESRCH)
        return still_there(pid, start);
    return err ? -err : -EIO; /* no errno: we cannot say it is gone */
}

/* Returns 0 with pid's executable path appended to *a, 1 if refused, -ESRCH, -ENOBUFS, or -errno. */
static int read_exe(int32_t pid, uint64_t start, struct arena *a, uint32_t *off, uint32_t *len)
{
    char path[PROC_PIDPATHINFO_MAXSIZE];
    *off = (uint32_t)a->used;
    *len = 0;
    errno = 0;
    int n = proc_pidpath(pid, path, (uint32_t)sizeof path);
    if (n <= 0)
        return string_failure(errno, pid, start);
    return append(a, path, strnlen(path, (size_t)n), off, len);
}

/* Returns 0 with pid's working directory appended to *a, 1 if refused, -ESRCH, -ENOBUFS, or -errno. */
static int read_cwd(int32_t pid, uint64_t start, struct arena *a, uint32_t *off, uint32_t *len)
{
    struct proc_vnodepathinfo vpi;
    *off = (uint32_t)a->used;
    *len = 0;
    errno = 0;
    int n = proc_pidinfo(pid, PROC_PIDVNODEPATHINFO, 0, &vpi, (int)sizeof vpi);
    if (n <= 0)
        return string_failure(errno, pid, start);
    if (n != (int)sizeof vpi)
        return -EIO; /* short copy: layout drift */
    const char *cwd = vpi.pvi_cdir.vip_path;
    return append(a, cwd, strnlen(cwd, sizeof vpi.pvi_cdir.vip_path), off, len);
}

/* Returns 0 with the wanted strings of the process in *out (its pid and start time read) appended to *a and
 * checked to be that process's, -ESRCH, -ENOBUFS, or -errno. */
static int read_strings(uint32_t want, struct pt_facts *out, struct arena *a)
{
    int32_t pid = out->pid;
    int rc = 0;
    if (out->state == 'Z') {
        out->have |= want & STRING_FACTS; /* the kernel keeps none for a zombie: empty, as on Linux */
        return 0;
    }
    if (want & PT_FACT_CMDLINE)
        rc = pt_facts_record_string(read_cmdline(pid, a, &out->cmdline_off, &out->cmdline_len), PT_FACT_CMDLINE, out);
    if (rc == 0 && want & PT_FACT_EXE)
        rc = pt_facts_record_string(read_exe(pid, out->start_time, a, &out->exe_off, &out->exe_len), PT_FACT_EXE, out);
    if (rc == 0 && want & PT_FACT_CWD)
        rc = pt_facts_record_string(read_cwd(pid, out->start_time, a, &out->cwd_off, &out->cwd_len), PT_FACT_CWD, out);
    if (rc != 0)
        return rc;
    return still_there(pid, out->start_time); /* the strings were read by number: the same process throughout */
}

int facts_row(int32_t pid, const struct listed_row *listed, const uint64_t *start, uint32_t want,
              const struct timebase *tb, struct pt_facts *out, struct arena *a)
{
    size_t mark = a->used;
    memset(out, 0, sizeof *out);
    out->pid = pid;
    int rc = pid > 0 ? read_counted(pid, listed, want, tb, out) : -ESRCH;
    if (rc == 0 && start && out->start_time != *start)
        rc = -ESRCH; /* another process has the pid now */
    if (rc == 0 && want & STRING_FACTS)
        rc = read_strings(want, out, a);
    if (rc != 0) {
        a->used = mark; /* the fields read stay (a row that did not fit is read again pinned to its start) */
        out->have = 0;
        out->pid = pid;
    }
    out->status = rc;
    return rc;
}
