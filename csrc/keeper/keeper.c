/* The native keeper: the small process that holds a contained tree together.
 *
 * It speaks the keeper protocol of proctree/_containment/protocol.py (its
 * command line and its status lines); tests/containment/test_keeper_protocol.py holds it
 * to that protocol. build_keeper.py builds it into the package, beside the
 * extension module, from the core's own sources.
 *
 * Why this shape:
 * - Signals are blocked, never handled: a signal the owner ignored stays
 *   ignored for the command (exec keeps SIG_IGN, and a blocked signal is
 *   still queued for us, so it is still forwarded), and no handler can race
 *   the loop. Linux reads them from a signalfd, macOS from kqueue.
 * - Every signal to a member is bound to its identity: a pidfd (Linux 5.3+)
 *   held across the start-time check, else the start time checked just before.
 * - The owner's death is proven by getppid() alone: a pidfd (kqueue NOTE_EXIT
 *   on macOS) or PR_SET_PDEATHSIG only wakes us to look.
 * - Every buffer is static and sized by MAX_PROCS: only the pages a scan
 *   touches are resident, and a fork bomb cannot make the keeper grow.
 * - The command is started with fork (clone3 into its cgroup on Linux) and
 *   exec, never posix_spawn: the child may have to join a cgroup or make its
 *   group the terminal's foreground before it execs, which no spawn attribute
 *   does, and glibc's posix_spawn leaves signals ignored in a static program's
 *   child that Popen's child has at default.
 */
#include "keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct keeper K = {.status_fd = -1, .owner_fd = -1, .sig_fd = -1, .tty_fd = -1};

/* Returns 0 once the status fd is ours (writable, above stdio, close-on-exec, non-blocking), else REFUSED (the
 * reason on stderr). */
static int claim_fds(void)
{
    int fl = fcntl(K.status_fd, F_GETFL);
    if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY) {
        fprintf(stderr, "proctree keeper: status fd %d is not open for writing: %s\n", K.status_fd,
                strerror(fl < 0 ? errno : EBADF));
        return REFUSED;
    }
    if (K.status_fd <= 2) { /* stdio goes to the command (then /dev/null): keep the status pipe clear of it */
        int fd = fcntl(K.status_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
            return refuse("cannot move the status fd: %s", strerror(errno));
        K.status_fd = fd;
    }
    fcntl(K.status_fd, F_SETFD, FD_CLOEXEC);
    fcntl(K.status_fd, F_SETFL, fl | O_NONBLOCK); /* a full status pipe never blocks the keeper */
    return 0;
}

/* Returns 0 once the keeper leads its own session (the pty its controlling terminal in pty mode) and is what its
 * mode needs (a subreaper, or the keeper of a cgroup that is ours), else 126 after an err line. */
static int become_keeper(void)
{
    K.self = getpid();
    const char *nopidfd = getenv("PROCTREE_NO_PIDFD");
    /* The owner's rule (signals.pidfds_available): set, and neither empty nor "0", turns pidfds off. */
    K.use_pidfd = !nopidfd || !*nopidfd || strcmp(nopidfd, "0") == 0;
    /* Leave the caller's session and terminal; spawn() already did (Popen start_new_session). */
    if (setsid() < 0)
        setpgid(0, 0);
    /* pty mode: our stdin, the slave the owner opened, becomes our controlling terminal (we lead a fresh session),
     * and a close-on-exec copy outlives detach_stdio() for tcsetpgrp. */
    if (K.pty) {
        if (!isatty(0)) {
            say(STATUS_ERR " %d " STAGE_PTY, ENOTTY);
            return 126;
        }
        if (ioctl(0, TIOCSCTTY, 0) != 0) {
            say(STATUS_ERR " %d " STAGE_PTY, errno);
            return 126;
        }
        K.tty_fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
        if (K.tty_fd < 0) {
            say(STATUS_ERR " %d " STAGE_PTY, errno);
            return 126;
        }
    }
    /* Session mode, where nothing else holds the tree: our session's members too (when we lead one). */
    K.session = K.mode == M_SESSION && getsid(0) == K.self ? K.self : 0;
    read_tree_id();
    const char *stage = "";
    int rc = enter_mode(&stage);
    if (rc < 0) {
        say(STATUS_ERR " %d %s", -rc, stage);
        return 126;
    }
    return 0;
}

/* Returns 0 once the keeper's signals are blocked and readable and the owner is watched and alive, else 1 after an
 * err line (and the cgroup the owner made removed if it is dead: nobody else will). */
static int watch_owner(void)
{
    int rc = setup_events();
    if (rc < 0) {
        say(STATUS_ERR " %d " STAGE_OWNER, -rc);
        if (!owner_alive()) /* nobody else will remove the cgroup it made */
            cleanup_cgroup();
        return 1;
    }
    if (!owner_alive()) { /* it died before we could watch it: nobody else will remove the cgroup it made */
        say(STATUS_ERR " 0 " STAGE_OWNER);
        cleanup_cgroup();
        return 1;
    }
    return 0;
}

