"""Event-driven waiting for processes to end: one mechanism per platform, same interface.

Laid out like trio's _subprocess_platform: the portable fallback first, then
the real mechanism for each OS, and make_waiter() picks one. Every waiter is a
bag of Targets with:

    watch(target)     start watching (False: it is already gone)
    ready()           targets that ended since the last call; never blocks
    fileno()          an fd that becomes readable when ready() has news, or None
    poll_interval()   how soon ready() must be called again without an event
                      (None when every target is watched by events)
    close()

A zombie counts as ended. A waiter never signals anything and never reaps.
"""

from __future__ import annotations

import os
import select
import sys
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import AccessDenied, NoSuchProcess
from .._table import binding as _binding

if TYPE_CHECKING:
    from .signals import Target

# Targets without an event source are re-checked this often: quickly at first,
# then backing off, so a slow member costs little CPU.
POLL_FIRST = 0.001
POLL_MAX = 0.02


def ended_by_reading(target: Target) -> bool:
    """True if target's process is gone or a zombie, by reading it (fallback)."""
    pid = target.proc.pid
    try:
        now = _binding.proc(pid)
    except NoSuchProcess:
        return True
    except AccessDenied:
        return False  # unknown is not dead
    if now.start_time != target.proc.start_time:
        return True
    if not now.is_zombie:
        return False
    # A thread-group leader that exited shows Z while other threads still run.
    try:
        return len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return True


class Waiter(Protocol):
    """What every waiter offers (see the module docstring)."""

    def watch(self, target: Target) -> bool: ...

    def ready(self) -> list[Target]: ...

    def fileno(self) -> int | None: ...

    def poll_interval(self) -> float | None: ...

    def close(self) -> None: ...


class PollingWaiter:
    """Fallback: re-read each target, backing off from POLL_FIRST to POLL_MAX."""

    def __init__(self):
        self._targets = []
        self._interval = POLL_FIRST

    def watch(self, target):
        if ended_by_reading(target):
            return False
        self._targets.append(target)
        self._interval = POLL_FIRST
        return True

    def ready(self):
        ended = [t for t in self._targets if ended_by_reading(t)]
        if ended:
            gone = {id(t) for t in ended}
            self._targets = [t for t in self._targets if id(t) not in gone]
        self._interval = min(self._interval * 2, POLL_MAX)
        return ended

    def fileno(self):
        return None

    def poll_interval(self):
        return self._interval if self._targets else None

    def __len__(self):
        return len(self._targets)

    def close(self):
        self._targets = []


if sys.platform.startswith("linux"):

    class PidfdWaiter:
        """Linux: every target's pidfd in one epoll set, which is itself pollable.

        A pidfd turns readable when its process has exited (zombie or reaped);
        targets without a pidfd go to a PollingWaiter alongside.
        """

        def __init__(self):
            self._ep = select.epoll()
            self._by_fd = {}
            self._fallback = PollingWaiter()

        def watch(self, target):
            if target.pidfd is None:
                return self._fallback.watch(target)
            self._ep.register(target.pidfd, select.EPOLLIN)
            self._by_fd[target.pidfd] = target
            return True

        def ready(self):
            ended = []
            while self._by_fd:
                events = self._ep.poll(0, 256)
                if not events:
                    break
                for fd, _ in events:
                    t = self._by_fd.pop(fd, None)
                    if t is not None:
                        self._ep.unregister(fd)
                        ended.append(t)
            if len(self._fallback):
                ended.extend(self._fallback.ready())
            return ended

        def fileno(self):
            return self._ep.fileno()

        def poll_interval(self):
            return self._fallback.poll_interval()

        def __len__(self):
            return len(self._by_fd) + len(self._fallback)

        def close(self):
            self._ep.close()
            self._by_fd = {}
            self._fallback.close()


# The kqueue names exist on macOS and the BSDs only; this machine's type
# checker sees Linux's select module, so they are reached through an Any.
_kq_api: Any = select


class KqueueWaiter:
    """macOS/BSD: EVFILT_PROC NOTE_EXIT per pid in one kqueue, which is itself pollable.

    kqueue watches a pid, not a handle: we register first and check the start
    time after, so the registration is known to be for the recorded process.
    """

    def __init__(self):
        self._kq = _kq_api.kqueue()
        self._by_pid = {}
        self._fallback = PollingWaiter()

    def _event(self, pid, flags):
        return _kq_api.kevent(pid, filter=_kq_api.KQ_FILTER_PROC, flags=flags, fflags=_kq_api.KQ_NOTE_EXIT)

    def watch(self, target):
        pid = target.proc.pid
        try:
            self._kq.control([self._event(pid, _kq_api.KQ_EV_ADD | _kq_api.KQ_EV_ONESHOT)], 0, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return self._fallback.watch(target)
        if ended_by_reading(target):
            try:
                self._kq.control([self._event(pid, _kq_api.KQ_EV_DELETE)], 0, 0)
            except OSError:
                pass
            return False
        self._by_pid[pid] = target
        return True

    def ready(self):
        ended = []
        while self._by_pid:
            events = self._kq.control(None, 256, 0)
            if not events:
                break
            for ev in events:
                t = self._by_pid.pop(ev.ident, None)
                if t is not None:
                    ended.append(t)
        if len(self._fallback):
            ended.extend(self._fallback.ready())
        return ended

    def fileno(self):
        return self._kq.fileno()

    def poll_interval(self):
        return self._fallback.poll_interval()

    def __len__(self):
        return len(self._by_pid) + len(self._fallback)

    def close(self):
        self._kq.close()
        self._by_pid = {}
        self._fallback.close()


def make_waiter(use_pidfd: bool) -> Waiter:
    """The best waiter for this platform (use_pidfd: the targets will carry pidfds)."""
    if sys.platform.startswith("linux") and use_pidfd and hasattr(select, "epoll"):
        return PidfdWaiter()
    if sys.platform == "darwin" and hasattr(select, "kqueue"):
        return KqueueWaiter()
    return PollingWaiter()
