/* A verified breadth-first walk of one subtree, over the platform's
 * pt_children_of() and pt_proc(): the same on every platform.
 *
 * Why it is in C: a walk reads one children list and one record per process;
 * doing that from Python costs more than the reads themselves on small trees.
 * The rule: a list is accepted only if
 * every pid on it is still there with the same parent when read back (a
 * kernel list can skip an entry when one it returned leaves mid-read), read
 * again up to WALK_ATTEMPTS times, else -EAGAIN and the caller scans.
 */
#include "proctree.h"

#include <errno.h>
#include <string.h>

#define WALK_ATTEMPTS 3

/* pid slots one row's bytes can hold */
#define ROW_INTS ((int)(sizeof(struct pt_proc) / sizeof(int32_t)))

/* Returns how many child pids may be parked at the end of out[0..cap) while rows are added from n, 0 if none. */
static int tail_slots(int n, int cap)
{
    /* The child pids of the node being expanded are parked at the very end of
     * the caller's buffer, past every row this node can add: k pids plus the
     * k rows made from them need k + ceil(k / ROW_INTS) rows, which keeps
     * every row written clear of every pid not yet read. */
    int free_rows = cap - n;
    if (free_rows < 2)
        return 0;
    int k = (int)((long)free_rows * ROW_INTS / (ROW_INTS + 1));
    while (k > 0 && k + (k + ROW_INTS - 1) / ROW_INTS > free_rows)
        k--;
    return k;
}

/* Returns the number of rows appended at out[*n..) for the verified children of parent,
 * -EAGAIN if no list survived verification, -ESRCH if parent is gone, -ENOBUFS, or -errno. */
static int expand(const struct pt_proc *parent, struct pt_proc *out, int *n, int cap)
{
    for (int attempt = 0; attempt < WALK_ATTEMPTS; attempt++) {
        int room = tail_slots(*n, cap);
        if (room == 0)
            return -ENOBUFS;
        int32_t *kids = (int32_t *)(void *)(out + cap) - room;
        int k = pt_children_of(parent, kids, room);
        if (k == -EAGAIN)
            continue;
        if (k < 0)
            return k;
        int start = *n, ok = 1;
        for (int i = 0; i < k; i++) {
            int32_t kid = kids[i]; /* read before its slot can be overwritten (it cannot: see tail_slots) */
            int rc = pt_proc(kid, &out[*n]);
            if (rc == -ESRCH || (rc == 0 && out[*n].ppid != parent->pid)) {
                ok = 0; /* reaped or reparented since the list was read: it may have hidden a sibling */
                break;
            }
            if (rc != 0)
                return rc;
            (*n)++;
        }
        if (ok)
            return *n - start;
        *n = start;
    }
    return -EAGAIN;
}

int pt_verified_children_of(const struct pt_proc *parent, struct pt_proc *out, int cap)
{
    int n = 0;
    return expand(parent, out, &n, cap);
}

int pt_descendants_of(const struct pt_proc *root, struct pt_proc *out, int cap)
{
    int n = 0;
    int rc = expand(root, out, &n, cap);
    if (rc < 0)
        return rc;
    for (int head = 0; head < n; head++) {
        struct pt_proc parent = out[head]; /* a copy: expand may not move rows, but be plain about it */
        rc = expand(&parent, out, &n, cap);
        if (rc == -ESRCH)
            continue; /* exited during the walk: its children left the subtree */
        if (rc < 0)
            return rc;
    }
    return n;
}
