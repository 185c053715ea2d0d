/* Simulated <sys/sysctl.h>: KERN_PROC_ALL, KERN_PROC_PID, KERN_ARGMAX,
 * KERN_PROCARGS2 (the SDK's numbers) and a 648-byte
 * kinfo_proc with the SDK's offsets for the fields read (kp_eproc 296,
 * e_ucred.cr_uid 420, e_ppid 560, e_pgid 564). */
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

struct eproc {
    char _unread1[120];
    struct _ucred e_ucred;
    char _unread2[264 - 128];
    pid_t e_ppid;
    pid_t e_pgid;
    char _unread3[352 - 272];
};

struct kinfo_proc {
    struct extern_proc kp_proc;
    struct eproc kp_eproc;
};

int sysctl(int *name, unsigned namelen, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
