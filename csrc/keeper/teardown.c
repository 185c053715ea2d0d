/* Teardown: ending the tree, its cgroup and its receipt, and the keeper's exit status.
 */
#include "keeper.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int g_nkilled;

/* Returns nothing: counts the members of this scan that reach the SIGKILL rounds, each once per teardown. */
static void count_killed(void)
{
    for (int i = 0; i < g_ncur; i++) {
        bool isnew = false;
        struct ident *e = ident_get(g_cur[i].pid, g_cur[i].start_time, &isnew);
        if (e && !(e->sent & SENT_KILL)) {
            e->sent |= SENT_KILL;
            g_nkilled++;
        }
    }
}

/* Returns true if sig reached a member of this scan that had not had it yet in this teardown (flag records it).
 * The stop signal (SENT_TERM) is sent at most once per member: never to one a forwarded stop-type signal reached, and
 * none at all while the owner holds the tree (it sent its own). Only a stop signal that was sent is followed by
 * SIGCONT, so that a stopped member can act on it: a CONT alone would reach a member first. A send that failed (its
 * identity could not be read) is not recorded, so the next scan tries it again. */
static bool signal_new(int sig, uint8_t flag)
{
    bool any = false;
    for (int i = 0; i < g_ncur; i++) {
        pid_t pid = g_cur[i].pid;
        uint64_t start = g_cur[i].start_time;
        bool isnew = false;
        struct ident *e = ident_get(pid, start, &isnew);
        if (e && (e->sent & flag))
            continue;
        if (flag == SENT_TERM && (K.held || stopped_has(pid, start, false))) {
            if (e)
                e->sent |= flag;
            continue;
        }
        int rc = send_sig(pid, start, sig);
        if (e && rc >= 0)
            e->sent |= flag;
        if (rc > 0)
            any = true;
        if (flag == SENT_TERM && rc > 0)
            send_sig(pid, start, SIGCONT);
    }
    return any;
}

/* Returns true if nothing of the tree survived and no scan was cut short: the stop signal + CONT to every member
 * (once: see signal_new), the grace (re-scanning: late joiners get it too), then stop-the-world (SIGSTOP until a scan finds nothing new) and SIGKILL,
 * until a full scan finds nothing. */
bool teardown(void)
{
    g_tgen++;
    g_nset = 0;
    g_nkilled = 0;
    g_incomplete = false;
    double deadline = now_s() + K.grace;
    scan(false);
    if (K.sweeping && g_ncur > 0)
        say(STATUS_SWEEP); /* before our first signal: the owner must not send these members another */
    signal_new(K.stop_sig, SENT_TERM);
    int pause = 2;
    while (g_ncur > 0) {
        double left = deadline - now_s();
        if (left <= 0)
            break;
        int ms = (int)(left * 1000) + 1;
        wait_events(ms < pause ? ms : pause);
        pause = pause * 2 > 20 ? 20 : pause * 2;
        reap();
        scan(false);
        signal_new(K.stop_sig, SENT_TERM); /* late joiners */
    }
    /* Stop the world: nothing left can fork or move while we collect it; rescan until nothing new is stopped. */
    for (int round = 0; g_ncur > 0 && round < 50; round++) {
        if (!signal_new(SIGSTOP, SENT_STOP))
            break;
        scan(false);
    }
    for (int round = 0; g_ncur > 0 && round < 100; round++) { /* bounded: ~1 s of SIGKILL rounds at most */
        count_killed();
        cgroup_kill();
        for (int i = 0; i < g_ncur; i++)
            send_sig(g_cur[i].pid, g_cur[i].start_time, SIGKILL);
        wait_events(5);
        reap();
        scan(false);
    }
    return g_ncur == 0 && !g_incomplete;
}

/* ------------------------------------------------------------------------- */
/* The keeper process */

/* Returns nothing: removes the tree's receipt when it ended cleanly (the owner may have removed it already). */
void end_receipt(bool clean)
{
    if (!clean || !K.receipts || !K.self_start)
        return;
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/%d-%llu.json", K.receipts, (int)K.self, (unsigned long long)K.self_start) <
        (int)sizeof p)
        unlink(p);
}

/* Returns nothing: removes the tree's cgroup (cgroup mode). */
void cleanup_cgroup(void)
{
    cg_remove();
}

/* Returns true if nothing of the tree survived: the teardown, then the reaping and the cgroup's removal. */
bool end_tree(void)
{
    bool clean = teardown();
    reap();
    cleanup_cgroup();
    return clean;
}

/* Returns the exit code for the command's status; a fatal signal is re-raised on ourselves first, as a shell does. */
int exit_code(void)
{
    int status = K.cmd_done ? K.cmd_status : 0;
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        struct rlimit rl = {0, 0};
        setrlimit(RLIMIT_CORE, &rl);
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        kill(getpid(), sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        return 128 + sig;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