/* Returns 0 once the command runs and "ok" is said, else 127 after an err line (the cgroup removed); either way
 * our stdio is the command's from then on. */
static int launch(void)
{
    const char *stage = STAGE_EXEC;
    int rc = start_command(&stage);
    if (rc < 0)
        say(STATUS_ERR " %d %s", -rc, stage);
    else
        say(STATUS_OK " %d %llu", (int)K.cmd, (unsigned long long)start_of(K.cmd));
    detach_stdio(); /* the command owns our stdio now: the owner sees EOF when its side closes */
    /* The command has its own cwd now: ours must not keep that directory busy (an umount). Best effort. */
    int ignored = chdir("/");
    (void)ignored;
    if (rc < 0) {
        cleanup_cgroup();
        return 127;
    }
    return 0;
}

/* Returns the keeper's exit status once the command is done and its tree ended (or left, with keep_orphans or the
 * owner's hold) and "done" said, or once the owner died and the tree was ended without a word. */
static int keep(void)
{
    read_self_start();
    for (;;) {
        bool children = reap();
        if (K.cgroup)
            children = children || cg_populated();
        forward();
        if (!owner_alive()) {
            K.status_fd = -1;
            end_receipt(end_tree());
            return exit_code();
        }
        bool session_keep = K.mode == M_SESSION && K.keep_orphans;
        if (K.cmd_done && session_keep && !children && !K.cmd_alone) { /* alone: nothing of it can exist */
            children = !tree_empty();           /* what left for init may still run: we stay while it does */
            if (!children && !K.looked_again) { /* a daemon may be a few forks from existing: one more look */
                K.looked_again = true;
                children = true;
            }
        }
        if (K.cmd_done && !K.keep_orphans && !K.held)
            wait_events(0); /* a hold the owner sent before its stop signal ended the command counts */
        /* Held in session mode with a pty: the command's orphans went to init, and our exit would hang up the
         * terminal under them while they drain: we stay until the owner's teardown has ended them. */
        bool held_session = K.held && K.mode == M_SESSION && K.pty;
        if (K.cmd_done && held_session && !children)
            children = !tree_empty();
        bool leave = K.keep_orphans || K.held; /* what runs on is not ours to end here */
        if (K.cmd_done && (!leave || !children)) {
            bool clean = !K.held; /* held: the owner's teardown knows what survived, we do not */
            /* Session mode sweeps for what left the keeper's line, unless nothing was started after the command. */
            if (!leave && (children || (K.mode == M_SESSION && !K.cmd_alone))) {
                K.sweeping = true; /* an owner's hold from now on waits for our done */
                clean = end_tree();
            }
            cleanup_cgroup();
            end_receipt(clean);
            say(STATUS_DONE " %d", clean ? 1 : 0); /* the last line: without it the owner knows we were killed */
            return exit_code();
        }
        /* Without an owner watch getppid() is polled; so are orphans whose exit sends us nothing. */
        bool polling = K.owner_fd < 0 || (K.cmd_done && (K.cgroup || session_keep || held_session));
        wait_events(K.cmd_done && held_session ? 20 : polling ? 250 : 30000); /* held: the owner is ending it now */
    }
}

/* Returns nothing: K.caller_mask from CALLER_MASK_ENV when it is there and well-formed; the variable is taken out of
 * the environment either way (the command's environment is the owner's, without it). */
static void take_caller_mask(void)
{
    const char *v = getenv(CALLER_MASK_ENV);
    if (v == NULL)
        return;
    char *end;
    errno = 0;
    unsigned long long bits = strtoull(v, &end, 16);
    if (errno == 0 && end != v && *end == '\0') {
        K.caller_mask = (uint64_t)bits;
        K.caller_mask_given = true;
    }
    unsetenv(CALLER_MASK_ENV);
}

/* Returns the keeper's exit status: REFUSED (2) for a malformed command line (the reason on stderr), 1, 126 or 127
 * after an err line, else the command's (a signal re-raised on ourselves, as a shell does). */
int main(int argc, char **argv)
{
    int rc;
    take_caller_mask();                     /* the command's signal mask, when spawn() passed it */
    if ((rc = parse_args(argc, argv)) != 0) /* the owner's command line */
        return rc;
    if ((rc = claim_fds()) != 0) /* the status pipe */
        return rc;
    if ((rc = become_keeper()) != 0) /* session leader (terminal in pty mode), subreaper or cgroup keeper */
        return rc;
    if ((rc = watch_owner()) != 0) /* signals blocked and readable, the owner watched */
        return rc;
    if ((rc = launch()) != 0) /* the command started, "ok" said, stdio handed over */
        return rc;
    return keep(); /* loop: wait for events, reap, forward; then end the tree, say "done" and exit */
}
