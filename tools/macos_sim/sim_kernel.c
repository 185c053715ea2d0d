/* A simulated xnu for csrc/core/macos_*.c: each call reproduces one
 * behaviour of the real one that the macOS core must survive (line
 * references are to xnu-11417's bsd/kern/).
 *
 * - sysctl(KERN_PROC_ALL) (kern_sysctl.c sysctl_prochandle): a NULL buffer
 *   gets the size needed plus 5 records of slop; a buffer too small is filled
 *   as far as it goes, *oldlenp set to what was copied, and the call fails
 *   with ENOMEM. Zombies are included; SIDL processes are skipped
 *   (proc_iterate), unless sim_sidl_listed models a kernel that lists them.
 *   sim_grow_per_read forks that many processes between the probe and each
 *   read, so the table outgrows the buffer sized from the probe.
 * - sysctl(KERN_PROC_PID) is the same walk with a pid filter: it answers for
 *   zombies, and "succeeds" with length 0 for a pid that is gone or in SIDL.
 * - kinfo_proc of a traced process: P_TRACED in p_flag, the tracer in
 *   e_ppid, the original parent in p_oppid (fill_user64_externproc).
 * - proc_listchildpids: a COUNT back for a size in BYTES,
 *   0 with errno on error, silent truncation, newest pid first
 *   (proc_info.c proc_listpids). PROC_PPID_ONLY also lists a traced process
 *   under its original parent (the p_oppid clause), while its ppid is the
 *   tracer's.
 * - proc_pidinfo fails with ESRCH for zombies (as observed on macOS 14 in
 *   netdata#23297 and unsloth#8493), EPERM for BSDINFO of another user's
 *   process (CHECK_SAME_USER), optionally EPERM for SHORTBSDINFO (a sandbox),
 *   and sees SIDL processes (proc_find finds them once pinsertchild ran).
 *   PROC_FLAG_TRACED is set in pbi_flags/pbsi_flags of a traced process.
 * - getsid() skips zombies (proc_find, kern_prot.c), answering ESRCH, and
 *   can be told to miss a process a few times (one not findable yet).
 * - A process with sidl_reads > 0 is being forked: every look at it counts
 *   down, and it turns SRUN when the count reaches 0.
 * - proc_pidinfo(PROC_PIDTASKALLINFO) (proc_info.c proc_pidtaskallinfo):
 *   proc_bsdinfo and proc_taskinfo of one process in one call; CHECK_SAME_USER
 *   (EPERM for another user's process unless root), ESRCH for a zombie
 *   (proc_find skips it: no task). Its CPU times are Mach absolute time
 *   units, converted by mach_timebase_info, which answers 125/3 as on Apple
 *   silicon (24 MHz ticks; Intel's is 1/1, nanoseconds already).
 * - proc_pidinfo(PROC_PIDVNODEPATHINFO): the cwd (pvi_cdir.vip_path);
 *   CHECK_SAME_USER as above, ESRCH for a zombie.
 * - proc_pidpath (PROC_PIDPATHINFO): NO_CHECK_SAME_USER, so another user's
 *   exe is readable; ESRCH for a zombie; libproc refuses a buffer outside
 *   [MAXPATHLEN, PROC_PIDPATHINFO_MAXSIZE] with ENOMEM, and the answer is
 *   the path's length.
 * - A process with looks_left > 0 exits during the reads: each call about
 *   it (proc_pidinfo, proc_pidpath, KERN_PROC_PID, KERN_PROCARGS2, getsid)
 *   counts down, and the call that reaches 0 finds it gone, or finds
 *   another process (started at reborn_sec) under its pid. KERN_PROC_ALL
 *   does not count: a test lists it, then sees it go mid-batch.
 * - sysctl(KERN_PROCARGS2) (kern_sysctl.c sysctl_procargsx): EINVAL for a
 *   request larger than KERN_ARGMAX (plus the argc word), for a pid proc_find
 *   does not find (gone, zombie), for another user's process unless root
 *   (is_procargs_content_read_permitted) and for a task not IPC-active
 *   (SIDL); EIO when the copy from the target's stack fails. A buffer
 *   smaller than the area gets argc and the area's last bytes (the head is
 *   cut, no error). The area itself is whatever the test gives (a
 *   cs_restricted process's ends after argv).
 *
 * This checks the core's logic and memory handling against these stated
 * behaviours; it is no evidence about macOS itself, which only the macOS
 * wheel tests (cibuildwheel on a macOS runner) give. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <libproc.h>
#include <sys/sysctl.h>

#include "sim_kernel.h"

struct sim_proc sim_table[SIM_MAX];
int sim_count;
uid_t sim_uid = 501;
int sim_sidl_listed;
int sim_grow_per_read;
struct sim_calls sim_calls;
int sim_argmax = 1 << 18;
struct mach_timebase_info sim_timebase = {125, 3};

#define KERN_PROCSLOP 5

static struct sim_proc *find(int pid)
{
    for (int i = 0; i < sim_count; i++)
        if (sim_table[i].pid == pid)
            return &sim_table[i];
    return NULL;
}

/* Returns pid's entry after one look at it by a call about that pid: the look that ends looks_left finds the
 * process gone (NULL), or another process under its pid. */
