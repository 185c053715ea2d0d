/* The simulated process table that sim_kernel.c answers from. */
#pragma once
#include <sys/types.h>

struct sim_proc {
    int pid, ppid, pgid, sid, uid, stat;
    int traced, oppid;  /* ptraced: ppid is the tracer, oppid the real parent */
    int eperm_short;    /* a sandbox rule refuses even SHORTBSDINFO */
    int no_getsid;      /* getsid() cannot find it yet (being created) */
    long sec, usec;     /* p_start */
    char comm[17], name[33];
};

#define SIM_MAX 5000
extern struct sim_proc sim_table[SIM_MAX];
extern int sim_count;
extern uid_t sim_uid; /* the caller's uid: BSDINFO is refused for other users unless 0 */
