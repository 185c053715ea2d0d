"""Event-driven waiting for the teardown's targets to end: exit events where the OS has them, else polling.

The events are pidexit.py's (the one place that knows how an exit is waited
for per OS: epoll over pidfds on Linux, kqueue NOTE_EXIT on macOS); this
module adds what a teardown needs on top, Targets and a polling fallback with
backoff, and make_waiter() picks one. Every waiter is a bag of Targets with:

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
from typing import TYPE_CHECKING, Protocol

from .._errors import AccessDenied, NoSuchProcess
from .._table import binding as _binding
from . import pidexit as _pidexit

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


class EventWaiter:
    """Exit events in one pollable kernel object (pidexit.ExitEvents), which is this waiter's fileno().

    Linux: each target's pidfd in an epoll set (a pidfd turns readable once
    its process has exited, zombie or reaped). macOS: kqueue NOTE_EXIT per
    pid, registered first and the start time checked after, so the
    registration is known to be for the recorded process. Targets without
    either go to a PollingWaiter alongside.
    """

    def __init__(self):
        self._events = _pidexit.ExitEvents()
        self._by_pid = self._events.by_pid
        self._add_pidfd = self._events.add_pidfd  # bound once: a teardown's hot path, once per member
        self._by_key = {}  # pidfd (epoll) or pid (kqueue) -> its target
        self._fallback = PollingWaiter()

    def watch(self, target):
        pidfd = target.pidfd
        if self._by_pid:
            return self._watch_pid(target)
        if pidfd is None:
            return self._fallback.watch(target)
        self._add_pidfd(pidfd)
        self._by_key[pidfd] = target
        return True

    def _watch_pid(self, target):
        pid = target.proc.pid
        try:
            self._events.add_pid(pid)
        except ProcessLookupError:
            return False
        except OSError:
            return self._fallback.watch(target)
        if ended_by_reading(target):
            self._events.remove_pid(pid)
            return False
        self._by_key[pid] = target
        return True

    def ready(self):
        ended: list[Target] = []
        events, by_key = self._events, self._by_key  # bound once: a teardown's hot path, once per member
        while by_key:
            exited, _ = events.poll(0)
            if not exited:
                break
            found = [key for key in exited if key in by_key]
            ended.extend(by_key.pop(key) for key in found)
            if not self._by_pid:  # a pidfd stays readable (kqueue's events are one-shot)
                events.remove_pidfds(found)
        if len(self._fallback):
            ended.extend(self._fallback.ready())
        return ended

    def fileno(self):
        return self._events.fileno()

    def poll_interval(self):
        return self._fallback.poll_interval()

    def __len__(self):
        return len(self._by_key) + len(self._fallback)

    def close(self):
        self._events.close()
        self._by_key = {}
        self._fallback.close()


def make_waiter(use_pidfd: bool) -> Waiter:
    """The best waiter for this platform (use_pidfd: the targets will carry pidfds)."""
    events = _pidexit.exit_events()
    if events == "kqueue" or (events == "epoll" and use_pidfd and _pidexit.LINUX):
        return EventWaiter()
    return PollingWaiter()
