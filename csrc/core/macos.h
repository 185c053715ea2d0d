/* What the macOS core's files share: macos_proc.c's reads of one process, which macos_table.c (the table, children)
 * and macos_procargs.c (argv, environment) build on. Not read by cffi: nothing here is part of the module. Each file
 * defines _DARWIN_C_SOURCE (struct kinfo_proc, struct extern_proc) before it includes this one.
 */
#ifndef PROCTREE_CORE_MACOS_H
#define PROCTREE_CORE_MACOS_H

#include "proctree.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/proc.h>
#include <sys/proc_info.h>
#include <sys/sysctl.h>

/* How often a process seen in SIDL (or not yet findable by pid) is read
 * again, 20 us apart: fork takes it out of SIDL within microseconds
 * (kern_fork.c: SRUN right after pinsertchild), so the bound is ~2 ms. */
#define CREATION_TRIES    100
#define CREATION_PAUSE_NS 20000

/* Returns nothing; sleeps CREATION_PAUSE_NS so a process being forked can finish. */
void creation_pause(void);

/* Returns the Linux letter (R S T Z) for a BSD p_stat value; one it does not know reads as alive ('R'). */
char state_letter(uint32_t st);

/* Returns 0 after copying src (at most srclen bytes, maybe unterminated) into name as a NUL-padded string. */
int copy_name(char name[PT_NAME_MAX], const char *src, size_t srclen);

/* Returns 0 with *out filled, -ESRCH if pid is gone (or libproc refuses it), or -errno. */
int short_info(int32_t pid, struct proc_bsdshortinfo *out);

/* Returns 0 with *out filled, -EPERM for another user's process, -ESRCH, or -errno. */
int bsd_info(int32_t pid, struct proc_bsdinfo *out);

/* Returns 0 with *out filled, -ESRCH if pid is gone or in SIDL (sysctl reports both as length 0), or -errno. */
int kinfo(int32_t pid, struct kinfo_proc *out);

/* Returns the start time of a kinfo_proc record in start_time units (microseconds since the epoch). */
uint64_t kinfo_start(const struct kinfo_proc *kp);

/* Returns the start time of a proc_bsdinfo record in start_time units. */
uint64_t bsd_start(const struct proc_bsdinfo *bi);

/* Returns the original parent of a traced process (p_oppid), or 0 if kp is not traced. */
int32_t traced_parent(const struct kinfo_proc *kp);

/* Returns 1 if a live (not zombie) process started at or before `born` holds pid oppid, judged from its own record,
 * else 0. */
int parent_fits(int stat, uint64_t parent_start, uint64_t born);

/* Returns 0 with *ppid set to kp's parent as proctree reports it (p_oppid when traced), or -errno. */
int reported_parent(const struct kinfo_proc *kp, int32_t *ppid);

/* Returns 0 with *out filled from a kinfo_proc record, except ppid (reported_parent) and sid (the caller's). */
int fill_from_kinfo(const struct kinfo_proc *kp, struct pt_proc *out);

/* Returns 1 if libproc sees pid in SIDL (being forked), else 0. */
int in_creation(int32_t pid);

/* Returns <0, 0 or >0 as the record *a's pid sorts before, with or after *b's (ascending, for qsort and bsearch). */
int cmp_kinfo_pid(const void *a, const void *b);

/* Returns 0 with *list (malloc'd, the caller frees it) holding *n records of every process (one
 * sysctl(KERN_PROC_ALL)) in ascending pid order, -ENOBUFS if more than cap exist, or -errno (macos_table.c). */
int sorted_kinfo_table(int cap, struct kinfo_proc **list, size_t *n);

/* Returns 0 with *ppid set for the record kp of the sorted table[0..n), its traced parent resolved from the table. */
int table_parent(const struct kinfo_proc *table, size_t n, const struct kinfo_proc *kp, int32_t *ppid);

#endif
