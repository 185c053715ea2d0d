"""A process's exit, one way per OS: the only place in proctree that knows how a pid's exit is waited for.

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
event loop's reader), call_when_child_exited() (the thread), ExitEvents
(the exits of many processes in one epoll set or kqueue, itself pollable:
the teardown's exitwait.py builds its waiters on it) and ExitSet (that and
a wake-up pipe, for one thread to sleep on: containment's keeperwatch.py).
child_exited() is the look that needs no handle.

Must never: signal anything, or reap anything (every caller reaps its own
children, or leaves them to their owners).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import sys
from collections.abc import Callable, Iterable, Sequence

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
_EPOLLIN = getattr(select, "EPOLLIN", 1)  # Linux only, like epoll itself
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

    # Imported here, not with the module: terminate_tree loads this module and starts no thread (threading costs
    # it about 0.6 ms); whoever calls this (the uvloop drop-in) has threading loaded already, as asyncio does.
    import threading

    threading.Thread(target=run, name=name, daemon=True).start()


# -- many exits as events in one kernel object --------------------------------
def exit_events() -> str | None:
    """Which kernel object reports many exits at once here: "kqueue" (macOS, by pid), "epoll" (Linux, by pidfd), or
    None (the caller polls, or looks at the table). Asked each time, so a test can take select.epoll away."""
    if DARWIN and hasattr(select, "kqueue"):
        return "kqueue"
    return "epoll" if hasattr(select, "epoll") else None


class ExitEvents:
    """The exits of many processes as events in one pollable kernel object, and plain readers (a wake-up pipe) beside.

    epoll (Linux): a pidfd per process, level-triggered, so one added while
    another thread sleeps in poll() is seen at once. kqueue (macOS):
    EVFILT_PROC NOTE_EXIT per pid, one-shot; it names a pid, so the caller
    registers first and checks afterwards that the pid is still the process
    meant. by_pid says which: pids (kqueue) or pidfds (epoll) go in and come
    out of poll(). Made only where exit_events() is not None; raises OSError
    without descriptors to spare. fileno() is readable while an event is
    pending (for an outer poll or an event loop). Thread-safe as epoll and
    kqueue are; the pidfds stay the caller's to close.
    """

    def __init__(self) -> None:
        self.by_pid = exit_events() == "kqueue"
        self._readers: set[int] = set()
        self._poller: Any
        if self.by_pid:
            self._poller = _kq_api.kqueue()
        elif hasattr(select, "epoll"):
            self._poller = select.epoll()
        else:
            raise OSError(errno.ENOSYS, "no epoll or kqueue here")

    def add_reader(self, fd: int) -> None:
        """Report fd among poll()'s readers while it is readable."""
        self._readers.add(fd)
        if self.by_pid:
            self._poller.control([_kq_api.kevent(fd, filter=_KQ_READ, flags=_kq_api.KQ_EV_ADD)], 0, 0)
        else:
            self._poller.register(fd, _EPOLLIN)

    def add_pidfd(self, pidfd: int) -> None:
        """Report pidfd once its process has exited (epoll only; raises OSError as epoll_ctl does)."""
        self._poller.register(pidfd, _EPOLLIN)

    def remove_pidfd(self, pidfd: int) -> None:
        """Stop reporting pidfd, before it is closed (a forked child's copy keeps the file, and its registration,
        alive). Never raises."""
        self.remove_pidfds((pidfd,))

    def remove_pidfds(self, pidfds: Iterable[int]) -> None:
        """remove_pidfd() for each of pidfds, in one call (a teardown's hot path: once per member). Never raises."""
        unregister = self._poller.unregister
        for fd in pidfds:
            try:
                unregister(fd)
            except (OSError, ValueError):
                pass

    def add_pid(self, pid: int) -> None:
        """Report pid once it exits (kqueue only). Raises ProcessLookupError if it exited already, OSError if it
        cannot be watched."""
        self._poller.control([self._proc_event(pid, _kq_api.KQ_EV_ADD | _kq_api.KQ_EV_ONESHOT)], 0, 0)

    def remove_pid(self, pid: int) -> None:
        """Stop reporting pid (kqueue only). Never raises."""
        with contextlib.suppress(OSError):
            self._poller.control([self._proc_event(pid, _kq_api.KQ_EV_DELETE)], 0, 0)

    @staticmethod
    def _proc_event(pid: int, flags: int) -> Any:
        return _kq_api.kevent(pid, filter=_kq_api.KQ_FILTER_PROC, flags=flags, fflags=_kq_api.KQ_NOTE_EXIT)

    def poll(self, timeout: float | None, max_events: int = 256) -> tuple[list[int], list[int]]:
        """Sleep until an event or timeout seconds (None: no limit; 0: a look); returns (the pids or pidfds that
        exited, the readers that are readable), at most max_events in all (the rest wait for the next call)."""
        if self.by_pid:
            events = self._poller.control(None, max_events, timeout)
            readers = [ev.ident for ev in events if ev.filter == _KQ_READ]
            return [ev.ident for ev in events if ev.filter != _KQ_READ], readers
        ready = [fd for fd, _ in self._poller.poll(-1 if timeout is None else timeout, max_events)]
        if not self._readers:
            return ready, []
        return [fd for fd in ready if fd not in self._readers], [fd for fd in ready if fd in self._readers]

    def fileno(self) -> int:
        """The epoll's or kqueue's own descriptor (raises ValueError once closed)."""
        return int(self._poller.fileno())

    def close(self) -> None:
        """Close the epoll or kqueue (not the pidfds or readers, which are the caller's). Never raises."""
        self._poller.close()


