/* proctree-init's events: which signals are forwarded and to whom, and reaping every child.
 *
 * These are the keeper.h functions teardown.c calls (queue_signal, reap, forward), with the runner's rules in place of
 * the keeper's (events.c, which proctree-init does not link): no hold signal, every forwardable signal.
 */
#include "init.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Returns true for the signals that are synchronous by number: a fault (SEGV, BUS, ILL, FPE), a trap, a bad system
 * call, abort. */
bool synchronous(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP || sig == SIGSYS ||
           sig == SIGABRT;
}

/* Returns true if sig is passed on to CMD: all but the uncatchable and SIGCHLD (ours). A synchronous one is passed
 * on too, as dumb-init does: one that is read at all was sent by a process (kill, sigqueue, tgkill: the runner reads
 * si_code to be sure), since a real fault of ours is forced through the mask by the kernel and ends us. */
bool forwardable(int sig)
{
    return !(sig == SIGKILL || sig == SIGSTOP || sig == SIGCHLD);
}

/* Returns nothing: with -w (or -vvv) a line on stderr for an orphan reaped, in tini's words. */
void note_reaped(pid_t pid)
{
    if (R.warn_reap || R.verbosity >= 3)
        fprintf(stderr, "%s: reaped zombie process with pid=%d\n", R.prog, (int)pid);
}

/* Returns nothing: queues sig for forward() if it is forwardable. */
void queue_signal(int sig)
{
    if (forwardable(sig) && K.npending < PENDING_MAX)
        K.pending[K.npending++] = sig;
}

/* Returns nothing: records CMD's status when it is reaped; any other child is an orphan (said with -w). */
static void child_reaped(pid_t pid, int status)
{
    if (pid == K.cmd && !K.cmd_done) {
        K.cmd_done = true;
        K.cmd_status = status;
    } else {
        note_reaped(pid);
    }
}

/* Returns true while some child of ours is left to reap; records CMD's status when reaped. Every child is reaped:
 * as a subreaper every orphan of the tree comes to us. */
bool reap(void)
{
    return reap_each(WNOHANG, child_reaped);
}

/* Returns whether a member of CMD's group is stopped (or the table could not be read: then assume one is); records
 * the live members in g_stopped before a stop-type signal to the group, so that our teardown sends them no second
 * stop signal (a process joining the group in between: a fork's microseconds). */
static bool record_group(void)
{
    int n = pt_snapshot(g_snap, MAX_PROCS);
    if (n == -ENOBUFS)
        n = MAX_PROCS;
    if (n < 0)
        return true;
    bool stopped = false;
    for (int i = 0; i < n; i++) {
        if (g_snap[i].pgid == K.cmd && g_snap[i].state != 'Z' && g_snap[i].state != 'X') {
            stopped_has(g_snap[i].pid, g_snap[i].start_time, true);
            stopped = stopped || g_snap[i].state == 'T' || g_snap[i].state == 't';
        }
    }
    return stopped;
}

/* Returns nothing: sends sig to CMD's group (its pid is its group's while unreaped), else to CMD alone. */
static void to_group(int sig)
{
    if (killpg(K.cmd, sig) != 0)
        kill(K.cmd, sig);
}

/* Returns nothing: sends the queued signals on. The terminal's and the stop-type ones (HUP, INT, QUIT, TERM, USR1,
 * USR2, WINCH: protocol.FORWARD) and CONT go to CMD's group, as `proctree run` always did and dumb-init does; TSTP,
 * TTIN and TTOU stop it with SIGSTOP, as dumb-init's rewrite does; TERM, INT and HUP are followed by SIGCONT when a
 * member is stopped (so that it still ends); every other one goes to CMD alone, or to its group with -g. */
void forward(void)
{
    static const int GROUP[NFORWARD] = {FORWARD_SIGNALS};
    for (int i = 0; i < K.npending; i++) {
        int sig = K.pending[i];
        if (K.cmd <= 0 || K.cmd_done)
            continue;
        if (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
            /* No terminal here: a handler of CMD's (or an orphaned group, where the kernel drops these) would leave
             * it running while the runner stops; as dumb-init rewrites them, CMD's group is stopped for real. */
            to_group(SIGSTOP);
            continue;
        }
        bool group = R.group || sig == SIGCONT;
        for (int f = 0; f < NFORWARD; f++)
            group = group || sig == GROUP[f];
        bool stopped = (sig == K.stop_sig || IS_STOPPING(sig)) && record_group();
        if (group)
            to_group(sig);
        else
            kill(K.cmd, sig);
        if (IS_STOPPING(sig) && stopped)
            to_group(SIGCONT); /* so that a stopped member acts on it; one running would see a stray CONT */
    }
    K.npending = 0;
}

/* Returns 0 once every signal is readable from a signalfd (all are blocked since main's first line), the runner's
 * death wakes us (its pidfd) and, in cgroup mode, so does the cgroup's emptying; or -errno. */
int open_runner_events(void)
{
    every_signal(&K.blocked);
    return events_open();
}

/* Returns nothing: *set holds every signal, the C library's own two (32 and 33) too, which sigfillset leaves out:
 * signalfd passes the set to the kernel as it is, so that one forwarded to us is read, not left pending. */
void every_signal(sigset_t *set)
{
    memset(set, 0xff, sizeof *set);
}

/* Returns true while our parent is the runner (a child is reparented only once its parent's whole thread group is
 * gone). */
bool owner_alive(void)
{
    return getppid() == K.owner;
}
