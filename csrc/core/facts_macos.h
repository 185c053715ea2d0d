/* What the macOS facts files share: facts_macos_row.c reads one process's row, facts_macos.c (pt_facts,
 * pt_facts_scan, pt_facts_table) chooses the processes. Not read by cffi: nothing here is part of the module.
 * Each file defines _DARWIN_C_SOURCE (struct kinfo_proc) before it includes this one.
 */
#ifndef PROCTREE_CORE_FACTS_MACOS_H
#define PROCTREE_CORE_FACTS_MACOS_H

#include "macos.h"

#include <stddef.h>
#include <stdint.h>

/* Where a row's strings go: buf[used..cap), advanced as each is written. */
struct arena {
    char *buf;
    size_t cap, used;
};

/* Mach absolute time units per nanosecond, as mach_timebase_info gives them: 1/1 on Intel, 125/3 on Apple
 * silicon (a 24 MHz tick), read once per call of the API. */
struct timebase {
    uint32_t numer, denom;
};

/* What the table already read for a row: its kinfo_proc record and the parent the table resolved for it. */
struct listed_row {
    const struct kinfo_proc *kp;
    int32_t ppid;
};

/* Returns an arena over buf[0..cap), its size bounded so that every offset fits a row's uint32_t fields. */
struct arena arena_of(char *buf, size_t cap);

/* Returns 0 with *tb filled from mach_timebase_info, or -EIO if the kernel refuses it. */
int read_timebase(struct timebase *tb);

/* Returns the status of pid's row, also written to out->status: 0 or -errno (-ESRCH gone or started at another
 * time than *start, -ENOBUFS its strings did not fit *a). listed is the table's record of pid, or NULL. The
 * row's strings go to *a and are taken back if the row fails. */
int facts_row(int32_t pid, const struct listed_row *listed, const uint64_t *start, uint32_t want,
              const struct timebase *tb, struct pt_facts *out, struct arena *a);

#endif
