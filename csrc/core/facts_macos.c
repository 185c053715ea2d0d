/* Process facts on macOS: not written yet (proc_pidinfo's PROC_PIDTASKINFO and PROC_PIDTBSDINFO, and
 * KERN_PROCARGS2, are the plan; see docs/facts.md). Until then every read says so, and the pure parsers
 * (facts_parse.c) still build and run here.
 */
#include "proctree.h"

#include <errno.h>

/* Returns -ENOSYS: not implemented on this platform yet. */
int pt_facts(int32_t pid, const uint64_t *start_time, uint32_t want, struct pt_facts *out, char *buf, size_t cap)
{
    (void)pid, (void)start_time, (void)want, (void)out, (void)buf, (void)cap;
    return -ENOSYS;
}

/* Returns -ENOSYS: not implemented on this platform yet. */
int pt_facts_scan(const int32_t *pids, const uint64_t *starts, int n, uint32_t want, struct pt_facts *out, char *buf,
                  size_t cap)
{
    (void)pids, (void)starts, (void)n, (void)want, (void)out, (void)buf, (void)cap;
    return -ENOSYS;
}

/* Returns -ENOSYS: not implemented on this platform yet. */
int pt_facts_table(uint32_t want, struct pt_facts *out, int cap, char *buf, size_t bufcap)
{
    (void)want, (void)out, (void)cap, (void)buf, (void)bufcap;
    return -ENOSYS;
}