static struct sim_proc *look(int pid)
{
    struct sim_proc *p = find(pid);
    if (!p || p->looks_left <= 0 || --p->looks_left > 0)
        return p;
    if (p->reborn_sec) {
        p->sec = p->reborn_sec; /* the pid's new process: another start time, its own everything */
        p->usec = 0;
        return p;
    }
    size_t i = (size_t)(p - sim_table);
    memmove(p, p + 1, (size_t)(sim_count - 1 - (int)i) * sizeof *p);
    sim_count--;
    return NULL;
}

kern_return_t mach_timebase_info(mach_timebase_info_t info)
{
    *info = sim_timebase;
    return 0;
}

/* One look at p: a process being forked comes closer to SRUN with each. */
static int observe(struct sim_proc *p)
{
    int st = p->stat;
    if (p->stat == SIDL && p->sidl_reads > 0 && --p->sidl_reads == 0)
        p->stat = SRUN;
    return st;
}

/* Whether KERN_PROC_* walks list p (proc_iterate skips SIDL). */
static int kern_lists(struct sim_proc *p)
{
    return observe(p) != SIDL || sim_sidl_listed;
}

static void fill_kinfo(const struct sim_proc *p, int stat, struct kinfo_proc *k)
{
    memset(k, 0, sizeof *k);
    k->kp_proc.p_pid = p->pid;
    k->kp_proc.p_stat = (char)stat;
    k->kp_proc.p_flag = p->traced ? P_TRACED : 0;
    k->kp_proc.p_oppid = p->traced ? p->oppid : 0;
    k->kp_proc.p_starttime.tv_sec = p->sec;
    k->kp_proc.p_starttime.tv_usec = p->usec;
    strncpy(k->kp_proc.p_comm, p->exe, MAXCOMLEN); /* bcopy MAXCOMLEN into a zeroed [MAXCOMLEN+1] */
    k->kp_eproc.e_ppid = p->ppid;
    k->kp_eproc.e_pgid = p->pgid;
    k->kp_eproc.e_ucred.cr_uid = (uid_t)p->uid;
    k->kp_eproc.e_pcred.p_ruid = (uid_t)p->ruid;
    k->kp_eproc.e_pcred.p_svuid = (uid_t)p->svuid;
    k->kp_eproc.e_tdev = p->tdev;
}

int proc_listchildpids(pid_t ppid, void *buffer, int buffersize)
{
    sim_calls.listchildpids++;
    if (buffersize < 4) {
        errno = ENOMEM;
        return 0;
    }
    int want = buffersize / 4, n = 0;
    for (int i = sim_count - 1; i >= 0 && n < want; i--) {
        const struct sim_proc *p = &sim_table[i];
        if (p->ppid == ppid || (p->traced && p->oppid == ppid))
            ((int *)buffer)[n++] = p->pid;
    }
    return n;
}

static int short_info(struct sim_proc *p, int stat, void *buffer, int buffersize)
{
    struct proc_bsdshortinfo s;
    if (p->eperm_short) {
        errno = EPERM;
        return 0;
    }
    if (buffersize < (int)sizeof s) {
        errno = ENOMEM;
        return 0;
    }
    memset(&s, 0, sizeof s);
    s.pbsi_pid = (uint32_t)p->pid;
    s.pbsi_ppid = (uint32_t)p->ppid;
    s.pbsi_pgid = (uint32_t)p->pgid;
    s.pbsi_status = (uint32_t)stat;
    s.pbsi_flags = p->traced ? PROC_FLAG_TRACED : 0;
    s.pbsi_uid = (uid_t)p->uid;
    strncpy(s.pbsi_comm, p->exe, MAXCOMLEN - 1);
    memcpy(buffer, &s, sizeof s);
    return (int)sizeof s;
}

