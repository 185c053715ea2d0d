/* proctree C core: reads facts about the process table, nothing else.
 *
 * No policy, no signals, no allocation the caller did not size. One
 * implementation per platform (csrc/core/linux_proc.c, linux_table.c, linux_procargs.c; macos_proc.c, macos_table.c,
 * macos_procargs.c) defines every function below. Every function returns 0 (or a count) on success
 * and -errno on failure; errno itself is never the channel.
 * cffi reads this file too (build_ffi.cdef_from_header): comments, preprocessor lines and _Static_assert lines are
 * dropped and integer macros replaced by their values, so every declaration must stay plain C that cffi parses. */
#ifndef PROCTREE_H
#define PROCTREE_H

#include <stddef.h>
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
 * subtree during the walk may appear twice (csrc/core/walk.c). The walk
 * keeps its queue of children lists in out past the rows, so it can need
 * -ENOBUFS (a bigger out) for a tree that has fewer than cap processes. */
int pt_descendants_of(const struct pt_proc *root, struct pt_proc *out, int cap);

/* Returns 0 with *out set to "now" in start_time units, or -errno. */
int pt_now(uint64_t *out);

/* Environments and argument lists (for the reaper). Blocks are NUL-separated
 * entries exactly as the kernel gives them; nothing is decoded here. An
 * environment longer than this is not scanned for a variable (-E2BIG). */
#define PT_ENV_SCAN_MAX (1 << 20)

/* Returns the number of bytes of pid's environment block written to buf,
 * -E2BIG if it is longer than cap, -ESRCH if pid is gone, -EACCES/-EPERM if
 * the system refuses, or -errno. A zombie or a kernel thread has 0 bytes.
 * macOS: buf is also the scratch for the whole KERN_PROCARGS2 area. */
int pt_environ(int32_t pid, char *buf, size_t cap);

/* Returns the number of bytes of pid's NUL-separated argv written to buf; errors as pt_environ. */
int pt_cmdline(int32_t pid, char *buf, size_t cap);

/* Returns the length of the value of the first entry of pid's environment
 * that starts with key=, copied NUL-terminated into val; -ENODATA if there is
 * none, -ENAMETOOLONG if the value does not fit valcap (with its NUL), -E2BIG
 * if the environment is longer than PT_ENV_SCAN_MAX and key= is not in its
 * first PT_ENV_SCAN_MAX bytes, -EINVAL for an empty key or one holding '=' or
 * NUL, or valcap or scratchcap 0; otherwise errors as pt_environ. scratch is
 * the read buffer (Linux streams through it; macOS needs the whole area). */
int pt_env_find(int32_t pid, const char *key, size_t keylen, char *val, size_t valcap, char *scratch,
                size_t scratchcap);

/* Returns 0 after pt_env_find for each of pids[0..n): status[i] gets its
 * return, the value goes to vals + i * slot (valcap slot); -EINVAL for bad
 * arguments (n < 0, slot 0, a bad key), before anything is read. */
int pt_env_scan(const int32_t *pids, int n, const char *key, size_t keylen, int32_t *status, char *vals, size_t slot,
                char *scratch, size_t scratchcap);

/* Pure parsers (csrc/core/args.c), the same on every platform. */

/* Returns the length of the value of the first entry of blk[0..len) that
 * starts with key= (a last entry without a NUL ends at len), copied
 * NUL-terminated into val; -ENODATA, -ENAMETOOLONG or -EINVAL as pt_env_find. */
int pt_block_find(const char *blk, size_t len, const char *key, size_t keylen, char *val, size_t valcap);

/* Returns what pt_block_find returns for the block read from fd to its end,
 * streamed through scratch, or -E2BIG if more than limit bytes follow and
 * key= is not complete within the first limit; -errno if a read fails. */
int pt_stream_find(int fd, const char *key, size_t keylen, char *val, size_t valcap, char *scratch, size_t scratchcap,
                   size_t limit);

/* Returns 0 with the argv and environment parts of a KERN_PROCARGS2 area
 * blk[0..len) (int argc, exec path, NUL padding, argc strings, environment
 * strings up to an empty one or the end) as offsets and lengths into blk,
 * each part whole NUL-terminated entries; -EINVAL if it is malformed. */
int pt_procargs2_split(const char *blk, size_t len, size_t *argv_off, size_t *argv_len, size_t *env_off,
                       size_t *env_len);

/* Process facts (csrc/core/facts_linux.c; facts_macos.c and facts_macos_row.c; facts_parse.c holds the pure
 * parsers): what a psutil user reads about a process, in the kernel's own units (the binding converts). Which files are read is chosen by a mask of the
 * PT_FACT_* bits below (decimal: cffi's header reader replaces only decimal macros); stat is always read, since
 * it carries the identity. Every file of one process is opened relative to one open /proc/<pid> directory, so
 * a reused pid can never mix two processes' facts: the stale directory answers ESRCH/ENOENT instead. */
