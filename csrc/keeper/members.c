/* Membership: who is in the tree now (walks, snapshots, the cgroup, the session, the marker).
 */
#include "keeper.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The identity set of the current teardown (teardown.c starts a new one by bumping g_tgen). */
struct ident g_set[SET_SLOTS];
uint32_t g_tgen, g_sgen;
int g_nset;
bool g_incomplete; /* a scan was cut short: never call the tree clean */

struct pt_proc g_snap[MAX_PROCS]; /* snapshots and walks */
struct pt_proc g_cur[MAX_PROCS];  /* the live members of the last scan */
int g_ncur;
static int32_t g_order[MAX_PROCS]; /* snapshot rows by ppid */
static int32_t g_queue[MAX_PROCS];
static double g_marks_at = -1;

/* The processes a forwarded stop-type signal reached (members of the command's group when it was sent), for the
 * life of the keeper: our own teardown sends them no other stop signal. */
struct stopped_ident {
    int32_t pid;
    uint64_t start;
};
struct stopped_ident g_stopped[SET_SLOTS];
static int g_nstopped;

/* Returns true if (pid, start) is in g_stopped; with add, inserts it (false then: it was not there, or no room). */
bool stopped_has(int32_t pid, uint64_t start, bool add)
{
    uint32_t h = ((uint32_t)pid * 2654435761u) & (SET_SLOTS - 1);
    for (int i = 0; i < SET_SLOTS; i++, h = (h + 1) & (SET_SLOTS - 1)) {
        struct stopped_ident *e = &g_stopped[h];
        if (e->pid == 0) {
            if (add && g_nstopped < MAX_PROCS) {
                *e = (struct stopped_ident){.pid = pid, .start = start};
                g_nstopped++;
            }
            return false;
        }
        if (e->pid == pid && e->start == start)
            return true;
    }
    return false;
}

/* Returns the identity set's entry for (pid, start), inserting it (isnew = true), or NULL when the set is full. */
struct ident *ident_get(int32_t pid, uint64_t start, bool *isnew)
{
    uint32_t h = ((uint32_t)pid * 2654435761u) & (SET_SLOTS - 1);
    for (int i = 0; i < SET_SLOTS; i++, h = (h + 1) & (SET_SLOTS - 1)) {
        struct ident *e = &g_set[h];
        if (e->tgen != g_tgen) {
            if (g_nset >= MAX_PROCS)
                return NULL;
            *e = (struct ident){.pid = pid, .tgen = g_tgen, .sgen = 0, .sent = 0, .start = start};
            g_nset++;
            *isnew = true;
            return e;
        }
        if (e->pid == pid && e->start == start) {
            *isnew = false;
            return e;
        }
    }
    return NULL;
}

/* Returns nothing: adds a live, unprotected row to this scan's members once. */
void add_member(const struct pt_proc *row)
{
    if (row->state == 'Z' || row->state == 'X' || protected_pid(row->pid))
        return;
    if (g_ncur >= MAX_PROCS) {
        g_incomplete = true;
        return;
    }
    bool isnew = false;
    struct ident *e = ident_get(row->pid, row->start_time, &isnew);
    if (!e) {
        g_incomplete = true; /* still a member: signalled, just not remembered */
    } else {
        if (e->sgen == g_sgen)
            return;
        e->sgen = g_sgen;
    }
    g_cur[g_ncur++] = *row;
}

/* Returns the qsort order of two snapshot rows by ppid. */
static int by_ppid(const void *a, const void *b)
{
    int32_t pa = g_snap[*(const int32_t *)a].ppid, pb = g_snap[*(const int32_t *)b].ppid;
    return (pa > pb) - (pa < pb);
}

/* Returns nothing: adds every process below K.self in the snapshot g_snap[0..n) (ppid links, breadth-first). */
static void add_descendants_of_snapshot(int n)
{
    for (int i = 0; i < n; i++)
        g_order[i] = i;
    qsort(g_order, (size_t)n, sizeof g_order[0], by_ppid);
    int head = 0, tail = 0;
    g_queue[tail++] = K.self;
    while (head < tail) {
        int32_t parent = g_queue[head++];
        int lo = 0, hi = n; /* first row with ppid >= parent */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (g_snap[g_order[mid]].ppid < parent)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (int i = lo; i < n && g_snap[g_order[i]].ppid == parent; i++) {
            const struct pt_proc *row = &g_snap[g_order[i]];
            if (row->pid == K.self || row->pid == parent)
                continue;
            if (tail >= MAX_PROCS) {
                g_incomplete = true;
                return;
            }
            g_queue[tail++] = row->pid;
            add_member(row);
        }
    }
}

/* Linux: the parent of every kernel thread, whose environment is always empty: its children are not read twice. */
#define KTHREADD 2

/* Returns true if row started after the keeper (the same clock tick: a higher pid, as pids are handed out in order). */
static bool started_after_us(const struct pt_proc *row)
{
    return row->start_time > K.self_start || (row->start_time == K.self_start && row->pid > K.self);
}

/* Returns true if v[0..len) is a PROCTREE_TREE value (1 to TREE_CHAIN ids of 32 lowercase hex digits joined by ':')
 * that names id (marker.carries_tree). */
bool chain_names(const char *v, size_t len, const char *id)
{
    bool named = false;
    for (size_t at = 0, n = 1; n <= TREE_CHAIN; at += TREE_ID_LEN + 1, n++) {
        if (len < at + TREE_ID_LEN)
            return false;
        for (size_t i = at; i < at + TREE_ID_LEN; i++) {
            if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f')))
                return false;
        }
        named = named || memcmp(v + at, id, TREE_ID_LEN) == 0;
        if (len == at + TREE_ID_LEN)
            return named;
        if (v[at + TREE_ID_LEN] != ':')
            return false;
    }
    return false;
}

