/* The Linux pieces the shared keeper files call: pidfds, the status pipe's room, clone3, the fd list, the modes.
 */
#include "keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture */
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_clone3
#define SYS_clone3 435 /* the same number on every architecture */
#endif

/* clone3's argument block up to its cgroup field (CLONE_ARGS_SIZE_VER2), declared here for older headers. */
struct pt_clone_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};
#define PT_CLONE_INTO_CGROUP 0x200000000ULL

const char FD_DIR[] = "/proc/self/fd";

char env_scratch[65536]; /* Linux streams /proc/<pid>/environ through it */
const size_t ENV_SCRATCH_SIZE = sizeof env_scratch;

/* Returns a pidfd for pid (Linux 5.3+), or -errno (-ESRCH: gone; -ENOSYS: an older kernel). */
int pidfd_of(pid_t pid)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    return fd < 0 ? -errno : fd;
}

/* Returns 0 once sig was sent through the pidfd fd, or -errno. */
int pidfd_signal(int fd, int sig)
{
    return syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) == 0 ? 0 : -errno;
}

/* Returns 1 if the pipe fd has EXIT_RESERVE bytes free, 0 if not, or -errno if its fill cannot be read. */
int status_room(int fd)
{
    int size = fcntl(fd, F_GETPIPE_SZ), used = 0;
    if (size > 0 && ioctl(fd, FIONREAD, &used) == 0)
        return size - used >= EXIT_RESERVE ? 1 : 0;
    return -EOPNOTSUPP;
}

/* Returns the child's pid in the parent, 0 in the child, or -errno. born_inside: when the command must start in the
 * tree's cgroup, set if the kernel placed the child there at birth (clone3 CLONE_INTO_CGROUP, Linux 5.7+: no
 * migration, so no wait for an RCU grace period); else the child must join the cgroup itself. */
pid_t fork_child(bool into_cgroup, bool *born_inside)
{
    *born_inside = false;
    int cfd = into_cgroup ? open(K.cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (cfd >= 0) {
        struct pt_clone_args a;
        memset(&a, 0, sizeof a);
        a.flags = PT_CLONE_INTO_CGROUP;
        a.exit_signal = SIGCHLD;
        a.cgroup = (uint64_t)cfd;
        long pid = syscall(SYS_clone3, &a, sizeof a);
        int e = errno;
        if (pid == 0) {
            *born_inside = true;
            return 0;
        }
        close(cfd);
        if (pid > 0) {
            *born_inside = true;
            return (pid_t)pid;
        }
        if (e != ENOSYS && e != E2BIG && e != EINVAL && e != EPERM && e != EOPNOTSUPP)
            return -e; /* a real failure (EAGAIN: out of pids), not a kernel without clone3 */
    }
    pid_t pid = fork();
    return pid < 0 ? -errno : pid;
}

/* Returns true if pid, a child of ours that has exited and is not reaped yet, is the last pid handed out in our pid
 * namespace: no process was started after it, so it left nothing behind (its pid, held until we reap it, cannot have
 * come round again). False when it has not exited, or either cannot be read. */
bool exited_last(pid_t pid)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid != pid)
        return false;
    int fd = open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[32];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    if (buf[n - 1] == '\n')
        buf[n - 1] = '\0';
    long long last;
    return parse_uint(buf, INT32_MAX, &last) == 0 && last == (long long)pid;
}

/* Returns 0 once the keeper is what its mode needs (a subreaper, and in every mode when the owner is PID 1; in cgroup
 * mode, a cgroup that is ours), or -errno
 * with *stage naming the step for the err line. */
int enter_mode(const char **stage)
{
    if (K.cgroup && !cgroup_is_ours(K.cgroup)) {
        *stage = STAGE_CGROUP;
        return -EINVAL;
    }
    /* An owner that is PID 1 (a container's init) would get every orphan and must reap it: in every mode they come
     * to us instead, and our loop reaps them. */
    bool subreaper = K.mode == M_SUBREAPER || K.owner == 1;
    if (subreaper && prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        *stage = STAGE_SUBREAPER;
        return -errno;
    }
    return 0;
}
