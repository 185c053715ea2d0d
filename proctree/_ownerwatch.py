"""Per-platform kernel hooks the keeper needs: learn that the owner died, become a subreaper.

Each platform section defines the same functions:
  watch_owner(pid) -> object with fileno() that polls readable once pid has exited, or None
  parent_death_signal(sig) -> bool   ask for sig when our parent goes (a wakeup only)
  become_subreaper() -> None         raise OSError where it is impossible
  fork_into_cgroup(dir) -> pid, 0 in the child, or None where the kernel cannot

The proof of the owner's death is always ``os.getppid() != owner``: the keeper's
parent is the owner, and a child is only reparented away from a process when
its whole thread group is gone. PR_SET_PDEATHSIG is not proof: Linux sends it
when the parent THREAD that forked us exits, so a tree spawned from a
short-lived thread would die with that thread (prctl(2), "the parent" is the
thread). Here it only wakes the keeper, which then checks getppid().

Stdlib only and no relative imports: the keeper loads this file directly.
"""
import os
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
# clone3 has the same number on every architecture (it postdates the split tables).
SYS_CLONE3 = 435

_libc = None


def _prctl(option, arg):
    global _libc
    import ctypes  # only here: it costs the keeper ~4 ms of startup

    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0),
                   ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


class _Fd:
    def __init__(self, fd, keep=None):
        self.fd = fd
        self._keep = keep  # a kqueue object must stay referenced for its fd to stay open

    def fileno(self):
        return self.fd

    def close(self):
        if self._keep is not None:
            self._keep.close()
        elif self.fd >= 0:
            os.close(self.fd)
        self.fd = -1


if sys.platform.startswith("linux"):

    def watch_owner(pid):
        # A pidfd of a thread-group leader polls readable when the whole
        # process has exited, not when one thread (the spawning one) does.
        # PROCTREE_NO_PIDFD=1 (tests) takes the old-kernel path: PDEATHSIG + getppid.
        if os.environ.get("PROCTREE_NO_PIDFD") == "1":
            return None
        try:
            return _Fd(os.pidfd_open(pid))
        except (AttributeError, OSError):
            return None  # kernel < 5.3: the keeper polls getppid() instead

    def parent_death_signal(sig):
        try:
            _prctl(PR_SET_PDEATHSIG, sig)
            return True
        except OSError:
            return False

    def become_subreaper():
        _prctl(PR_SET_CHILD_SUBREAPER, 1)

    def fork_into_cgroup(cgroup_dir):
        """fork() straight into a cgroup (clone3 + CLONE_INTO_CGROUP, Linux 5.7+): pid, 0 in the child, or None.

        Why not fork and write cgroup.procs: a migration takes the cgroup
        threadgroup rwsem for writing, which waits for an RCU grace period
        (7 ms idle, far more under load) unless another migration just
        happened; forking into the cgroup takes it only for reading.
        Only for a single-threaded caller that execs or _exits in the child
        (like vfork): Python's after-fork hooks do not run there.
        """
        if os.environ.get("PROCTREE_NO_CLONE3") == "1":  # tests: the pre-5.7 path
            return None
        import ctypes

        global _libc
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        try:
            fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        pid = -1
        try:
            # struct clone_args: eleven u64 fields (linux/sched.h, CLONE_ARGS_SIZE_VER2).
            args = (ctypes.c_uint64 * 11)(0x200000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, fd)  # CLONE_INTO_CGROUP, SIGCHLD
            _libc.syscall.restype = ctypes.c_long
            pid = _libc.syscall(ctypes.c_long(SYS_CLONE3), ctypes.byref(args), ctypes.c_size_t(88))
        finally:
            if pid != 0:  # the child keeps it until exec (it is close-on-exec)
                os.close(fd)
        # < 0: ENOSYS/E2BIG/EINVAL before Linux 5.7; the caller falls back to fork + cgroup.procs.
        return pid if pid >= 0 else None

elif sys.platform == "darwin" or "bsd" in sys.platform:

    def watch_owner(pid):
        import select

        # kqueue NOTE_EXIT fires once for the process (macOS has no thread trap).
        try:
            kq = select.kqueue()
            kq.control([select.kevent(pid, select.KQ_FILTER_PROC, select.KQ_EV_ADD | select.KQ_EV_ONESHOT,
                                      select.KQ_NOTE_EXIT)], 0, 0)
        except (AttributeError, OSError):
            return None
        return _Fd(kq.fileno(), keep=kq)

    def parent_death_signal(sig):
        return False

    def become_subreaper():
        raise OSError(95, "child subreapers are Linux-only (PR_SET_CHILD_SUBREAPER)")

    def fork_into_cgroup(cgroup_dir):
        return None

else:  # fallbacks: the keeper polls getppid()

    def watch_owner(pid):
        return None

    def parent_death_signal(sig):
        return False

    def become_subreaper():
        raise OSError(95, f"child subreapers are not available on {sys.platform}")

    def fork_into_cgroup(cgroup_dir):
        return None
