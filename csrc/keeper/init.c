/* proctree-init: `proctree run` in native code, an init about as small and fast as tini that contains what it runs.
 *
 * `proctree-init [tini's options: -s -g -w -v... -e CODE -p SIG] [--contain MODE] [--grace S] [--stop-signal SIG] [-q]
 * -- CMD` (init_args.c) runs CMD in the foreground: it forwards every signal that can be forwarded (all but KILL,
 * STOP, CHLD, and the synchronous ones unless another process sent them) to CMD or its group, reaps every child (as PID 1, every orphan of the namespace), and when CMD
 * exits ends what CMD left behind (the stop signal once, SIGKILL after the grace: the keeper's teardown.c), says so
 * in one line on stderr, removes its cgroup and exits with CMD's status (128+N for a signal N, as tini; 127: not
 * found, 126: cannot run it, 2: bad input, 125: its keeper half was killed, CMD's status unknown).
 *
 * Two processes, as `proctree run` with its keeper: this one (the runner, which the caller waits for) and its
 * forked child, the keeper half (init_keep.c), which leads CMD's session and is CMD's parent. Each ends the tree
 * if the other is killed outright: the keeper half watches the runner as a keeper watches its owner, and the
 * runner is a subreaper, so what the keeper half held comes to it. The fork shares the static binary's pages.
 *
 * Built from the keeper's sources (build_keeper.py) but with init*.c in place of keeper.c and events.c: the
 * teardown, membership, identity-checked signalling, cgroup and start code are the keeper's own.
 *
 * Why this shape:
 * - Every signal is blocked at main's first line and read from a signalfd: one sent from the moment the process
 *   exists is queued, then passed to the keeper half, which forwards it once CMD exists; none can kill either.
 * - CMD starts with nothing blocked (what our parent blocked is not passed on) and with the dispositions we were
 *   given (an ignored signal stays ignored, as exec keeps it).
 * - The runner stays in the caller's session and process group (a Ctrl+C reaches it, and a Ctrl+Z stops it as any
 *   job: job-control signals are passed on, then the runner stops itself, as dumb-init without a terminal); CMD's
 *   session is the keeper half's, so CMD has no controlling terminal (`proctree run` gives it a pty instead)...
 * - ...unless the runner leads its session and controls the terminal on stdin, as a container's PID 1 under
 *   `docker run -t` does: then it lets the terminal go and the keeper half takes it for CMD's session, where CMD's
 *   group is the foreground (a shell has job control, Ctrl+C reaches CMD's group from the terminal itself), as
 *   dumb-init does. The hang-up and continue the kernel sends on letting go are the runner's own, never passed on.
 */
#include "init.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

struct keeper K = {.status_fd = -1, .owner_fd = -1, .sig_fd = -1, .tty_fd = -1};

/* Returns nothing: every signal blocked, the two the C library keeps for its threads (32 and 33, which sigfillset
 * leaves out and sigprocmask will not block) too, through the system call itself: we run no threads, and either one
 * would otherwise end us. CMD gets none blocked: K.orig_mask is what start.c restores. */
static void hold_signals(void)
{
    uint64_t all = ~(uint64_t)0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, sizeof all);
    sigemptyset(&K.orig_mask);
}

/* Returns our parent's pid when `proctree run` began (the Python command hands it over in PROCTREE_RUN_PARENT, which
 * CMD must not inherit), else our own parent's now. */
static pid_t parent_at_start(void)
{
    pid_t now = getppid();
    const char *given = getenv("PROCTREE_RUN_PARENT");
    long long v;
    bool valid = given && parse_uint(given, INT32_MAX, &v) == 0 && v > 0;
    unsetenv("PROCTREE_RUN_PARENT");
    return valid ? (pid_t)v : now;
}

/* Returns nothing: with -p SIG, SIG comes to us when our parent dies (tini's -p), to be passed on as any signal; and
 * at once if it died before we asked (we were reparented since main began, when our parent was `parent`). */
static void watch_parent(pid_t parent)
{
    if (R.pdeath == 0)
        return;
    if (prctl(PR_SET_PDEATHSIG, R.pdeath) != 0 || getppid() != parent)
        kill(getpid(), R.pdeath);
}

/* Returns 0 once the tree's mode is chosen (and its cgroup made, here, so that the runner can remove it whatever
 * becomes of the keeper half) and the runner takes orphans, else 126 after a line on stderr. */
