/* What each platform's core files (linux_*.c, macos_*.c) define for the files every platform shares (args.c),
 * beyond the contract in proctree.h. Not read by cffi: nothing here is part of the module.
 */
#ifndef PROCTREE_CORE_PLATFORM_H
#define PROCTREE_CORE_PLATFORM_H

#include "proctree.h"

/* Returns what pt_env_find returns, for arguments pt_env_find has already checked (a valid key, val's room, a
 * scratch): Linux streams /proc/<pid>/environ through scratch, macOS reads the whole KERN_PROCARGS2 area into it. */
int pt_env_find_checked(int32_t pid, const char *key, size_t keylen, char *val, size_t valcap, char *scratch,
                        size_t scratchcap);

/* Returns the number of pid's children written to kids with *out filled for pid, both read so that the list needs
 * no read back (linux_table.c says when that holds); -EAGAIN with *out filled as pt_proc fills it when it does not hold
 * (read the list at the row's turn with pt_children_of); -ENOBUFS if more than cap children; -ESRCH; or -errno. */
int pt_proc_listed(int32_t pid, struct pt_proc *out, int32_t *kids, int cap);

/* Returns 0 after recording the result rc of reading a facts row's string `bit` (0 read, 1 refused) in out->have
 * or out->denied, or rc itself if the read failed (both platforms' facts readers). */
static inline int pt_facts_record_string(int rc, uint32_t bit, struct pt_facts *out)
{
    if (rc == 1) {
        out->denied |= bit;
        return 0;
    }
    if (rc == 0)
        out->have |= bit;
    return rc;
}

#endif
