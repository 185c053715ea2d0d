/* proctree C core: reads facts about the process table, nothing else.
 *
 * No policy, no signals, no allocation the caller did not size. One
 * implementation per platform (proctree_linux.c, proctree_macos.c) defines
 * every function below. Every function returns 0 (or a count) on success
 * and -errno on failure; errno itself is never the channel.
 * csrc/include/proctree_cdef.h must stay identical in declarations (cffi reads it). */
#ifndef PROCTREE_H
#define PROCTREE_H

#include <stdint.h>

#define PT_NAME_MAX 64

/* One process. `state` uses Linux's letters (R S D Z T t X I); `start_time`
 * is opaque: equal only for the same process (Linux: clock ticks since boot,
 * macOS: microseconds since the epoch). */
struct pt_proc {
    int32_t pid;
    int32_t ppid; /* macOS: the original parent while traced (p_oppid), not the tracer */
    int32_t pgid;
    int32_t sid; /* 0 when unknown: macOS cannot read a zombie's session */
    uint32_t uid;
    char state;
    char leader_state; /* Linux: the state stat printed, the leader thread's (else 0) */
    uint8_t threaded;  /* Linux: 1 if it had more than one thread when read (else 0) */
    char _pad;
    uint64_t start_time;
    char name[PT_NAME_MAX]; /* NUL-terminated, truncated to fit */
};

_Static_assert(sizeof(struct pt_proc) == 96, "pt_proc layout is part of the binding");

/* Returns the number of rows written, -ENOBUFS if more than cap processes exist, or -errno. */
int pt_snapshot(struct pt_proc *out, int cap);

/* Returns 0 with *out filled, -ESRCH if pid does not exist, -EBUSY (macOS) if
 * it is still being forked after bounded retries (alive, not yet readable), or -errno. */
int pt_proc(int32_t pid, struct pt_proc *out);

/* Returns the number of direct children of pid written to out, -ENOBUFS if more
 * than cap, -EAGAIN if the answer may be incomplete because pid's threads
 * changed during the read (retry or fall back to a scan), -ESRCH, or -errno. */
int pt_children(int32_t pid, int32_t *out, int cap);

/* Returns what pt_children returns, for the process in *parent, a row that
 * pt_proc or pt_snapshot filled earlier: that row stands in for the read of
 * the parent that pt_children starts with (its start time still has to match
 * after the read, or the answer is -ESRCH). Saves one read per node in a walk. */
int pt_children_of(const struct pt_proc *parent, int32_t *out, int cap);

/* Returns the number of rows written to out: the direct children of the
 * process in *parent, verified as pt_descendants_of verifies them; errors as there. */
int pt_verified_children_of(const struct pt_proc *parent, struct pt_proc *out, int cap);

/* Returns the number of rows written to out: every process below the one in
 * *root (a row pt_proc filled), breadth-first, each read back after its
 * parent's list and found with the same parent; -EAGAIN if the tree kept
 * changing under the walk (scan instead), -ENOBUFS if more than fit in cap,
 * -ESRCH if root is gone, or -errno. A process that reparented within the
 * subtree during the walk may appear twice (csrc/core/walk.c). */
int pt_descendants_of(const struct pt_proc *root, struct pt_proc *out, int cap);

/* Returns 0 with *out set to "now" in start_time units, or -errno. */
int pt_now(uint64_t *out);

#endif
