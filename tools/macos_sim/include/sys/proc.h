/* Simulated <sys/proc.h>: p_stat values and the fields of extern_proc that
 * proctree_macos.c reads, at the SDK's offsets (p_stat 36, p_pid 40). */
#pragma once
#include <stdint.h>
#include <sys/time.h>
#include <sys/types.h>
#ifndef MAXCOMLEN
#define MAXCOMLEN 16
#endif

#define SIDL 1
#define SRUN 2
#define SSLEEP 3
#define SSTOP 4
#define SZOMB 5

struct extern_proc {
    union {
        struct {
            void *forw, *back;
        } p_st1;
        struct timeval __p_starttime;
    } p_un;
#define p_starttime p_un.__p_starttime
    void *p_vmspace;
    void *p_sigacts;
    int p_flag;
    char p_stat;
    pid_t p_pid;
    char _unread[200];
    char p_comm[MAXCOMLEN + 1];
};
