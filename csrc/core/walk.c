/* A verified breadth-first walk of one subtree, over the platform's
 * pt_children_of(), pt_proc() and pt_proc_listed(): the same on every platform.
 *
 * Why it is in C: a walk reads one children list and one record per process;
 * doing that from Python costs more than the reads themselves on small trees.
 * The rule: a list is accepted only if
 * every pid on it is still there with the same parent when read back (a
 * kernel list can skip an entry when one it returned leaves mid-read), read
 * again up to WALK_ATTEMPTS times, else -EAGAIN and the caller scans.
 *
 * pt_descendants_of reads each child's own list together with its record
 * (pt_proc_listed: on Linux that spares a read of stat per process) and
 * queues the list until the child's turn comes, in int32 slots at the end of
 * the caller's buffer, so the walk allocates nothing.
 */
#include "platform.h"

#include <errno.h>
#include <string.h>

#define WALK_ATTEMPTS 3

/* the most pids one queued list may hold; a longer one gives -ENOBUFS and the caller grows its buffer */
#define LIST_MAX (1 << 24)

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

/*
 * The queue of lists: int32 slots counted back from the end of the caller's
 * buffer (slot i is end[-1 - i]), one entry per row in row order, each a
 * count k with k pids below it (in slots i + 1 .. i + k, lowest address
 * first), UNLISTED (the row's list is read at its turn), or a skip over the k
 * slots that held a list read at a row's turn. Rows grow up, slots grow down.
 */
#define UNLISTED (-1)
#define SKIP(k)  (-2 - (k))

struct list_queue {
    int32_t *end; /* one past the caller's buffer */
    long used;    /* slots written */
    long next;    /* the slot of the next entry to read */
};

/* Returns the address of slot i. */
static int32_t *slot(const struct list_queue *q, long i)
{
    return q->end - 1 - i;
}

/* Returns the int32 slots free between rows [0, n) and the queue. */
static long free_slots(int n, int cap, const struct list_queue *q)
{
    return ((long)cap - n) * ROW_INTS - q->used;
}

/* Returns 1 with kid's row at out[*n] and its list queued, 0 if kid left parent since the list was read
 * (read the list again), -ENOBUFS, or -errno. */
static int add_child(int32_t kid, int32_t parent, struct pt_proc *out, int *n, int cap, struct list_queue *q)
{
    long room = free_slots(*n + 1, cap, q) - 1; /* past the new row and its entry's count */
    if (room < 0)
        return -ENOBUFS;
    /* The list is read just past the new row, then moved into the queue: with
     * at most room / 2 pids the two places cannot overlap. */
    int32_t *scratch = (int32_t *)(void *)(out + *n + 1);
    long most = room / 2 < LIST_MAX ? room / 2 : LIST_MAX;
    int k = pt_proc_listed(kid, &out[*n], scratch, (int)most);
    if (k == -ESRCH)
        return 0; /* reaped since the list was read: it may have hidden a sibling */
    if (k < 0 && k != -EAGAIN)
        return k;
    if (out[*n].ppid != parent)
        return 0; /* reparented since the list was read: likewise */
    if (k == -EAGAIN) {
        *slot(q, q->used++) = UNLISTED;
    } else {
        *slot(q, q->used) = k;
        memmove(slot(q, q->used + k), scratch, (size_t)k * sizeof *scratch);
        q->used += 1 + k;
    }
    (*n)++;
    return 1;
}

/* Returns the number of rows added at out[*n..), one for each pid of kids[0..k); -EAGAIN if one left parent (read
 * the list again: the rows are dropped and q->used is set back to undo_used), or -errno. */
static int add_children(const int32_t *kids, int k, int32_t parent, struct pt_proc *out, int *n, int cap,
                        struct list_queue *q, long undo_used)
{
    int start = *n;
    for (int i = 0; i < k; i++) {
        int rc = add_child(kids[i], parent, out, n, cap, q);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            *n = start;
            q->used = undo_used;
            return -EAGAIN;
        }
    }
    return *n - start;
}

/* Returns the number of rows appended at out[*n..) for the verified children of parent, its list read now with
 * pt_children_of in up to attempts tries; -EAGAIN if none survived, -ESRCH if parent is gone, -ENOBUFS, or -errno. */
static int expand_now(const struct pt_proc *parent, struct pt_proc *out, int *n, int cap, struct list_queue *q,
                      int attempts)
{
    for (int attempt = 0; attempt < attempts; attempt++) {
        long room = free_slots(*n, cap, q) - 1; /* past the skip entry */
        if (room <= 0)
            return -ENOBUFS;
        int32_t *read_at = slot(q, q->used + room);
        int k = pt_children_of(parent, read_at, room < INT32_MAX ? (int)room : INT32_MAX);
        if (k == -EAGAIN)
            continue;
        if (k < 0)
            return k;
        /* Keep the list in the queue, right below the entries written so far, behind a skip entry. */
        long used_before = q->used;
        int32_t *kids = slot(q, used_before + k);
        memmove(kids, read_at, (size_t)k * sizeof *kids);
        *slot(q, used_before) = SKIP(k);
        q->used += 1 + k;
        int rc = add_children(kids, k, parent->pid, out, n, cap, q, used_before);
        if (rc != -EAGAIN)
            return rc;
    }
    return -EAGAIN;
}

/* Returns the number of rows appended at out[*n..) for the verified children of parent, whose entry is the next
 * in the queue; errors as expand_now(). */
static int expand_queued(const struct pt_proc *parent, struct pt_proc *out, int *n, int cap, struct list_queue *q)
{
    int32_t k;
    while ((k = *slot(q, q->next)) <= SKIP(0))
        q->next += 1 + (SKIP(0) - k);
    q->next++;
    if (k == UNLISTED)
        return expand_now(parent, out, n, cap, q, WALK_ATTEMPTS);
    const int32_t *kids = slot(q, q->next - 1 + k);
    q->next += k;
    int rc = add_children(kids, k, parent->pid, out, n, cap, q, q->used);
    if (rc != -EAGAIN)
        return rc;
    return expand_now(parent, out, n, cap, q, WALK_ATTEMPTS - 1); /* the queued list was the first attempt */
}

int pt_descendants_of(const struct pt_proc *root, struct pt_proc *out, int cap)
{
    struct list_queue q = {(int32_t *)(void *)(out + cap), 0, 0};
    int n = 0;
    int rc = expand_now(root, out, &n, cap, &q, WALK_ATTEMPTS);
    if (rc < 0)
        return rc;
    for (int head = 0; head < n; head++) {
        struct pt_proc parent = out[head]; /* a copy: plain about rows not moving */
        rc = expand_queued(&parent, out, &n, cap, &q);
        if (rc == -ESRCH)
            continue; /* exited during the walk: its children left the subtree */
        if (rc < 0)
            return rc;
    }
    return n;
}
