"""Command cgroups made ahead of need, and removed after it, by a worker thread: a proctree.Popen started
or reaped on an event loop's thread makes no filesystem call there.

A mkdir or rmdir in cgroupfs is a syscall that can take milliseconds (it
waits on the cgroup mutex the whole machine shares). A start takes a
cgroup this thread made earlier (take(): a deque pop, no syscall) and wakes
it to make more once half are taken, so up to READY empty cgroups wait
below the holding tree; when none is ready (the holding tree's first start,
or a burst faster than the thread), the exec step makes it in the forked
child, as it does when a ready one went missing (an empty cgroup is anyone's
to remove: a reaper that cannot see our owner removes them). The async
drop-ins fill it on a worker thread before their first start (fill()). A command's
exit seen on a loop's thread (poll() reaping it) hands the rmdir here
(later()); elsewhere the rmdir stays inline, so wait() returns with the
cgroup gone. Everything here is one holding tree's (cgroups under another
are dropped): a new holding tree, or a forked child, starts afresh.

This module only makes empty cgroups below the holding tree's cgroup and runs
the cleanups it is handed; it never signals anything.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import threading
from collections.abc import Callable

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any
# How many made cgroups wait ready; refilled when a start takes one.
READY = 8

_ready: collections.deque[str] = collections.deque()
_jobs: collections.deque[tuple[Callable[..., Any], tuple[Any, ...]]] = collections.deque()
_wake = threading.Event()
_state: dict[str, Any] = {"thread": None, "parent": None, "name": None}
_local = threading.local()  # .hand: what this thread's start took (take(), empty_hand())
_making: set[str] = set()  # the cgroup being made now (a test that counts what is left tells them apart)


def on_loop_thread() -> bool:
    """True when the calling thread runs an event loop (a blocking call here would stall it).

    Read from asyncio's events module only if something imported it (a loop, uvloop's too, runs through it):
    importing asyncio here would cost a plain program's first Popen ~10 ms, inside the start.
    """
    events = sys.modules.get("asyncio.events")
    return events is not None and events._get_running_loop() is not None


def take(parent: str, name: Callable[[], str]) -> str | None:
    """A made, empty cgroup below parent (the holding tree's cgroup), or None; wakes the maker either way.

    name: makes a fresh path below parent (popenhold.new_cgroup_path), for the maker thread to use.
    """
    path = None
    hand = _hand()
    while True:
        try:
            candidate = _ready[0]
        except IndexError:
            break
        # In this thread's hand before it leaves the ready ones: an interrupt (Ctrl+C) anywhere from here
        # until the start holds it leaves it in one or the other, never lost (empty_hand()).
        hand.append(candidate)
        try:
            _ready.remove(candidate)
        except ValueError:  # another thread took it first
            hand.remove(candidate)
            continue
        if os.path.dirname(candidate) == parent:
            path = candidate
            break
        hand.remove(candidate)  # below an old holding tree: its end removes it
    if len(_ready) < READY // 2 or _state["parent"] != parent:
        # Woken for a batch, not for each start: each wake costs the start a GIL hand-over.
        _state["parent"], _state["name"] = parent, name
        _start()
        _wake.set()
    return path


def _hand() -> list[str]:
    hand: list[str] | None = getattr(_local, "hand", None)
    if hand is None:
        hand = _local.hand = []
    return hand


def empty_hand() -> list[str]:
    """What this thread took since its last empty_hand(), forgotten here; still ready ones leave the ready ones.

    A start calls it when it ends, however it ends; after an interrupt it
    removes what it returns that the start did not hold yet.
    """
    hand = _hand()
    taken = list(hand)
    hand.clear()
    for path in taken:
        with contextlib.suppress(ValueError):
            _ready.remove(path)
    return taken


def has_ready(parent: str) -> bool:
    """True when a made cgroup below parent is ready (no syscall)."""
    return any(os.path.dirname(path) == parent for path in _ready)


def made_ahead(path: str) -> bool:
    """True when path is a cgroup made (or being made) ahead of need, which no command has taken."""
    return path in _making or path in _ready


def later(fn: Callable[..., Any], *args: Any) -> None:
    """Run fn(*args) on the worker thread (a cleanup that must not run on an event loop's thread)."""
    _jobs.append((fn, args))
    _start()
    _wake.set()


def fill(parent: str, name: Callable[[], str]) -> None:
    """Make the ready cgroups now, on the calling thread (a worker thread the async drop-ins await)."""
    _state["parent"], _state["name"] = parent, name
    _make_ready()


def _start() -> None:
    thread = _state["thread"]
    if thread is None or not thread.is_alive():
        thread = threading.Thread(target=_work, name="proctree-cgroup-pool", daemon=True)
        _state["thread"] = thread
        thread.start()


def _make_ready() -> None:
    parent, name = _state["parent"], _state["name"]
    while parent is not None and len(_ready) < READY:
        path = name()
        _making.add(path)
        try:
            os.mkdir(path)
        except OSError:
            _making.discard(path)
            return  # the holding tree is gone (a new one will ask), or no cgroup can be made: a start makes its own
        if parent != _state["parent"]:
            _making.discard(path)
            with contextlib.suppress(OSError):
                os.rmdir(path)
            return
        _ready.append(path)
        _making.discard(path)


def _work() -> None:
    while True:
        _wake.wait()
        _wake.clear()
        while _jobs:
            fn, args = _jobs.popleft()
            with contextlib.suppress(Exception):  # a cleanup's failure is its own; the pool carries on
                fn(*args)
        _make_ready()


def drop_all() -> None:
    """Forget the made cgroups (a new holding tree; the old one's end removes them with its cgroup)."""
    _ready.clear()


def _after_fork_in_child() -> None:
    # The worker thread is the parent's; the made cgroups are below the parent's holding tree.
    global _wake, _local
    _local = threading.local()
    _ready.clear()
    _making.clear()
    _jobs.clear()
    _wake = threading.Event()
    _state.update(thread=None, parent=None, name=None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
