/* Waiting for events on macOS: the blocked signals and the owner's exit, both from one kqueue.
 */
#include "keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/event.h>
#include <time.h>
#include <unistd.h>

/* Returns nothing: a kqueue sees only signals sent after it registered them, so none pending before is read. */
void events_drop_pending(void)
{
}

/* Returns 0 once the blocked signals are readable (kqueue EVFILT_SIGNAL) and the owner is watched (EVFILT_PROC NOTE_EXIT), or -errno. */
int events_open(void)
{
    K.owner_fd = kqueue();
    if (K.owner_fd < 0)
        return -errno;
    fcntl(K.owner_fd, F_SETFD, FD_CLOEXEC);
    struct kevent ev[NFORWARD + 4];
    int n = 0;
    for (int i = 0; i < NFORWARD; i++)
        EV_SET(&ev[n++], FORWARD[i], EVFILT_SIGNAL, EV_ADD, 0, 0, NULL);
    EV_SET(&ev[n++], SIGCHLD, EVFILT_SIGNAL, EV_ADD, 0, 0, NULL);
    EV_SET(&ev[n++], HOLD_SIG, EVFILT_SIGNAL, EV_ADD, 0, 0, NULL);
    if (K.pty)
        EV_SET(&ev[n++], SIGCONT, EVFILT_SIGNAL, EV_ADD, 0, 0, NULL);
    if (kevent(K.owner_fd, ev, n, NULL, 0, NULL) != 0)
        return -errno;
    EV_SET(&ev[0], K.owner, EVFILT_PROC, EV_ADD | EV_ONESHOT, NOTE_EXIT, 0, NULL);
    kevent(K.owner_fd, ev, 1, NULL, 0, NULL); /* ESRCH: it is gone already, and getppid() tells */
    return 0;
}

/* Returns nothing: waits up to ms milliseconds for a signal or the owner's exit; queues forwarded signals. */
void wait_events(int ms)
{
    struct kevent ev[16];
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    int rc = kevent(K.owner_fd, NULL, 0, ev, 16, &ts);
    for (int i = 0; i < rc; i++) {
        if (ev[i].filter == EVFILT_SIGNAL)
            queue_signal((int)ev[i].ident);
    }
    sigset_t pend;
    if (sigpending(&pend) == 0) { /* consume what is pending, so nothing fires when we unblock one to re-raise it */
        for (int s = 1; s < NSIG; s++) {
            int got;
            if (sigismember(&K.blocked, s) && sigismember(&pend, s) == 1) {
                sigset_t one;
                sigemptyset(&one);
                sigaddset(&one, s);
                sigwait(&one, &got);
            }
        }
    }
}
