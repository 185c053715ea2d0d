/* A simulated xnu for csrc/proctree_macos.c: each call reproduces one
 * behaviour of the real one that the macOS core must survive.
 *
 * - proc_listallpids / proc_listchildpids: a COUNT back for a size in BYTES,
 *   0 with errno on error, silent truncation to the buffer, newest pid first
 *   (xnu bsd/kern/proc_info.c, proc_listpids, and libproc's wrappers).
 * - PROC_PPID_ONLY also lists a traced process under its original parent
 *   (the p_oppid clause in proc_listpids), while its ppid is the tracer.
 * - proc_pidinfo fails with ESRCH for zombies (as observed on macOS 14 in
 *   netdata#23297 and unsloth#8493), EPERM for BSDINFO of another user's
 *   process (CHECK_SAME_USER), and optionally EPERM for SHORTBSDINFO.
 * - sysctl(KERN_PROC_PID) answers for every process, zombies included, and
 *   "succeeds" with length 0 for a pid that is gone.
 * - getsid() skips zombies (proc_find), answering ESRCH, and may not find
 *   a process that is still being created.
 *
 * This checks the core's logic and memory handling against these stated
 * behaviours; it is no evidence about macOS itself, which only the macOS
 * wheel tests (cibuildwheel on a macOS runner) give. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <libproc.h>
#include <sys/sysctl.h>

#include "sim_kernel.h"

struct sim_proc sim_table[SIM_MAX];
int sim_count;
uid_t sim_uid = 501;

static struct sim_proc *find(int pid)
{
    for (int i = 0; i < sim_count; i++)
        if (sim_table[i].pid == pid)
            return &sim_table[i];
    return NULL;
}

int proc_listallpids(void *buffer, int buffersize)
{
    if (!buffer)
        return sim_count + 20;
    if (buffersize < 4) {
        errno = ENOMEM;
        return 0;
    }
    int want = buffersize / 4, n = 0;
    for (int i = sim_count - 1; i >= 0 && n < want; i--)
        ((int *)buffer)[n++] = sim_table[i].pid;
    return n;
}

int proc_listchildpids(pid_t ppid, void *buffer, int buffersize)
{
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

int proc_pidinfo(int pid, int flavor, uint64_t arg, void *buffer, int buffersize)
{
    (void)arg;
    struct sim_proc *p = find(pid);
    if (!p || p->stat == SZOMB) {
        errno = ESRCH;
        return 0;
    }
    if (flavor == PROC_PIDT_SHORTBSDINFO) {
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
        s.pbsi_status = (uint32_t)p->stat;
        s.pbsi_uid = (uid_t)p->uid;
        memcpy(s.pbsi_comm, p->comm, MAXCOMLEN);
        s.pbsi_comm[MAXCOMLEN - 1] = 0;
        memcpy(buffer, &s, sizeof s);
        return (int)sizeof s;
    }
    if (flavor == PROC_PIDTBSDINFO) {
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
        b.pbi_status = (uint32_t)p->stat;
        b.pbi_uid = (uid_t)p->uid;
        memcpy(b.pbi_comm, p->comm, MAXCOMLEN);
        b.pbi_comm[MAXCOMLEN - 1] = 0;
        memcpy(b.pbi_name, p->name, 2 * MAXCOMLEN);
        b.pbi_name[2 * MAXCOMLEN - 1] = 0;
        b.pbi_start_tvsec = (uint64_t)p->sec;
        b.pbi_start_tvusec = (uint64_t)p->usec;
        memcpy(buffer, &b, sizeof b);
        return (int)sizeof b;
    }
    errno = EINVAL;
    return 0;
}

int sysctl(int *name, unsigned namelen, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
    (void)newp;
    (void)newlen;
    if (namelen != 4 || name[0] != CTL_KERN || name[1] != KERN_PROC || name[2] != KERN_PROC_PID) {
        errno = EINVAL;
        return -1;
    }
    struct sim_proc *p = find(name[3]);
    if (!p) {
        *oldlenp = 0;
        return 0;
    }
    struct kinfo_proc k;
    if (*oldlenp < sizeof k) {
        errno = ENOMEM;
        return -1;
    }
    memset(&k, 0, sizeof k);
    k.kp_proc.p_pid = p->pid;
    k.kp_proc.p_stat = (char)p->stat;
    k.kp_proc.p_starttime.tv_sec = p->sec;
    k.kp_proc.p_starttime.tv_usec = p->usec;
    memcpy(k.kp_proc.p_comm, p->comm, MAXCOMLEN + 1);
    k.kp_eproc.e_ppid = p->ppid;
    k.kp_eproc.e_pgid = p->pgid;
    k.kp_eproc.e_ucred.cr_uid = (uid_t)p->uid;
    memcpy(oldp, &k, sizeof k);
    *oldlenp = sizeof k;
    return 0;
}

pid_t sim_getsid(pid_t pid)
{
    struct sim_proc *p = find(pid);
    if (!p || p->stat == SZOMB || p->no_getsid) {
        errno = ESRCH;
        return -1;
    }
    return p->sid;
}
