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

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Callable, Iterable

from .. import _fds
from .._errors import AccessDenied, NoSuchProcess
from .._table import binding as _binding
from .._table.model import Proc

TYPE_CHECKING = False  # typing costs import time (a start loads this module); type checkers take this as True
if TYPE_CHECKING:
    from typing import Literal

# What a send did: the signal went out, the process was gone, or it is not ours to signal.
if TYPE_CHECKING:
    Outcome = Literal["sent", "gone", "denied"]
else:
    Outcome = str
SENT: Outcome = "sent"
GONE: Outcome = "gone"
DENIED: Outcome = "denied"

# Tests and debugging: PROCTREE_NO_PIDFD (set, and not "0") forces the start-time fallback.
_pidfd_ok: bool | None = None


def pidfds_available() -> bool:
    """True when pidfd_open and pidfd_send_signal work here (probed once): the one pidfd decision."""
    global _pidfd_ok
    if _pidfd_ok is None:
        _pidfd_ok = False
        if (
            os.environ.get("PROCTREE_NO_PIDFD", "0") in ("", "0")
            and hasattr(os, "pidfd_open")
            and hasattr(signal, "pidfd_send_signal")
        ):
            # pidfd_send_signal (5.1) predates pidfd_open (5.3): one probe covers both.
            try:
                os.close(os.pidfd_open(os.getpid()))
                _pidfd_ok = True
            except OSError:
                pass
    return _pidfd_ok


# pidfd_open failures that mean "none to be had now", not "no such process": out of
# descriptors, no support, or (EPERM) a seccomp filter refusing it.
_NO_PIDFD_NOW = (errno.EMFILE, errno.ENFILE, errno.ENOSYS, errno.EINVAL, errno.EPERM)


def open_pidfd(pid: int, use_pidfd: bool = True) -> int | None:
    """A pidfd on pid, or None where pidfds are not used or none can be had now.

    Raises ProcessLookupError if pid is gone. use_pidfd False (a caller's own
    decision, made once) or pidfds_available() False: None without a call.
    """
    if not hasattr(os, "pidfd_open"):
        return None
    if not use_pidfd or not pidfds_available():
        return None
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_PIDFD_NOW:
            raise
        return None


def _ancestor_pids(pid: int) -> list[int]:
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

    def __init__(self, me: int | None = None, ancestors: Iterable[int] | None = None) -> None:
        self.me = os.getpid() if me is None else me
        if ancestors is None:
            ancestors = _ancestor_pids(self.me)
        self.protected = frozenset({0, 1, self.me, *ancestors})

    def allows(self, pid: int) -> bool:
        return pid > 1 and pid not in self.protected

    def protected_groups(self) -> set[int]:
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

    def allows_group(self, pgid: int) -> bool:
        return pgid > 1 and pgid not in self.protected_groups()


class Target:
    """One recorded process we may signal. pidfd is None in fallback mode."""

    __slots__ = ("proc", "pidfd")

    def __init__(self, proc: Proc, pidfd: int | None) -> None:
        self.proc = proc
        self.pidfd = pidfd

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def __repr__(self) -> str:
        return f"<Target {self.proc.pid} start {self.proc.start_time} pidfd {self.pidfd}>"


def open_target(proc: Proc, guard: Guard, use_pidfd: bool) -> Target | None:
    """A Target for proc, or None if that process is gone (its pid may be someone else's now).

    Raises AccessDenied if its identity cannot be checked, ValueError if the guard forbids it.
    """
    if not guard.allows(proc.pid):
        raise ValueError(f"refusing to signal protected pid {proc.pid}")
    try:
        fd = open_pidfd(proc.pid, use_pidfd)  # None: start-time checks instead
    except ProcessLookupError:
        return None
    # The pidfd names whatever held the pid when it was opened; the start time read
    # after it tells whether that is the process we recorded.
    now = _read_holding(proc.pid, fd)
    return _target_if(now is not None and now.start_time == proc.start_time, now, fd)


def hold(pid: int, guard: Guard, use_pidfd: bool) -> Target | None:
    """A Target for whatever process holds pid now (one read of the table), or None if it is gone or exiting.

    For a pid just listed by something that names processes (cgroup.procs):
    the pidfd is opened first, then the record read; if the process the
    pidfd names is still running after the read, the record is its own (its
    pid cannot have been reused while it runs). Raises AccessDenied if the
    record cannot be read, ValueError if the guard forbids the pid.
    """
    if not guard.allows(pid):
        raise ValueError(f"refusing to signal protected pid {pid}")
    try:
        fd = open_pidfd(pid, use_pidfd)
    except ProcessLookupError:
        return None
    now = _read_holding(pid, fd)
    # Exited since the pidfd was opened (perhaps before the read, which may then be another's):
    exited = fd is not None and _fds.readable([fd], 0)
    return _target_if(now is not None and not now.is_zombie and not exited, now, fd)


def _read_holding(pid: int, fd: int | None) -> Proc | None:
    """pid's record now, or None if there is none; fd (a pidfd on pid, or None) is closed if the read raises."""
    try:
        return _binding.proc(pid)
    except NoSuchProcess:
        return None
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise


def _target_if(ok: bool, now: Proc | None, fd: int | None) -> Target | None:
    """Target(now, fd) if ok (now then is the record), else None with fd closed."""
    if not ok or now is None:
        if fd is not None:
            os.close(fd)
        return None
    return Target(now, fd)


def still_same(target: Target) -> bool:
    """True/False whether target's process is still there (a zombie counts as there)."""
    try:
        now = _binding.proc(target.proc.pid)
    except NoSuchProcess:
        return False
    return now.start_time == target.proc.start_time


def send(target: Target, sig: int, guard: Guard) -> Outcome:
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


def send_group(pgid: int, sig: int, guard: Guard, leader: Target) -> Outcome:
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


_libc_killpg: Callable[[int, int], None] | None = None


def _killpg(pgid: int, sig: int) -> None:
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

            def call(pgid: int, sig: int) -> None:
                if fn(pgid, sig) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, os.strerror(code))  # ESRCH/EPERM become their subclasses

            _libc_killpg = call
        except (ImportError, OSError, AttributeError):
            _libc_killpg = os.killpg
    _libc_killpg(pgid, sig)