static int bsd_info(struct sim_proc *p, int stat, void *buffer, int buffersize)
{
    struct proc_bsdinfo b;
    if ((uid_t)p->uid != sim_uid && sim_uid != 0) {
        errno = EPERM;
        return 0;
    }
    if (buffersize < (int)sizeof b) {
        errno = ENOMEM;
        return 0;
    }
    memset(&b, 0, sizeof b);
    b.pbi_pid = (uint32_t)p->pid;
    b.pbi_ppid = (uint32_t)p->ppid;
    b.pbi_pgid = (uint32_t)p->pgid;
    b.pbi_status = (uint32_t)stat;
    b.pbi_flags = p->traced ? PROC_FLAG_TRACED : 0;
    b.pbi_uid = (uid_t)p->uid;
    b.pbi_ruid = (uid_t)p->ruid;
    b.pbi_svuid = (uid_t)p->svuid;
    b.e_tdev = (uint32_t)p->tdev;
    strncpy(b.pbi_comm, p->exe, MAXCOMLEN - 1);
    if (!p->no_p_name)
        strncpy(b.pbi_name, p->exe, 2 * MAXCOMLEN - 1);
    b.pbi_start_tvsec = (uint64_t)p->sec;
    b.pbi_start_tvusec = (uint64_t)p->usec;
    memcpy(buffer, &b, sizeof b);
    return (int)sizeof b;
}

/* Returns what PROC_PIDTASKALLINFO copies: bsd_info's record and the task's counters (same-user rule as BSDINFO). */
static int task_all_info(struct sim_proc *p, int stat, void *buffer, int buffersize)
{
    struct proc_taskallinfo t;
    if (buffersize < (int)sizeof t) {
        errno = ENOMEM;
        return 0;
    }
    memset(&t, 0, sizeof t);
    if (bsd_info(p, stat, &t.pbsd, (int)sizeof t.pbsd) == 0)
        return 0; /* EPERM: another user's */
    t.ptinfo.pti_virtual_size = p->vsize;
    t.ptinfo.pti_resident_size = p->rss;
    t.ptinfo.pti_total_user = p->user_abs;
    t.ptinfo.pti_total_system = p->sys_abs;
    t.ptinfo.pti_threadnum = p->threads;
    memcpy(buffer, &t, sizeof t);
    return (int)sizeof t;
}

/* Returns what PROC_PIDVNODEPATHINFO copies: the cwd (and root) paths, for the caller's own processes. */
static int vnode_path_info(struct sim_proc *p, void *buffer, int buffersize)
{
    struct proc_vnodepathinfo v;
    if ((uid_t)p->uid != sim_uid && sim_uid != 0) {
        errno = EPERM;
        return 0;
    }
    if (buffersize < (int)sizeof v) {
        errno = ENOMEM;
        return 0;
    }
    memset(&v, 0, sizeof v);
    strncpy(v.pvi_cdir.vip_path, p->cwd ? p->cwd : "/", sizeof v.pvi_cdir.vip_path - 1);
    strcpy(v.pvi_rdir.vip_path, "/");
    memcpy(buffer, &v, sizeof v);
    return (int)sizeof v;
}

int proc_pidpath(int pid, void *buffer, uint32_t buffersize)
{
    sim_calls.pidpath++;
    if (buffersize < MAXPATHLEN || buffersize > PROC_PIDPATHINFO_MAXSIZE) {
        errno = ENOMEM;
        return 0;
    }
    struct sim_proc *p = look(pid);
    if (!p || p->stat == SZOMB) {
        errno = ESRCH;
        return 0;
    }
    char *out = buffer;
    if (p->path)
        strncpy(out, p->path, buffersize - 1);
    else
        snprintf(out, buffersize, "/usr/bin/%s", p->exe);
    out[buffersize - 1] = 0;
    return (int)strlen(out);
}

int proc_pidinfo(int pid, int flavor, uint64_t arg, void *buffer, int buffersize)
{
    (void)arg;
    if (flavor == PROC_PIDT_SHORTBSDINFO)
        sim_calls.shortinfo++;
    else if (flavor == PROC_PIDTBSDINFO)
        sim_calls.bsdinfo++;
    else if (flavor == PROC_PIDTASKALLINFO)
        sim_calls.taskallinfo++;
    else if (flavor == PROC_PIDVNODEPATHINFO)
        sim_calls.vnodepathinfo++;
    struct sim_proc *p = look(pid);
    if (!p || p->stat == SZOMB) {
        errno = ESRCH;
        return 0;
    }
    int stat = observe(p);
    if (flavor == PROC_PIDT_SHORTBSDINFO)
        return short_info(p, stat, buffer, buffersize);
    if (flavor == PROC_PIDTBSDINFO)
        return bsd_info(p, stat, buffer, buffersize);
    if (flavor == PROC_PIDTASKALLINFO)
        return task_all_info(p, stat, buffer, buffersize);
    if (flavor == PROC_PIDVNODEPATHINFO)
        return vnode_path_info(p, buffer, buffersize);
    errno = EINVAL;
    return 0;
}

