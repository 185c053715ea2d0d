"""A process's exit, one way per OS: the only place in containment that knows how a pid's exit is waited for.

Laid out after trio's _subprocess_platform (one wait_child_exiting per OS):

- Linux: a pidfd. It names the process, not the pid, and turns readable
  once that process has exited (a zombie, or reaped), so it is a handle to
  poll, to block on, or to put in an event loop's readers or an epoll set.
- macOS: kqueue's EVFILT_PROC NOTE_EXIT. It names a pid, so it is
  registered before anything is checked, and it fails at once for a pid
  that exited before it (the caller then looks at the table).
- Elsewhere, and where no pidfd can be had (an old kernel, no descriptor
  to spare, PROCTREE_NO_PIDFD): waitid(WNOWAIT) on our own child in a
  thread, or a look at the process table.

The handle of (a) is open_pidfd(), optionally pinned to a start time; (b)
are its forms: exited() (a look), wait() (blocking), add_exit_reader() (an
event loop's reader), call_when_child_exited() (the thread), and ExitSet
(many pids and a wake-up pipe, for one thread to sleep on). child_exited()
is the look that needs no handle.

Must never: signal anything, or reap anything (every caller reaps its own
children, or leaves them to their owners).
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
from collections.abc import Callable, Sequence

from .. import _fds
from .._errors import AccessDenied, NoSuchProcess
from .._table import binding as _binding
from . import signals as _signals

TYPE_CHECKING = False  # typing costs import time (a start loads this module); type checkers take this as True
if TYPE_CHECKING:
    import asyncio
    from typing import Any, Protocol, TypeVar

    class Watched(Protocol):
        """What ExitSet.wait sorts: a pid, and a pidfd on it or None."""

        @property
        def pid(self) -> int: ...

        @property
        def pidfd(self) -> int | None: ...

    W = TypeVar("W", bound=Watched)

LINUX = sys.platform.startswith("linux")
DARWIN = sys.platform == "darwin"
POLL_FALLBACK = 0.2  # seconds between looks at the table for a pid without an exit event
# The kqueue names exist on macOS and the BSDs only; this machine's type checker sees Linux's select module.
_kq_api: Any = select
_KQ_READ = getattr(select, "KQ_FILTER_READ", -1)
# waitid: Linux, and macOS only from Python 3.13.
_HAS_WAITID = hasattr(os, "waitid") and hasattr(os, "WNOWAIT")


# -- one pid ------------------------------------------------------------------
def open_pidfd(pid: int, start_time: int | None = None) -> int | None:
    """A pidfd on pid, above fds 0-2; None where there are none (not Linux, none to spare, PROCTREE_NO_PIDFD) or pid
    is gone.

    start_time: the pidfd is kept only if pid's start time, read after it was
    opened, is that one, so a reused pid is never taken for the process meant
    (an unreaped child of ours needs no pin: its pid is not reused before we
    reap it). Never raises.
    """
    if not LINUX:
        return None
    try:
        fd = _signals.open_pidfd(pid)
        if fd is None:
            return None
        fd = _fds.above_stdio(fd)  # held until it exits: never on a std fd
    except OSError:  # gone already, or no descriptor to spare: the caller falls back as without pidfds
        return None
    if start_time is not None and not _started_at(pid, start_time):
        close(fd)
        return None
    return fd


def _started_at(pid: int, start_time: int) -> bool:
    try:
        return _binding.proc(pid).start_time == start_time
    except Exception:  # noqa: BLE001 - gone, or unreadable: not provably the process meant
        return False


def exited(fd: int) -> bool:
    """The process of the pidfd fd has exited (or fd is closed): a look that never waits."""
    return bool(_fds.readable([fd], 0))


def wait(fd: int, timeout: float | None) -> bool:
    """Block until the process of the pidfd fd has exited (True) or timeout seconds passed (False; None: no limit)."""
    return bool(_fds.readable([fd], timeout))


def close(fd: int | None) -> None:
    """Close a pidfd (None: nothing). Never raises."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def child_exited(pid: int) -> bool:
    """Our child pid has exited (a zombie now), reaping nothing: waitid(WNOWAIT) where it exists, else the table.

    False where it cannot be told (unreadable): unknown is not exited.
    """
    if _HAS_WAITID:
        try:
            return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except OSError:  # not our child (reaped elsewhere): the table says whether the pid lives on
            pass
    try:
        return _binding.proc(pid).is_zombie
    except NoSuchProcess:
        return True
    except (AccessDenied, OSError):
        return False


def add_exit_reader(loop: asyncio.AbstractEventLoop, pid: int, callback: Callable[[], object]) -> bool:
    """Call callback() on loop, once, when the process pid exits; False where there is no pidfd (nothing added).

    The pidfd is out of the loop's readers and closed before callback runs.
    pid must be our unreaped child (not reused meanwhile) or the caller's to pin.
    """
    fd = open_pidfd(pid)
    if fd is None:
        return False

    def readable() -> None:
        loop.remove_reader(fd)
        os.close(fd)
        callback()

    loop.add_reader(fd, readable)
    return True


def call_when_child_exited(pid: int, callback: Callable[[], object], name: str) -> None:
    """Call callback(), from a daemon thread of that name, once our child pid has exited (or is not ours).

    The thread reaps nothing where waitid(WNOWAIT) exists; elsewhere (macOS
    before Python 3.13) callback is called at once, and must wait itself (a
    blocking waitpid, which reaps).
    """

    def run() -> None:
        if _HAS_WAITID:
            with contextlib.suppress(ChildProcessError):  # reaped elsewhere: exited all the same
                while True:
                    try:
                        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
                        break
                    except InterruptedError:  # pragma: no cover - PEP 475 retries; an old interpreter may not
                        continue
        callback()

    threading.Thread(target=run, name=name, daemon=True).start()