# -- many pids, one sleeping thread -------------------------------------------
class ExitSet:
    """The exits of many pids and a wake-up pipe, for one thread to sleep on.

    Linux: their pidfds in ExitEvents' epoll set (level-triggered: a pidfd
    added while the thread sleeps is seen at once, without a wake). macOS:
    its kqueue with NOTE_EXIT per pid (a pid that exited before its
    registration is found only when woken). Elsewhere: poll() over the
    pidfds (no limit on descriptor numbers). A pid without a pidfd or an
    event is the caller's to look up, at most POLL_FALLBACK apart.
    Raises OSError when made without descriptors to spare; thread-safe as
    epoll and kqueue are (add and remove from any thread, wait from one).
    """

    def __init__(self, pidfds: Sequence[int] = (), pids: Sequence[int] = ()) -> None:
        self._events: ExitEvents | None = None
        self.wake_r = self.wake_w = -1
        try:
            r, w = os.pipe()
            self.wake_r, self.wake_w = _fds.above_stdio(r), _fds.above_stdio(w)
            os.set_blocking(self.wake_w, False)
            if exit_events() is not None:
                self._events = ExitEvents()
                self._events.add_reader(self.wake_r)
                for pid in pids if self._events.by_pid else ():
                    self.add(pid, None)
                for fd in () if self._events.by_pid else pidfds:
                    self._events.add_pidfd(fd)
        except BaseException:
            self.close()
            raise

    def _by_pid(self) -> bool:
        return self._events is not None and self._events.by_pid

    @property
    def sees_new_unwoken(self) -> bool:
        """A pid added while the thread sleeps is seen then: its exit wakes the thread (epoll) or its wait returns
        within POLL_FALLBACK of the wake-up's timeout (poll); only kqueue needs a wake for one that exited before."""
        return not self._by_pid()

    def add(self, pid: int, pidfd: int | None) -> bool:
        """Watch pid (pidfd: a pidfd on it, or None); True if the sleeping thread sees it without a wake."""
        events = self._events
        if events is not None and events.by_pid:
            with contextlib.suppress(OSError):  # it exited already: the wake-up's look at the table finds it
                events.add_pid(pid)
            return False
        if events is not None and pidfd is not None:
            events.add_pidfd(pidfd)
            return True
        return False

    def remove(self, pidfd: int | None) -> None:
        """Stop watching the pidfd, before it is closed: no event of it is reported under a number a new descriptor
        may take (a forked child's copy keeps the file, and an epoll registration, alive)."""
        if pidfd is not None and self._events is not None and not self._events.by_pid:
            self._events.remove_pidfd(pidfd)

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
        events = self._events
        if events is not None and events.by_pid:
            exited_pids, readers = events.poll(timeout, 64)
            exited = set(exited_pids)
            woken = bool(readers)
            proven = [w for w in watched if w.pid in exited]
            # A pid added while the thread slept may have exited before its event was registered.
            maybe = [w for w in watched if w.pid not in exited] if woken else []
        else:
            if any(w.pidfd is None for w in watched):
                timeout = POLL_FALLBACK if timeout is None else min(timeout, POLL_FALLBACK)
            if events is not None:
                exited_fds, readers = events.poll(timeout, 1023)
                ready = {*exited_fds, *readers}
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
        if self._events is not None:
            with contextlib.suppress(ValueError):
                held.add(self._events.fileno())
        return held - {-1}

    def close(self) -> None:
        """Close the pipe and the epoll or kqueue (not the pidfds, which are the caller's)."""
        for fd in (self.wake_r, self.wake_w):
            if fd >= 0:
                close(fd)
        self.wake_r = self.wake_w = -1
        if self._events is not None:
            self._events.close()
        self._events = None