/* Returns 1 if pid's environment carries a PROCTREE_TREE naming our tree, its own or an enclosing one's chain, 0 if
 * it does not or cannot be read, -ENODATA if it reads as having none (which a process in the middle of an exec does
 * for a moment: its new image's environment is not laid out yet). */
static int carries_marker(pid_t pid)
{
    char val[TREE_CHAIN * (TREE_ID_LEN + 1) + 1];
    int rc = pt_env_find(pid, TREE_KEY, sizeof TREE_KEY - 1, val, sizeof val, env_scratch, ENV_SCRATCH_SIZE);
    if (rc == -ENODATA)
        return -ENODATA;
    return rc > 0 && chain_names(val, (size_t)rc, K.tree_id);
}

/* Returns nothing: adds row, read again after its environment so that both reads name one process. */
static void add_confirmed(const struct pt_proc *row)
{
    struct pt_proc again;
    if (pt_proc(row->pid, &again) == 0 && again.start_time == row->start_time)
        add_member(&again);
}

/* Returns nothing: adds the rows of g_snap[0..n) that carry the tree's marker and started after us. A row that read
 * as having no environment at all (kernel threads aside) is read again, up to RECHECKS times, 1 ms apart and then
 * up to 8 ms (about 47 ms at most, only for such rows): a marked process caught in an exec (or in a loop of them), which
 * a loaded machine makes slow, would otherwise be missed, and a teardown's last scan would call the tree empty while
 * it runs. */
static void add_marked(int n)
{
    enum { UNSURE_MAX = 64, RECHECKS = 8 };
    int unsure[UNSURE_MAX], nunsure = 0;
    for (int i = 0; i < n; i++) {
        const struct pt_proc *row = &g_snap[i];
        if (!started_after_us(row) || row->state == 'Z' || protected_pid(row->pid))
            continue;
        int rc = carries_marker(row->pid);
        if (rc == -ENODATA && row->ppid != KTHREADD && nunsure < UNSURE_MAX)
            unsure[nunsure++] = i;
        if (rc == 1)
            add_confirmed(row);
    }
    long pause_ns = 1000000;
    for (int round = 0; round < RECHECKS && nunsure > 0; round++) {
        const struct timespec pause = {0, pause_ns};
        nanosleep(&pause, NULL);
        pause_ns = pause_ns * 2 > 8000000 ? 8000000 : pause_ns * 2;
        int left = 0;
        for (int k = 0; k < nunsure; k++) {
            int rc = carries_marker(g_snap[unsure[k]].pid);
            if (rc == 1)
                add_confirmed(&g_snap[unsure[k]]);
            else if (rc == -ENODATA)
                unsure[left++] = unsure[k];
        }
        nunsure = left;
    }
}

/* Returns nothing: fills g_cur with the tree's live members (descendants, cgroup, session, marker), confirming an
 * empty answer with a full scan of the table. */
void scan(bool full)
{
    g_sgen++;
    g_ncur = 0;
    if (K.cgroup && cg_scan())
        return;
    bool walked = false;
    if (!full && K.mode != M_SESSION) {
        struct pt_proc me;
        if (pt_proc(K.self, &me) == 0) {
            int n = pt_descendants_of(&me, g_snap, MAX_PROCS);
            if (n >= 0) {
                for (int i = 0; i < n; i++)
                    add_member(&g_snap[i]);
                walked = true;
            }
        }
    }
    /* Session mode only: there a daemon that left the session is ours only by its marker. A subreaper's
     * descendants cannot leave its subtree (orphans reparent to it), so the walk is whole. */
    bool marks = K.mode == M_SESSION && K.tree_id[0] && K.self_start &&
                 (full || g_marks_at < 0 || now_s() - g_marks_at >= 0.1); /* every environment: the costly part */
    if (!walked || K.session || marks) {
        int n = pt_snapshot(g_snap, MAX_PROCS);
        if (n == -ENOBUFS) { /* a fork bomb, perhaps: end the rows that fit now, the rest on the next rounds */
            g_incomplete = true;
            n = MAX_PROCS;
        } else if (n < 0) {
            g_incomplete = true;
            n = 0;
            if (!walked) { /* the table could not be read whole: our descendants at least */
                struct pt_proc me;
                int k = pt_proc(K.self, &me) == 0 ? pt_descendants_of(&me, g_snap, MAX_PROCS) : -ESRCH;
                for (int i = 0; i < k; i++)
                    add_member(&g_snap[i]);
                walked = true;
            }
        }
        if (!walked)
            add_descendants_of_snapshot(n);
        for (int i = 0; K.session && i < n; i++) {
            if (g_snap[i].sid == K.session && g_snap[i].pid != K.session)
                add_member(&g_snap[i]);
        }
        if (marks) {
            g_marks_at = now_s();
            add_marked(n);
        }
    }
    /* "Nothing left" ends a teardown: never on a walk alone, nor on a snapshot that skipped the marker. */
    if (g_ncur == 0 && !full && (walked || (K.mode == M_SESSION && K.tree_id[0] && !marks)))
        scan(true);
}

/* Returns true if a full scan finds nothing of the tree (session mode with keep_orphans asks this; a scan that was
 * cut short counts what it found, so that a table that keeps failing to read cannot hold the keeper forever). */
bool tree_empty(void)
{
    g_tgen++;
    g_nset = 0;
    scan(true);
    return g_ncur == 0;
}