/* Forks n processes (children of launchd, our user) at fresh pids. */
static void fork_some(int n)
{
    int next = 1;
    for (int i = 0; i < sim_count; i++)
        if (sim_table[i].pid >= next)
            next = sim_table[i].pid + 1;
    for (int i = 0; i < n && sim_count < SIM_MAX; i++) {
        struct sim_proc *p = &sim_table[sim_count++];
        memset(p, 0, sizeof *p);
        p->pid = p->pgid = p->sid = next + i;
        p->ppid = 1;
        p->uid = 501;
        p->stat = SRUN;
        p->sec = 1800000000L + p->pid;
        strcpy(p->exe, "forked");
    }
}

static int kern_proc_all(void *oldp, size_t *oldlenp)
{
    const size_t rec = sizeof(struct kinfo_proc);
    sim_calls.kern_proc_all++;
    if (!oldp) {
        size_t n = 0;
        for (int i = 0; i < sim_count; i++)
            n += kern_lists(&sim_table[i]);
        *oldlenp = (n + KERN_PROCSLOP) * rec;
        return 0;
    }
    fork_some(sim_grow_per_read);
    size_t room = *oldlenp / rec, n = 0, needed = 0;
    for (int i = sim_count - 1; i >= 0; i--) {
        struct sim_proc *p = &sim_table[i];
        int stat = p->stat;
        if (!kern_lists(p))
            continue;
        needed++;
        if (n < room) {
            struct kinfo_proc k;
            fill_kinfo(p, stat, &k);
            memcpy((char *)oldp + n * rec, &k, rec);
            n++;
        }
    }
    *oldlenp = n * rec;
    if (needed > n) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

static int kern_proc_pid(int pid, void *oldp, size_t *oldlenp)
{
    sim_calls.kern_proc_pid++;
    struct sim_proc *p = look(pid);
    int stat = p ? p->stat : 0;
    if (!p || !kern_lists(p)) {
        *oldlenp = 0;
        return 0;
    }
    struct kinfo_proc k;
    if (*oldlenp < sizeof k) {
        errno = ENOMEM;
        return -1;
    }
    fill_kinfo(p, stat, &k);
    memcpy(oldp, &k, sizeof k);
    *oldlenp = sizeof k;
    return 0;
}

static int kern_procargs2(int pid, void *oldp, size_t *oldlenp)
{
    sim_calls.procargs2++;
    struct sim_proc *p = find(pid);
    if (!oldp) {
        if (!p || p->stat == SZOMB) {
            errno = EINVAL;
            return -1;
        }
        *oldlenp = (p->args_len + sizeof(int) + 3) & ~(size_t)3;
        return 0;
    }
    if (*oldlenp <= sizeof(int) || *oldlenp - sizeof(int) > (size_t)sim_argmax) {
        errno = EINVAL;
        return -1;
    }
    size_t buflen = *oldlenp - sizeof(int);
    p = look(pid);
    if (!p || p->stat == SZOMB || observe(p) == SIDL || ((uid_t)p->uid != sim_uid && sim_uid != 0)) {
        errno = EINVAL;
        return -1;
    }
    if (p->args_eio) {
        errno = EIO;
        return -1;
    }
    size_t size = p->args_len <= buflen ? p->args_len : buflen;
    memcpy(oldp, &p->argc, sizeof(int));
    memcpy((char *)oldp + sizeof(int), p->args + p->args_len - size, size); /* the tail when cut */
    *oldlenp = size + sizeof(int);
    return 0;
}

int sysctl(int *name, unsigned namelen, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
    (void)newp;
    (void)newlen;
    if (namelen == 2 && name[0] == CTL_KERN && name[1] == KERN_ARGMAX) {
        if (!oldp || *oldlenp < sizeof(int)) {
            errno = ENOMEM;
            return -1;
        }
        memcpy(oldp, &sim_argmax, sizeof(int));
        *oldlenp = sizeof(int);
        return 0;
    }
    if (namelen == 3 && name[0] == CTL_KERN && name[1] == KERN_PROCARGS2)
        return kern_procargs2(name[2], oldp, oldlenp);
    if (namelen == 3 && name[0] == CTL_KERN && name[1] == KERN_PROC && name[2] == KERN_PROC_ALL)
        return kern_proc_all(oldp, oldlenp);
    if (namelen == 4 && name[0] == CTL_KERN && name[1] == KERN_PROC && name[2] == KERN_PROC_PID)
        return kern_proc_pid(name[3], oldp, oldlenp);
    errno = EINVAL;
    return -1;
}

pid_t sim_getsid(pid_t pid)
{
    sim_calls.getsid++;
    struct sim_proc *p = look(pid);
    if (p)
        observe(p);
    if (!p || p->stat == SZOMB) {
        errno = ESRCH;
        return -1;
    }
    if (p->getsid_fails > 0) {
        p->getsid_fails--;
        errno = ESRCH;
        return -1;
    }
    return p->sid;
}
