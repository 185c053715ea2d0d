"""Identity-checked signalling: signal the process that was recorded, never just a pid.

A Target is one recorded process (pid + start time). On Linux it holds a pidfd,
opened first and then checked against the recorded start time, so every later
signal goes to that very process even if its pid is reused meanwhile. Where
pidfds are missing (macOS, old kernels, fd budget spent) each signal is
preceded by a start-time check: a narrow race remains there, and the docs say so.

The Guard is the last line of defence. This module must never signal pid 0,
pid 1, a negative pid, the caller or any of its ancestors, nor a process group
that holds the caller or an ancestor: every send goes through Guard checks,
whatever the tree claims.
"""
import errno
import os
import signal

from .._table import binding as _binding
from .._errors import AccessDenied, NoSuchProcess

SENT = "sent"
GONE = "gone"
DENIED = "denied"

# Tests and debugging: PROCTREE_NO_PIDFD=1 forces the start-time fallback.
_pidfd_ok = None


def pidfds_available():
    """True when pidfd_open and pidfd_send_signal work here (probed once)."""
    global _pidfd_ok
    if _pidfd_ok is None:
        _pidfd_ok = False
        if os.environ.get("PROCTREE_NO_PIDFD") != "1" and hasattr(os, "pidfd_open") and hasattr(
            signal, "pidfd_send_signal"
        ):
            # pidfd_send_signal (5.1) predates pidfd_open (5.3): one probe covers both.
            try:
                os.close(os.pidfd_open(os.getpid()))
                _pidfd_ok = True
            except OSError:
                pass
    return _pidfd_ok


def _ancestor_pids(pid):
    """pid's ancestors by live parent links, up to the first pid <= 1 (or an unreadable one)."""
    out = []
    seen = {pid}
    cur = os.getppid() if pid == os.getpid() else _binding.proc(pid).ppid
    while cur > 1 and cur not in seen:
        out.append(cur)
        seen.add(cur)
        try:
            cur = _binding.proc(cur).ppid
        except (NoSuchProcess, AccessDenied, OSError):
            break
    return out


class Guard:
    """Who must never be signalled: the caller, its ancestors, pid 0 and pid 1."""

    def __init__(self, me=None, ancestors=None):
        self.me = os.getpid() if me is None else me
        if ancestors is None:
            ancestors = _ancestor_pids(self.me)
        self.protected = frozenset({0, 1, self.me, *ancestors})

    def allows(self, pid):
        return pid > 1 and pid not in self.protected

    def protected_groups(self):
        """Process groups that hold a protected process right now (read live)."""
        groups = {0, 1}
        for pid in self.protected:
            if pid <= 1:
                continue
            try:
                groups.add(os.getpgid(pid))
            except OSError:
                pass  # gone or hidden: it holds no group any more
        return groups

    def allows_group(self, pgid):
        return pgid > 1 and pgid not in self.protected_groups()


class Target:
    """One recorded process we may signal. pidfd is None in fallback mode."""

    __slots__ = ("proc", "pidfd")

    def __init__(self, proc, pidfd):
        self.proc = proc
        self.pidfd = pidfd

    def close(self):
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def __repr__(self):
        return f"<Target {self.proc.pid} start {self.proc.start_time} pidfd {self.pidfd}>"


def open_target(proc, guard, use_pidfd):
    """A Target for proc, or None if that process is gone (its pid may be someone else's now).

    Raises AccessDenied if its identity cannot be checked, ValueError if the guard forbids it.
    """
    if not guard.allows(proc.pid):
        raise ValueError(f"refusing to signal protected pid {proc.pid}")
    fd = None
    if use_pidfd and hasattr(os, "pidfd_open"):
        try:
            fd = os.pidfd_open(proc.pid)
        except ProcessLookupError:
            return None
        except OSError as exc:
            # Out of fds or no pidfd support here: fall back to start-time checks.
            if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOSYS, errno.EINVAL, errno.EPERM):
                raise
            fd = None
    # The pidfd names whatever held the pid when it was opened; the start time read
    # after it tells whether that is the process we recorded.
    try:
        now = _binding.proc(proc.pid)
    except NoSuchProcess:
        now = None
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise
    if now is None or now.start_time != proc.start_time:
        if fd is not None:
            os.close(fd)
        return None
    return Target(now, fd)


