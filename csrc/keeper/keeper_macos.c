/* The macOS pieces the shared keeper files call: no pidfds, no cgroups, no subreaper; session mode only.
 */
#include "keeper.h"

#include <errno.h>
#include <unistd.h>

const char FD_DIR[] = "/dev/fd";

char env_scratch[PT_ENV_SCAN_MAX + 65536]; /* macOS reads the whole KERN_PROCARGS2 area */
const size_t ENV_SCRATCH_SIZE = sizeof env_scratch;

/* Returns -ENOSYS: macOS has no pidfds (the start time checked just before each kill binds it instead). */
int pidfd_of(pid_t pid)
{
    (void)pid;
    return -ENOSYS;
}

/* Returns -ENOSYS: there is never a pidfd to signal through. */
int pidfd_signal(int fd, int sig)
{
    (void)fd;
    (void)sig;
    return -ENOSYS;
}

/* Returns -EOPNOTSUPP: a pipe's free room cannot be read here, so "stopped" lines are counted instead. */
int status_room(int fd)
{
    (void)fd;
    return -EOPNOTSUPP;
}

/* Returns the child's pid in the parent, 0 in the child, or -errno; *born_inside is always false (no cgroups). */
pid_t fork_child(bool into_cgroup, bool *born_inside)
{
    *born_inside = false;
    (void)into_cgroup;
    pid_t pid = fork();
    return pid < 0 ? -errno : pid;
}

/* Returns false: the last pid handed out cannot be read here, so a session's sweep always looks. */
bool exited_last(pid_t pid)
{
    (void)pid;
    return false;
}

/* Returns 0 in session mode, the only one macOS has, else -EOPNOTSUPP with *stage naming the mode. */
int enter_mode(const char **stage)
{
    if (K.mode != M_SESSION) {
        *stage = K.mode == M_CGROUP ? STAGE_CGROUP : STAGE_SUBREAPER;
        return -EOPNOTSUPP;
    }
    return 0;
}

/* The cgroup functions: enter_mode() refuses cgroup mode, so K.cgroup is always NULL and these are never asked to
 * act; they exist so that the shared files need no platform conditionals. */

/* Returns false: no cgroup answers for the tree. */
bool cg_scan(void)
{
    return false;
}

/* Returns false: no cgroup is populated. */
bool cg_populated(void)
{
    return false;
}

/* Returns nothing: there is no cgroup to remove. */
void cg_remove(void)
{
}

/* Returns -EOPNOTSUPP: there is no cgroup to join. */
int cg_join_self(void)
{
    return -EOPNOTSUPP;
}

/* Returns nothing: there is no cgroup to kill. */
void cgroup_kill(void)
{
}
