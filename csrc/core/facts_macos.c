/* Process facts on macOS: which processes are read (one pid, given pids, or the table from one
 * sysctl(KERN_PROC_ALL)); each row is facts_macos_row.c's. The contract is proctree.h's, in macOS units: start
 * time in microseconds since the epoch (pt_proc's), CPU times in nanoseconds, memory in bytes.
 *
 * Why this shape:
 * - The table is the kinfo_proc list pt_snapshot reads (macos_table.c): every process, other users' and
 *   zombies included, in ascending pid order, with each traced process's parent resolved from the list. A row
 *   then costs one PROC_PIDTASKALLINFO (own processes, or all as root) and nothing for another user's, whose
 *   fields come from its record; the strings add a call each. Asking KERN_PROC_PID per pid instead would walk
 *   the kernel's whole process list per row.
 * - A process that exits during the pass is left out of the table; one refused keeps its row with its marks.
 *   pid 0 (kernel_task) is left out, as pt_snapshot leaves it out: it is no process to read facts of.
 * - macOS has no kernel threads in the process table: `kthread` is always 0.
 */
#define _DARWIN_C_SOURCE /* struct kinfo_proc, struct extern_proc */
#include "facts_macos.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysctl.h>

/* Returns 0 for a wanted mask the reader knows, else -EINVAL. */
static int check_want(uint32_t want)
{
    return (want & ~(uint32_t)PT_FACT_ALL) ? -EINVAL : 0;
}

int pt_facts(int32_t pid, const uint64_t *start_time, uint32_t want, struct pt_facts *out, char *buf, size_t cap)
{
    struct arena a = arena_of(buf, cap);
    struct timebase tb;
    if (check_want(want) != 0 || !out)
        return -EINVAL;
    int rc = read_timebase(&tb);
    if (rc != 0)
        return rc;
    return facts_row(pid, NULL, start_time, want, &tb, out, &a);
}

int pt_facts_scan(const int32_t *pids, const uint64_t *starts, int n, uint32_t want, struct pt_facts *out, char *buf,
                  size_t cap)
{
    struct arena a = arena_of(buf, cap);
    struct timebase tb;
    if (n < 0 || (n > 0 && (!pids || !out)) || check_want(want) != 0)
        return -EINVAL;
    int rc = read_timebase(&tb);
    if (rc != 0)
        return rc;
    for (int i = 0; i < n; i++)
        (void)facts_row(pids[i], NULL, starts ? &starts[i] : NULL, want, &tb, &out[i], &a);
    return 0;
}

int pt_facts_table(uint32_t want, struct pt_facts *out, int cap, char *buf, size_t bufcap)
{
    struct kinfo_proc *table;
    struct timebase tb;
    size_t n;
    if (check_want(want) != 0 || cap < 0 || (cap > 0 && !out))
        return -EINVAL;
    if (cap == 0)
        return -ENOBUFS; /* there is always at least one process: us */
    int rc = read_timebase(&tb);
    if (rc != 0)
        return rc;
    rc = sorted_kinfo_table(cap, &table, &n);
    if (rc != 0)
        return rc;
    struct arena a = arena_of(buf, bufcap);
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        const struct kinfo_proc *kp = &table[i];
        int32_t pid = kp->kp_proc.p_pid;
        if (pid <= 0 || (i > 0 && pid == table[i - 1].kp_proc.p_pid))
            continue; /* kernel_task; and each pid once (xnu lists each once) */
        struct listed_row row = {kp, 0};
        table_parent(table, n, kp, &row.ppid);
        if (facts_row(pid, &row, NULL, want, &tb, &out[count], &a) == -ESRCH)
            continue; /* exited while we read: not part of the table */
        count++;
    }
    free(table);
    return count;
}
