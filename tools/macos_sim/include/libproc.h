/* Simulated <libproc.h>: just the calls csrc/core/macos_*.c make. */
#pragma once
#include <stdint.h>
#include <sys/types.h>
#include <sys/proc_info.h>

int proc_listchildpids(pid_t ppid, void *buffer, int buffersize);
int proc_pidinfo(int pid, int flavor, uint64_t arg, void *buffer, int buffersize);
int proc_pidpath(int pid, void *buffer, uint32_t buffersize);

/* getsid() must answer from the simulated table, not this machine's. */
#define getsid sim_getsid
pid_t sim_getsid(pid_t pid);
