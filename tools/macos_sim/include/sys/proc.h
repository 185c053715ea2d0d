/* Simulated <sys/proc.h>: p_stat values, P_TRACED and the fields of
 * extern_proc that csrc/core/macos_*.c read, at the SDK's offsets (p_flag 32,
 * p_stat 36, p_pid 40, p_oppid 44, p_comm 243; 296 bytes in all). */
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

#define P_TRACED 0x00000800

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
    pid_t p_oppid;
    char _unread1[243 - 48];
    char p_comm[MAXCOMLEN + 1];
    char _unread2[296 - 243 - (MAXCOMLEN + 1)];
};
