/* Simulated <sys/sysctl.h>: KERN_PROC_ALL, KERN_PROC_PID, KERN_ARGMAX,
 * KERN_PROCARGS2 (the SDK's numbers) and a 648-byte
 * kinfo_proc with the SDK's offsets for the fields read (kp_eproc 296,
 * e_pcred.p_ruid 392, p_svuid 396, e_ucred.cr_uid 420,
 * e_ppid 560, e_pgid 564, e_tdev 572). */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/proc.h>
#include <sys/types.h>

#define CTL_KERN 1
#define KERN_PROC 14
#define KERN_PROC_ALL 0
#define KERN_PROC_PID 1
#define KERN_ARGMAX 8
#define KERN_PROCARGS2 49

struct _ucred {
    int32_t cr_ref;
    uid_t cr_uid;
};

/* The credentials' real and saved uids (pc_lock and pc_ucred before them are not read). */
struct _pcred {
    char pc_lock[72];
    void *pc_ucred;
    uid_t p_ruid, p_svuid;
    gid_t p_rgid, p_svgid;
    int p_refcnt;
};

struct eproc {
    char _unread0[16]; /* e_paddr, e_sess */
    struct _pcred e_pcred;
    struct _ucred e_ucred;
    char _unread2[264 - 128];
    pid_t e_ppid;
    pid_t e_pgid;
    short e_jobc;
    int32_t e_tdev; /* Darwin's dev_t is 32 bits (glibc's is 64); NODEV (-1) for no terminal */
    char _unread3[352 - 280];
};

struct kinfo_proc {
    struct extern_proc kp_proc;
    struct eproc kp_eproc;
};

int sysctl(int *name, unsigned namelen, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
