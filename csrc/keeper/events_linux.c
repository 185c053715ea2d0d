/* Waiting for events on Linux: the blocked signals from a signalfd, the owner's exit from a pidfd, and in cgroup
 * mode a change of the tree's cgroup.events (its last member gone).
 */
#include "keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

/* cgroup mode: the tree's cgroup.events, which the kernel marks changed (POLLPRI) when "populated" flips, so an
 * emptied cgroup wakes the keeper at once instead of at its next look; -1 elsewhere or if it cannot be opened. */
static int g_events_fd = -1;

/* Returns nothing: opens the tree's cgroup.events for wait_events (best effort: without it the keeper still looks). */
static void watch_cgroup_events(void)
{
    char path[PATH_MAX];
    if (!K.cgroup || snprintf(path, sizeof path, "%s/cgroup.events", K.cgroup) >= (int)sizeof path)
        return;
    g_events_fd = open(path, O_RDONLY | O_CLOEXEC);
}

/* Returns nothing: reads cgroup.events through our fd, which re-arms its change notification (kernfs reports a change
 * to an fd until the fd reads the file again). */
static void rearm_cgroup_events(void)
{
    char buf[256];
    if (pread(g_events_fd, buf, sizeof buf, 0) < 0) {
        close(g_events_fd); /* a cgroup gone or unreadable: the keeper's own looks remain */
        g_events_fd = -1;
    }
}

/* Returns nothing: reads and drops the signals pending now (events_open() made the signalfd). */
void events_drop_pending(void)
{
    struct signalfd_siginfo stale[16];
    while (read(K.sig_fd, stale, sizeof stale) > 0) {
    }
}

/* Returns 0 once the blocked signals are readable (a signalfd) and the owner is watched (a pidfd, else PR_SET_PDEATHSIG as a wakeup), or -errno. */
int events_open(void)
{
    K.sig_fd = signalfd(-1, &K.blocked, SFD_CLOEXEC | SFD_NONBLOCK);
    if (K.sig_fd < 0)
        return -errno;
    if (K.use_pidfd)
        K.owner_fd = pidfd_of(K.owner);
    if (K.owner_fd < 0) {
        K.owner_fd = -1;
        prctl(PR_SET_PDEATHSIG, PDEATH_SIG); /* a wakeup only: it fires on the spawning thread's exit */
    }
    watch_cgroup_events();
    if (g_events_fd >= 0)
        rearm_cgroup_events();
    return 0;
}

/* Returns nothing: waits up to ms milliseconds for a signal or the owner's exit; queues forwarded signals. */
void wait_events(int ms)
{
    /* A negative fd is ignored by poll: the owner's pidfd and cgroup.events are optional. */
    struct pollfd fds[3] = {{.fd = K.sig_fd, .events = POLLIN},
                            {.fd = K.owner_fd, .events = POLLIN},
                            {.fd = g_events_fd, .events = POLLPRI}};
    int rc = poll(fds, 3, ms);
    if (rc > 0 && g_events_fd >= 0 && (fds[2].revents & (POLLPRI | POLLERR)))
        rearm_cgroup_events(); /* the caller's loop looks at the cgroup again now */
    if (rc > 0 && K.owner_fd >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
        /* The owner has exited (owner_alive() says so from here on): its pidfd stays readable, and every later poll,
         * a teardown's grace included, would return at once and spin. */
        close(K.owner_fd);
        K.owner_fd = -1;
    }
    if (rc <= 0 || !(fds[0].revents & POLLIN))
        return;
    struct signalfd_siginfo si[16];
    ssize_t r = read(K.sig_fd, si, sizeof si);
    for (ssize_t i = 0; r > 0 && i < r / (ssize_t)sizeof si[0]; i++)
        queue_signal((int)si[i].ssi_signo);
}
