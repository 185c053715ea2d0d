/* Simulated <sys/sysctl.h>: KERN_PROC_PID and a 648-byte kinfo_proc. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/proc.h>
#include <sys/types.h>

#define CTL_KERN 1
#define KERN_PROC 14
#define KERN_PROC_PID 1

struct _ucred {
    int32_t cr_ref;
    uid_t cr_uid;
};

struct kinfo_proc {
    struct extern_proc kp_proc;
    struct eproc {
        pid_t e_ppid;
        pid_t e_pgid;
        struct _ucred e_ucred;
    } kp_eproc;
    char _unread[648 - sizeof(struct extern_proc) - 16];
};

int sysctl(int *name, unsigned namelen, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
