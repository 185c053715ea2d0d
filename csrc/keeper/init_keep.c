/* proctree-init's keeper half: the child that leads CMD's session, holds its tree and ends what CMD left.
 *
 * It is the keeper (keeper.c) with the runner for its owner: it watches the runner's death as the keeper watches
 * a Python owner's (so that a SIGKILL of the runner still ends the tree), and its exit status is CMD's, which the
 * runner passes on.
 */
#include "init.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Returns 0 once we lead CMD's session and are what the mode needs (a subreaper, in every mode),
 * with every signal readable and the runner watched, else 126 after a line on stderr. */
static int contain(void)
{
    K.self = getpid();
    K.owner = getppid();
    setsid(); /* a fresh fork leads no group: this succeeds */
    /* The terminal the runner let go becomes our session's, and CMD's group its foreground (start.c's pty step);
     * if it cannot, CMD runs without one, as it would have anyway. */
    if (R.tty && ioctl(0, TIOCSCTTY, 0) == 0)
        K.pty = true;
    if (K.mode == M_SUBREAPER && prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        if (R.contain == CONTAIN_SUBREAPER) {
            fprintf(stderr, "%s: cannot become a subreaper: %s\n", R.prog, strerror(errno));
            return 126;
        }
        K.mode = M_SESSION;
    }
    /* In a cgroup and a session too: an orphan of the tree is ours to reap (not a zombie under an init that does not
     * reap, nor the runner's, which would leave CMD's parent without the tree below it); best effort. */
    if (K.mode != M_SUBREAPER)
        prctl(PR_SET_CHILD_SUBREAPER, 1);
    K.session = K.mode == M_SESSION ? K.self : 0;
    read_tree_id(); /* session mode: what carries the runner's PROCTREE_TREE is the tree's too */
    if (R.verbosity >= 2) {
        static const char *const MODES[] = {MODE_NAMES};
        fprintf(stderr, "%s: CMD runs in a %s tree\n", R.prog, MODES[K.mode]);
    }
    int rc = open_runner_events();
    if (rc < 0) {
        fprintf(stderr, "%s: cannot read signals: %s\n", R.prog, strerror(-rc));
        return 126;
    }
    return 0;
}

/* Returns 0 once CMD runs, else 127 (not found) or 126 (cannot run it) after a line on stderr. */
static int launch(void)
{
    const char *stage = STAGE_EXEC;
    int rc = start_command(&stage);
    if (rc < 0) {
        bool exec = strcmp(stage, STAGE_EXEC) == 0;
        const char *why = rc == -ENOENT ? "command not found" : rc == -EACCES ? "permission denied" : strerror(-rc);
        if (!exec)
            fprintf(stderr, "%s: %s: cannot start it (%s): %s\n", R.prog, K.exe, stage, strerror(-rc));
        else
            fprintf(stderr, "%s: %s: %s\n", R.prog, K.exe, why);
        return rc == -ENOENT && exec ? 127 : 126;
    }
    /* CMD has its cwd now: ours must not keep that directory busy (an umount under a container init). */
    int ignored = chdir("/");
    (void)ignored;
    close_inherited(); /* what we inherited is CMD's: a pipe's reader must not wait for us to close it */
    read_self_start();
    return 0;
}

/* Returns true once CMD has exited, false if the runner died first: reaping every child and forwarding every signal
 * meanwhile. */
static bool supervise(void)
{
    for (;;) {
        reap();
        forward();
        if (K.cmd_done)
            return true;
        if (!owner_alive())
            return false;
        wait_events(K.owner_fd >= 0 ? 30000 : 250); /* SIGCHLD comes through the signalfd: an exit wakes us */
    }
}

/* Returns nothing: ends what CMD left (the keeper's teardown), removes the cgroup, and says so in one line unless -q
 * or the runner is gone (nobody reads it then). */
static void end_leftovers(bool owned)
{
    bool left = reap() || (K.cgroup && cg_populated());
    bool clean = true;
    int ended = 0;
    if (left || K.mode == M_SESSION || !owned) {
        if (owned && R.verbosity >= 0)
            note_leftovers();
        K.sweeping = true;
        clean = end_tree();
        ended = g_nset;
    } else {
        cleanup_cgroup();
    }
    end_receipt(clean); /* a tree that survived keeps it: the reaper's evidence */
    if (owned && R.verbosity >= 0)
        say_leftovers(ended, clean);
}

/* Returns CMD's exit status as tini's: its code, or 128+N for a signal N (0 to 255). */
static int cmd_status(void)
{
    int status = K.cmd_status;
    if (WIFSIGNALED(status))
        return (128 + WTERMSIG(status)) & 0xff;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* Returns the keeper half's exit status (the runner's): 126 or 127 if CMD could not be started, else CMD's. */
int keep_tree(void)
{
    int rc;
    if ((rc = contain()) != 0)
        return rc;
    if ((rc = launch()) != 0)
        return rc;
    if ((rc = write_receipt()) < 0 && R.verbosity > 0 && K.receipts)
        fprintf(stderr, "%s: no receipt for this tree: %s\n", R.prog, strerror(-rc));
    bool owned = supervise();
    end_leftovers(owned);
    if (!owned)
        return 1;
    int code = cmd_status();
    return R.expect[code / 32] & (1u << (code % 32)) ? 0 : code; /* -e CODE: returned as 0, as tini */
}
