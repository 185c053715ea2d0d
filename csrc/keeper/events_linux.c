/* Waiting for events on Linux: the blocked signals from a signalfd, the owner's exit from a pidfd.
 */
#include "keeper.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

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
    return 0;
}

/* Returns nothing: waits up to ms milliseconds for a signal or the owner's exit; queues forwarded signals. */
void wait_events(int ms)
{
    struct pollfd fds[2] = {{.fd = K.sig_fd, .events = POLLIN}, {.fd = K.owner_fd, .events = POLLIN}};
    int rc = poll(fds, K.owner_fd >= 0 ? 2 : 1, ms);
    if (rc <= 0 || !(fds[0].revents & POLLIN))
        return;
    struct signalfd_siginfo si[16];
    ssize_t r = read(K.sig_fd, si, sizeof si);
    for (ssize_t i = 0; r > 0 && i < r / (ssize_t)sizeof si[0]; i++)
        queue_signal((int)si[i].ssi_signo);
}