def still_same(target):
    """True/False whether target's process is still there (a zombie counts as there)."""
    try:
        now = _binding.proc(target.proc.pid)
    except NoSuchProcess:
        return False
    return now.start_time == target.proc.start_time


def send(target, sig, guard):
    """Send sig to target's process only. Returns SENT, GONE or DENIED."""
    pid = target.proc.pid
    if not guard.allows(pid):
        raise ValueError(f"refusing to signal protected pid {pid}")
    try:
        if target.pidfd is not None and hasattr(signal, "pidfd_send_signal"):
            signal.pidfd_send_signal(target.pidfd, sig)
        else:
            if not still_same(target):
                return GONE
            os.kill(pid, sig)
    except ProcessLookupError:
        return GONE
    except PermissionError:
        return DENIED
    return SENT


def send_group(pgid, sig, guard, leader):
    """Signal process group pgid, led by the member `leader`, if the guard allows.

    The one signal not bound to a pidfd: it is sent only while the leader is
    verified to be the recorded process, and the kernel does not reuse a pid
    that still names a live process or group. Returns SENT, GONE or DENIED.
    """
    if pgid != leader.proc.pid or not guard.allows_group(pgid):
        raise ValueError(f"refusing to signal process group {pgid}")
    if send(leader, 0, guard) != SENT:
        return GONE
    try:
        _killpg(pgid, sig)
    except ProcessLookupError:
        return GONE
    except PermissionError:
        return DENIED
    return SENT


_libc_killpg = None


def _killpg(pgid, sig):
    """killpg(2) without holding the GIL where ctypes allows.

    os.killpg holds the GIL for the whole call, and the kernel may run the
    woken members' exits inside it: 180 ms for a 1,000-member group on two
    cores, during which an asyncio loop (even with the call in a worker
    thread) cannot run. A ctypes call releases the GIL.
    """
    global _libc_killpg
    if _libc_killpg is None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.killpg
            fn.argtypes = (ctypes.c_int, ctypes.c_int)
            fn.restype = ctypes.c_int

            def call(pgid, sig):
                if fn(pgid, sig) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, os.strerror(code))  # ESRCH/EPERM become their subclasses

            _libc_killpg = call
        except (ImportError, OSError, AttributeError):
            _libc_killpg = os.killpg
    _libc_killpg(pgid, sig)


def reap_zombie_child(pid):
    """Reap pid, which the caller just saw as its own zombie child (right start time).

    Nobody else can wait for the caller's child, and its pid cannot be reused
    before it is reaped, so no re-check is needed. Returns its returncode or None.
    """
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status) if got else None


def reap_if_own_child(target, me):
    """Reap target if it is the caller's own exited child. Returns its returncode or None.

    Only ever waits for that one process: by pidfd where held, else by a pid that
    is still our unreaped child (which the kernel cannot give to anyone else).
    """
    try:
        if target.pidfd is not None and hasattr(os, "P_PIDFD"):
            res = os.waitid(os.P_PIDFD, target.pidfd, os.WEXITED | os.WNOHANG)
            if res is None:
                return None
            return -res.si_status if res.si_code in (os.CLD_KILLED, os.CLD_DUMPED) else res.si_status
        try:
            now = _binding.proc(target.proc.pid)
        except NoSuchProcess:
            return None
        if now.ppid != me or now.start_time != target.proc.start_time or not now.is_zombie:
            return None
        pid, status = os.waitpid(target.proc.pid, os.WNOHANG)
        if pid == 0:
            return None
        return os.waitstatus_to_exitcode(status)
    except ChildProcessError:
        return None  # not ours, or someone else reaped it