# -- many pids, one sleeping thread -------------------------------------------
class ExitSet:
    """The exits of many pids and a wake-up pipe, for one thread to sleep on.

    Linux: their pidfds in one epoll set (level-triggered: a pidfd added
    while the thread sleeps is seen at once, without a wake). macOS: a
    kqueue with NOTE_EXIT per pid (a pid that exited before its
    registration is found only when woken). Elsewhere: poll() over the
    pidfds (no limit on descriptor numbers). A pid without a pidfd or an
    event is the caller's to look up, at most POLL_FALLBACK apart.
    Raises OSError when made without descriptors to spare; thread-safe as
    epoll and kqueue are (add and remove from any thread, wait from one).
    """

    def __init__(self, pidfds: Sequence[int] = (), pids: Sequence[int] = ()) -> None:
        self._kq: Any = None
        self._ep: Any = None
        self.wake_r = self.wake_w = -1
        try:
            r, w = os.pipe()
            self.wake_r, self.wake_w = _fds.above_stdio(r), _fds.above_stdio(w)
            os.set_blocking(self.wake_w, False)
            if DARWIN:
                self._kq = _kq_api.kqueue()
                wake = _kq_api.kevent(self.wake_r, filter=_kq_api.KQ_FILTER_READ, flags=_kq_api.KQ_EV_ADD)
                self._kq.control([wake], 0, 0)
                for pid in pids:
                    self.add(pid, None)
            elif hasattr(select, "epoll"):
                self._ep = select.epoll()
                self._ep.register(self.wake_r, select.EPOLLIN)
                for fd in pidfds:
                    self._ep.register(fd, select.EPOLLIN)
        except BaseException:
            self.close()
            raise

    @property
    def sees_new_unwoken(self) -> bool:
        """A pid added while the thread sleeps is seen then: its exit wakes the thread (epoll) or its wait returns
        within POLL_FALLBACK of the wake-up's timeout (poll); only kqueue needs a wake for one that exited before."""
        return self._kq is None

    def add(self, pid: int, pidfd: int | None) -> bool:
        """Watch pid (pidfd: a pidfd on it, or None); True if the sleeping thread sees it without a wake."""
        if self._kq is not None:
            ev = _kq_api.kevent(
                pid,
                filter=_kq_api.KQ_FILTER_PROC,
                flags=_kq_api.KQ_EV_ADD | _kq_api.KQ_EV_ONESHOT,
                fflags=_kq_api.KQ_NOTE_EXIT,
            )
            with contextlib.suppress(OSError):  # it exited already: the wake-up's look at the table finds it
                self._kq.control([ev], 0, 0)
            return False
        if LINUX and self._ep is not None and pidfd is not None:
            self._ep.register(pidfd, select.EPOLLIN)
            return True
        return False

    def remove(self, pidfd: int | None) -> None:
        """Stop watching the pidfd, before it is closed: no event of it is reported under a number a new descriptor
        may take (a forked child's copy keeps the file, and an epoll registration, alive)."""
        if pidfd is not None and self._ep is not None:
            with contextlib.suppress(OSError, ValueError):
                self._ep.unregister(pidfd)

    def wake(self) -> None:
        """Wake the thread in wait(): from any thread; never raises."""
        fd = self.wake_w
        if fd >= 0:
            with contextlib.suppress(OSError):  # full (a wake-up is pending anyway) or closed
                os.write(fd, b"x")

    def wait(self, watched: Sequence[W], timeout: float | None) -> tuple[list[W], list[W]]:
        """Sleep until one of watched may have exited, a wake(), or timeout (None: no limit) passed.

        Returns (those an event proved exited, those to look up in the table).
        A pidfd or a kqueue event is proof even after the pid was reaped and
        reused; a look at the table is not, so it is asked for only where
        there is no event.
        """
        if self._kq is not None:
            events = self._kq.control(None, 64, timeout)
            exited = {ev.ident for ev in events if ev.ident != self.wake_r or ev.filter != _KQ_READ}
            woken = any(ev.ident == self.wake_r and ev.filter == _KQ_READ for ev in events)
            proven = [w for w in watched if w.pid in exited]
            # A pid added while the thread slept may have exited before its event was registered.
            maybe = [w for w in watched if w.pid not in exited] if woken else []
        else:
            if any(w.pidfd is None for w in watched):
                timeout = POLL_FALLBACK if timeout is None else min(timeout, POLL_FALLBACK)
            if self._ep is not None:
                ready = {fd for fd, _ in self._ep.poll(-1 if timeout is None else timeout)}
            else:
                fds = [self.wake_r] + [w.pidfd for w in watched if w.pidfd is not None]
                ready = set(_fds.readable(fds, timeout))
            woken = self.wake_r in ready
            proven = [w for w in watched if w.pidfd is not None and w.pidfd in ready]
            maybe = [w for w in watched if w.pidfd is None]
        if woken:
            with contextlib.suppress(OSError):
                os.read(self.wake_r, 4096)
        return proven, maybe

    def own_fds(self) -> set[int]:
        """The descriptors this set holds (its pipe, its epoll or kqueue), not the pidfds it watches."""
        held = {self.wake_r, self.wake_w}
        for poller in (self._ep, self._kq):
            if poller is not None:
                with contextlib.suppress(ValueError):
                    held.add(poller.fileno())
        return held - {-1}

    def close(self) -> None:
        """Close the pipe and the epoll or kqueue (not the pidfds, which are the caller's)."""
        for fd in (self.wake_r, self.wake_w):
            if fd >= 0:
                close(fd)
        self.wake_r = self.wake_w = -1
        for poller in (self._kq, self._ep):
            if poller is not None:
                poller.close()
        self._kq = self._ep = None
