/* What the Linux core's files share: linux_proc.c's reads of one process and its threads, which linux_table.c (the
 * table, children) builds on. Not read by cffi: nothing here is part of the module.
 */
#ifndef PROCTREE_CORE_LINUX_H
#define PROCTREE_CORE_LINUX_H

#include "platform.h"

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>

/* Most processes have one thread; beyond this pt_children asks the caller to scan. */
#define MAX_THREADS 1024

/* What one stat line tells beyond struct pt_proc. */
struct stat_extra {
    int64_t num_threads;
    char leader_state; /* the state stat printed: the leader thread's, even when others live */
};

/* Returns 0 with *out filled from <dirfd>/<path> (uid left alone), -ESRCH if the process is gone, or -errno. */
int read_stat_at(int dirfd, const char *path, struct pt_proc *out, struct stat_extra *extra);

/* Returns 0 with *out filled for the process whose /proc entry is <dirfd>/<dir>, -ESRCH, or -errno. */
int read_process_at(int dirfd, const char *dir, size_t dir_len, struct pt_proc *out, struct stat_extra *extra);

/* Returns the length of the next name in dir that is a decimal pid or tid (*name set to it), 0 at its end, or -errno. */
int next_pid_name(DIR *dir, const char **name);

/* Returns 0 if pid is a thread group leader (a process), -ESRCH if it is another thread or gone, or -errno. */
int check_leader(int32_t pid);

/* Returns 0 with *out's stat fields (not uid) filled for pid, -ESRCH if it is gone or not a process, or -errno. */
int read_pid_stat_only(int32_t pid, struct pt_proc *out, struct stat_extra *extra);

/* Returns the number of thread ids of pid written to tids (at most cap), -ESRCH, or -errno; -ENOBUFS if more than cap. */
int list_threads(int32_t pid, int32_t *tids, int cap);

/* Returns 1 with *state set if thread tid of pid exists and has not exited, 0 if not, or -errno. */
int thread_state(int32_t pid, int32_t tid, char *state);

#endif
