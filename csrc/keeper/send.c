/* Identity-checked signalling: a signal reaches the process (pid, start time) or nobody.
 */
#include "keeper.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

/* Returns true if pid may never be signalled by us: pid 0/1, ourselves, the owner, our parent. */
bool protected_pid(pid_t pid)
{
    return pid <= 1 || pid == K.self || pid == K.owner || pid == getppid();
}

/* Returns 1 if sig was sent to the process (pid, start), 0 if it is gone, protected or a zombie, or -errno (-EPERM: refused). */
int send_sig(pid_t pid, uint64_t start, int sig)
{
    if (protected_pid(pid))
        return 0;
    int fd = -1;
    if (K.use_pidfd) {
        fd = pidfd_of(pid);
        if (fd == -ESRCH)
            return 0;
        if (fd < 0)
            fd = -1; /* no pidfd here: the start time checked just before the kill binds it */
    }
    struct pt_proc row;
    int rc = pt_proc(pid, &row);
    if (rc == 0 && (row.start_time != start || row.state == 'Z' || row.state == 'X'))
        rc = -ESRCH;
    if (rc == 0) {
        if (fd >= 0)
            rc = pidfd_signal(fd, sig);
        else
            rc = kill(pid, sig) == 0 ? 0 : -errno;
        rc = rc == 0 ? 1 : rc;
    }
    if (fd >= 0)
        close(fd);
    return rc == -ESRCH || rc == -ENOENT ? 0 : rc;
}