static int choose_mode(void)
{
    K.self = getpid();
    K.owner = getppid();
    R.pid1 = K.self == 1;
    const char *nopidfd = getenv("PROCTREE_NO_PIDFD");
    K.use_pidfd = !nopidfd || !*nopidfd || strcmp(nopidfd, "0") == 0;
    /* An ignored SIGCHLD would reap our children for us, and lose their status. */
    struct sigaction sa;
    if (sigaction(SIGCHLD, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
        signal(SIGCHLD, SIG_DFL);
    int rc = -EINVAL;
    if (R.contain == CONTAIN_AUTO || R.contain == CONTAIN_CGROUP)
        rc = make_tree_cgroup();
    if (rc < 0 && R.contain == CONTAIN_CGROUP) {
        fprintf(stderr, "%s: cannot contain CMD in a cgroup: %s\n", R.prog, strerror(-rc));
        return 126;
    }
    K.mode = rc == 0 ? M_CGROUP : R.contain == CONTAIN_SESSION ? M_SESSION : M_SUBREAPER;
    /* If the keeper half is killed, what it held is reparented to us, to be ended (PID 1 gets it anyway). */
    if (!R.pid1)
        prctl(PR_SET_CHILD_SUBREAPER, 1);
    return 0;
}

/* Returns true once the terminal on stdin, which we control as our session's leader with our group in its
 * foreground, is no longer ours (the keeper half takes it for CMD's session); false, changing nothing, otherwise.
 * Letting it go makes the kernel send SIGHUP and SIGCONT to our group (us alone: nothing is forked yet); both are
 * blocked, so they are taken back here, and one somebody else sent meanwhile is queued again. */
static bool release_terminal(void)
{
    pid_t me = getpid();
    if (!isatty(0) || getsid(0) != me || getpgrp() != me || tcgetsid(0) != me || tcgetpgrp(0) != me)
        return false;
    if (ioctl(0, TIOCNOTTY) != 0)
        return false;
    sigset_t hangup;
    sigemptyset(&hangup);
    sigaddset(&hangup, SIGHUP);
    sigaddset(&hangup, SIGCONT);
    const struct timespec now = {0, 0};
    int keep[2], nkeep = 0;
    siginfo_t si;
    while (nkeep < 2 && sigtimedwait(&hangup, &si, &now) > 0) {
        if (si.si_code != SI_KERNEL && si.si_pid != me) /* not the kernel's, on our behalf */
            keep[nkeep++] = si.si_signo;
    }
    for (int i = 0; i < nkeep; i++)
        kill(me, keep[i]);
    return true;
}

/* Returns 0 once CMD's environment will carry PROCTREE_TREE=<a new id>[:<the enclosing trees' ids>] (marker.py's
 * tree_chain: at most TREE_CHAIN ids, the middle ones dropped), by which session mode finds a daemon that left the
 * session, and the reaper what a tree left; or -errno. */
static int mark_tree(void)
{
    unsigned char raw[TREE_ID_LEN / 2];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return -errno;
    static char value[TREE_CHAIN * (TREE_ID_LEN + 1)];
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(value + 2 * i, 3, "%02x", raw[i]);
    const char *outer = getenv(TREE_KEY);
    size_t len = outer ? strlen(outer) : 0;
    if (outer && chain_names(outer, len, outer)) {
        size_t n = (len + 1) / (TREE_ID_LEN + 1), keep = n > TREE_CHAIN - 1 ? TREE_CHAIN - 2 : n;
        snprintf(value + TREE_ID_LEN, sizeof value - TREE_ID_LEN, ":%.*s", (int)(keep * (TREE_ID_LEN + 1) - 1), outer);
        if (keep < n) /* the outermost tree stays named: its teardown is the last resort */
            snprintf(value + strlen(value), sizeof value - strlen(value), ":%s", outer + len - TREE_ID_LEN);
    }
    return setenv(TREE_KEY, value, 1) == 0 ? 0 : -errno;
}

/* Returns 0 once CMD's environment will carry PROCTREE_OWNER=<our pid>:<our start time>@<pid ns>.<time ns>.<euid>
 * (marker.py's format_marker, as spawn() gives its trees), by which `proctree reap` proves a member's owner is gone
 * when the runner and its keeper half were both killed; or -errno. A marker we inherited names another owner: ours
 * replaces it, as spawn()'s does. */
static int mark_owner(void)
{
    struct pt_proc me;
    int rc = -EBUSY;
    for (int i = 0; i < 20 && rc == -EBUSY; i++) { /* busy: our own entry changing as we read it (start.c's retry) */
        if ((rc = pt_proc(getpid(), &me)) == -EBUSY)
            usleep(1000);
    }
    if (rc < 0)
        return rc;
    struct stat pidns, timens = {0};
    if (stat("/proc/self/ns/pid", &pidns) != 0)
        return -errno;
    if (stat("/proc/self/ns/time", &timens) != 0 && errno != ENOENT)
        return -errno; /* none before Linux 5.6: 0, as marker.py writes it */
    char value[128];
    snprintf(value, sizeof value, "%d:%llu@%llu.%llu.%u", (int)me.pid, (unsigned long long)me.start_time,
             (unsigned long long)pidns.st_ino, (unsigned long long)timens.st_ino, (unsigned)geteuid());
    return setenv("PROCTREE_OWNER", value, 1) == 0 ? 0 : -errno;
}

/* Returns nothing: ends what the killed keeper half left (all of it came to us: we are a subreaper), as its owner
 * would, and removes the cgroup. */
static void end_orphaned_tree(pid_t keeper)
{
    K.session = keeper; /* the keeper half's session was CMD's: its members are the tree's too */
    read_tree_id();     /* session mode: and what carries the tree's marker */
    read_self_start();
    K.sweeping = true;
    bool clean = end_tree();
    while (reap()) {
        if (waitpid(-1, NULL, WNOHANG) == 0)
            break;
    }
    if (clean)
        remove_receipt_of(keeper, R.keeper_start);
}

/* Returns the runner's exit status: the keeper half's (CMD's), or 125 if it was killed (CMD's status unknown; what
 * it held ended). Until then, passes every forwardable signal to the keeper half, reaps every child, and stops itself
 * after passing on a job-control stop. */
static int run_owner(pid_t keeper)
{
    sigset_t all;
    every_signal(&all);
    K.sig_fd = signalfd(-1, &all, SFD_CLOEXEC);
    int ignored = chdir("/"); /* the keeper half has the cwd CMD needs */
    (void)ignored;
    close_inherited(); /* what we inherited is CMD's (through the keeper half): nothing of ours holds it open */
    int status = -1;
    while (status < 0) {
        struct signalfd_siginfo si;
        ssize_t r = K.sig_fd >= 0 ? read(K.sig_fd, &si, sizeof si) : -1;
        if (r < 0 && K.sig_fd >= 0 && errno == EINTR)
            continue;
        int sig = r == (ssize_t)sizeof si ? (int)si.ssi_signo : SIGCHLD; /* no signalfd: wait for the child */
        if (sig != SIGCHLD) {
            /* kill, sigqueue, tgkill (si_code <= 0): another process's, passed on even when synchronous by number;
             * one the kernel raised (si_code > 0) about a process of ours is not CMD's business. */
            bool sent = si.ssi_code <= 0;
            if (forwardable(sig) && (sent || !synchronous(sig)))
                kill(keeper, sig); /* our unreaped child: its pid is its own */
            if ((sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) && !R.pid1)
                kill(K.self, SIGSTOP); /* the caller's shell sees a stopped job; its SIGCONT is passed on too */
            continue;
        }
        int st;
        pid_t pid;
        while ((pid = waitpid(-1, &st, K.sig_fd >= 0 ? WNOHANG : 0)) > 0) { /* as PID 1, every orphan */
            if (pid == keeper)
                status = st;
            else
                note_reaped(pid);
            if (K.sig_fd < 0 && status >= 0)
                break;
        }
    }
    if (WIFEXITED(status)) {
        cleanup_cgroup(); /* the keeper half removed it: as PID 1 nothing may stay behind on the host either way */
        return WEXITSTATUS(status);
    }
    fprintf(stderr, "%s: the keeper was killed (signal %d): CMD's status cannot be known\n", R.prog,
            WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    end_orphaned_tree(keeper);
    return 125;
}

/* Returns the exit status: 2 for bad input, 126 or 127 if CMD could not be started, 125 if the keeper half was
 * killed, else CMD's (128+N for a signal N). */
int main(int argc, char **argv)
{
    int rc;
    hold_signals(); /* first: a signal sent while we start is queued for CMD, not lost nor fatal */
    pid_t parent = parent_at_start();
    if ((rc = parse_runner_args(argc, argv)) != 0)
        return rc == 1 ? 0 : rc;
    watch_parent(parent);
    if ((rc = choose_mode()) != 0) /* cgroup made, or subreaper or session chosen; we take orphans */
        return rc;
    if ((rc = mark_tree()) < 0 || (rc = mark_owner()) < 0) {
        fprintf(stderr, "%s: cannot mark the tree: %s\n", R.prog, strerror(-rc));
        cleanup_cgroup();
        return 126;
    }
    choose_receipt_dir();       /* before the fork: both halves name the same file */
    R.tty = release_terminal(); /* before the fork: the kernel's SIGHUP and SIGCONT reach us alone */
    pid_t keeper = fork();
    if (keeper < 0) {
        fprintf(stderr, "%s: cannot start its keeper: %s\n", R.prog, strerror(errno));
        cleanup_cgroup();
        return 126;
    }
    if (keeper == 0)
        _exit(keep_tree());            /* the keeper half: CMD's session, parent and teardown */
    R.keeper_start = start_of(keeper); /* its receipt's name, should it be killed */
    return run_owner(keeper);
}
