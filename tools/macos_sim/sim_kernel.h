/* The simulated process table that sim_kernel.c answers from. */
#pragma once
#include <stdint.h>
#include <sys/types.h>
#include <mach/mach_time.h>

struct sim_proc {
    int pid, ppid, pgid, sid, uid, stat;
    int traced, oppid;  /* P_TRACED: ppid is the tracer, oppid the original parent */
    int eperm_short;    /* a sandbox rule refuses even SHORTBSDINFO */
    int getsid_fails;   /* getsid() answers ESRCH this many more times (not findable yet) */
    int sidl_reads;     /* reads as SIDL this many more times, then fork completes (SRUN) */
    long sec, usec;     /* p_start */
    char exe[48];       /* the exec name: p_comm, pbi_comm, pbi_name are cut from it */
    int no_p_name;      /* p_name empty (pbi_name ""), as for a process that never exec'd */
    int argc;           /* KERN_PROCARGS2: argc, and the strings area after "executable_path=" */
    const char *args;   /* exec path, padding, argv, environment (none if cs_restricted), ... */
    size_t args_len;
    int args_eio;       /* vm_map_copyin fails: EIO */
    int ruid, svuid;    /* real and saved uid (uid is the effective one) */
    int tdev;           /* the controlling terminal's device, -1 (NODEV) for none */
    uint64_t rss, vsize;        /* PROC_PIDTASKINFO: bytes */
    uint64_t user_abs, sys_abs; /* PROC_PIDTASKINFO: CPU time in Mach absolute time units */
    int threads;
    const char *path;   /* proc_pidpath: the executable's path (NULL: "/usr/bin/" + exe) */
    const char *cwd;    /* PROC_PIDVNODEPATHINFO's pvi_cdir path (NULL: "/") */
    int looks_left;     /* > 0: this many more looks (any call about it), then it exits: */
    long reborn_sec;    /*   0 it is gone (reaped); else another process takes the pid, started then */
};

/* Calls the core made, by kind: tests bound the work a snapshot does. */
struct sim_calls {
    int kern_proc_all, kern_proc_pid, bsdinfo, shortinfo, getsid, listchildpids, procargs2;
    int taskallinfo, vnodepathinfo, pidpath;
};

#define SIM_MAX 6000
extern struct sim_proc sim_table[SIM_MAX];
extern int sim_count;
extern uid_t sim_uid;         /* the caller's uid: BSDINFO is refused for other users unless 0 */
extern int sim_sidl_listed;   /* 1: KERN_PROC_* list SIDL processes (a kernel without proc_iterate's skip) */
extern int sim_grow_per_read; /* processes forked between a KERN_PROC_ALL size probe and its read */
extern struct sim_calls sim_calls;
extern struct mach_timebase_info sim_timebase; /* 125/3 as on Apple silicon */
extern int sim_argmax;         /* KERN_ARGMAX: a larger KERN_PROCARGS2 request is EINVAL */