#define PT_FACT_STAT    1  /* state, ppid, name, start time, CPU ticks, memory, threads, terminal, kernel thread */
#define PT_FACT_UIDS    2  /* real, effective and saved uid (the status file) */
#define PT_FACT_CMDLINE 4  /* argv, NUL-separated as the kernel gives it */
#define PT_FACT_EXE     8  /* the executable's path (readlink exe) */
#define PT_FACT_CWD     16 /* the working directory (readlink cwd) */
#define PT_FACT_ALL     31

struct pt_facts {
    int32_t pid;
    int32_t status; /* 0, or this row's -errno: -ESRCH gone (or another process under the pid), -ENOBUFS its
                       strings did not fit the buffer (its stat fields are kept: read it alone, pinned to its
                       start_time), -EACCES/-EPERM/-EIO/... unreadable */
    int32_t ppid;
    int32_t tty_nr;  /* the controlling terminal's device number, 0 for none */
    uint32_t have;   /* PT_FACT_* bits filled */
    uint32_t denied; /* PT_FACT_* bits the system refused (EACCES/EPERM): unknown, not empty. macOS: PT_FACT_STAT
                        here (with its bit in have) means the task's counters (utime, stime, vsize, rss_pages,
                        num_threads) were refused (another user's process) and are unknown */
    char state;      /* stat's letter, as psutil reads it (the leader thread's) */
    uint8_t kthread; /* 1 if PF_KTHREAD is in stat's flags; macOS has none: 0 */
    char _pad[2];
    uint32_t ruid, euid, suid;
    uint64_t start_time;   /* pt_proc's start_time: clock ticks since boot (macOS: microseconds since the epoch) */
    uint64_t utime, stime; /* clock ticks (macOS: nanoseconds) */
    uint64_t vsize;        /* bytes */
    uint64_t rss_pages;    /* pages (macOS: bytes, pti_resident_size) */
    int64_t num_threads;
    uint32_t cmdline_off, cmdline_len; /* where each string sits in the caller's buffer */
    uint32_t exe_off, exe_len;
    uint32_t cwd_off, cwd_len;
    char name[PT_NAME_MAX]; /* NUL-terminated, truncated to fit */
};

_Static_assert(sizeof(struct pt_facts) == 176, "pt_facts layout is part of the binding");

/* Returns 0 with *out filled (out->status 0) for pid and the facts in want, its strings written to buf[0..cap);
 * -ESRCH if pid is gone, is not a process, or (start_time not NULL) started at another time than *start_time;
 * -ENOBUFS if its strings do not fit cap; -EINVAL for a want outside PT_FACT_ALL; or -errno. A zombie or a kernel
 * thread has an empty argv and exe (the kernel gives none); a refused file leaves its bit in out->denied. */
int pt_facts(int32_t pid, const uint64_t *start_time, uint32_t want, struct pt_facts *out, char *buf, size_t cap);

/* Returns 0 after pt_facts for each of pids[0..n) (starts[i] its start time, or no check if starts is NULL):
 * out[i].status gets its return, the strings are packed into buf[0..cap) one row after another (a row that does
 * not fit gets -ENOBUFS and the rows after it go on); -EINVAL for bad arguments, before anything is read. */
int pt_facts_scan(const int32_t *pids, const uint64_t *starts, int n, uint32_t want, struct pt_facts *out, char *buf,
                  size_t cap);

/* Returns the number of rows written to out: pt_facts of every process in /proc, in one pass (a process that
 * exits during it is left out; one refused or whose strings do not fit buf[0..bufcap) keeps its row with its
 * status), -ENOBUFS if more than cap processes exist, -EINVAL for a bad want, or -errno. */
int pt_facts_table(uint32_t want, struct pt_facts *out, int cap, char *buf, size_t bufcap);

/* Pure parsers of the facts' files (csrc/core/facts_parse.c), the same on every platform. */

/* Returns 0 with the stat fields of *out (pid, name, state, ppid, tty_nr, kthread, utime, stime, num_threads,
 * start_time, vsize, rss_pages) filled from one /proc/<pid>/stat line buf[0..len), or -EIO if it is not one. */
int pt_parse_stat_facts(const char *buf, size_t len, struct pt_facts *out);

/* Returns 0 with *tgid and uids[0..3) (real, effective, saved) from a /proc/<pid>/status text buf[0..len),
 * -ENODATA if its Tgid or Uid line is missing, or -EIO if one is malformed. */
int pt_parse_status_ids(const char *buf, size_t len, int32_t *tgid, uint32_t *uids);

#endif
