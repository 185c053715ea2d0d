/* Events: signals, the owner, the command.
 */
#include "keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif

const int FORWARD[NFORWARD] = {FORWARD_SIGNALS};

/* Returns nothing: the owner's hold. Once our own teardown has begun, nothing: its "sweep" line is out already. */
void hold(void)
{
    if (K.sweeping)
        return;
    K.held = true;
    say(STATUS_HELD);
}

/* Returns nothing: queues sig for forward() if it is one we pass on (SIGCONT too in pty mode); takes the owner's
 * hold at once. */
void queue_signal(int sig)
{
    if (sig == HOLD_SIG) { /* the owner's "I end this tree": never forwarded, ignored by default elsewhere */
        hold();
        return;
    }
    bool pass = K.pty && sig == SIGCONT;
    for (int f = 0; f < NFORWARD; f++)
        pass = pass || sig == FORWARD[f];
    if (pass && K.npending < PENDING_MAX)
        K.pending[K.npending++] = sig;
}

/* Returns nothing: records a change of a child of ours: the command's stop or continue (pty mode), or its exit (its
 * status kept, and said). */
static void child_changed(pid_t pid, int status)
{
    if (pid != K.cmd || K.cmd_done)
        return;
    if (WIFSTOPPED(status) || WIFCONTINUED(status)) {
        K.cmd_stopped = WIFSTOPPED(status);
        if (K.cmd_stopped)
            say_stopped(WSTOPSIG(status));
        return;
    }
    K.cmd_done = true;
    K.cmd_status = status;
    say(STATUS_EXIT " %d", status & 0xFFFF);
}

/* Returns true while some child of ours is left to reap; records the command's status (and says exit) when reaped. */
bool reap(void)
{
    /* pty mode: the command's stops too, so that the owner can hand the user's terminal back, as a shell does. */
    int flags = WNOHANG | (K.pty ? WUNTRACED | WCONTINUED : 0);
    /* Session mode: whether the command left anything is proven cheaply before its pid is let go (else its sweep
     * reads the environment of every process started since: milliseconds). */
    if (K.mode == M_SESSION && K.cmd && !K.cmd_done)
        K.cmd_alone = exited_last(K.cmd);
    return reap_each(flags, child_changed);
}

/* Returns true if sig, forwarded to the command's group, asks its members to stop (protocol.STOPPING). */
static bool stopping(int sig)
{
    return sig == K.stop_sig || IS_STOPPING(sig);
}

/* Returns nothing: records the live members of the command's group in g_stopped, before a stop-type signal to it (a
 * process that joins the group between this read and the signal gets it unrecorded: a fork's microseconds). */
static void record_group(void)
{
    int n = pt_snapshot(g_snap, MAX_PROCS);
    if (n == -ENOBUFS)
        n = MAX_PROCS;
    for (int i = 0; i < n; i++) {
        if (g_snap[i].pgid == K.cmd && g_snap[i].state != 'Z' && g_snap[i].state != 'X')
            stopped_has(g_snap[i].pid, g_snap[i].start_time, true);
    }
}

/* Returns nothing: sends queued signals to the command's group (its pid is its group's while unreaped), and SIGCONT
 * after TERM/INT/HUP so that a stopped command cannot wedge its runner. In pty mode a SIGCONT to us continues the
 * command, and first gives the terminal back to its group if it had stopped (as a shell's fg). */
void forward(void)
{
    for (int i = 0; i < K.npending; i++) {
        int sig = K.pending[i];
        if (K.cmd <= 0 || K.cmd_done)
            continue;
        if (stopping(sig))
            record_group();
        if (sig == SIGCONT && K.cmd_stopped && K.tty_fd >= 0)
            tcsetpgrp(K.tty_fd, K.cmd); /* SIGTTOU is blocked: a background caller may */
        if (killpg(K.cmd, sig) != 0)
            kill(K.cmd, sig);
        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
            if (killpg(K.cmd, SIGCONT) != 0)
                kill(K.cmd, SIGCONT);
        }
    }
    K.npending = 0;
}

/* Returns true while our parent is the owner (a child is reparented only once its parent's whole thread group is gone). */
bool owner_alive(void)
{
    return getppid() == K.owner;
}

/* Returns 0 once the keeper's signals are blocked and readable (signalfd or kqueue) and the owner is watched, or
 * -errno. Every signal is blocked: one outside the protocol (SIGUSR1 to a keeper whose command does not take it,
 * SIGPROF, SIGTSTP, an RT signal, ...) is read and dropped, never our end, which would leave the owner's tree
 * unkept. SIGCONT and SIGTTOU count in pty mode only (the owner's "fg"; tcsetpgrp from our background group must
 * not stop us); SIGKILL and SIGSTOP cannot be blocked, and a fault of our own code still ends us (the kernel
 * unblocks what it forces). */
int setup_events(void)
{
#ifdef __linux__
    /* The C library's own two (32 and 33) too, which sigfillset leaves out and sigprocmask will not block: we run no
     * threads, and either would end us. Through the system call, which reads the set's first 8 bytes. */
    memset(&K.blocked, 0xff, sizeof K.blocked);
    sigemptyset(&K.orig_mask);
    if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &K.blocked, &K.orig_mask, 8) != 0)
        return -errno;
#else
    static const int faults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT};
    sigfillset(&K.blocked);
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&K.blocked, faults[i]);
    if (sigprocmask(SIG_BLOCK, &K.blocked, &K.orig_mask) != 0)
        return -errno;
#endif
    if (K.caller_mask_given) { /* we were born with every signal blocked: the command gets the caller's mask */
        sigemptyset(&K.orig_mask);
        for (int s = 1; s <= 64 && s < NSIG; s++) {
            if (K.caller_mask >> (s - 1) & 1)
                sigaddset(&K.orig_mask, s);
        }
    }
    /* An ignored SIGCHLD would reap our children for us, and lose the command's status. */
    struct sigaction sa;
    if (sigaction(SIGCHLD, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
        signal(SIGCHLD, SIG_DFL);
    if (!K.restore_signals) { /* what a Python owner's interpreter ignores, and Popen leaves ignored without restore */
        signal(SIGPIPE, SIG_IGN);
        signal(SIGXFSZ, SIG_IGN);
    }
    int rc = events_open();
    /* Born with every signal blocked, what is pending now was sent to the owner's process group while we were still
     * in it: never meant for the tree, and passed on it would reach the command as it starts. (The init's runner
     * keeps what it has: a signal sent to it from its first instant is CMD's.) */
    if (rc == 0 && K.caller_mask_given)
        events_drop_pending();
    return rc;
}
