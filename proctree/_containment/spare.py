"""A few file descriptors held back so that ending a failed start never fails for want of one.

When a start fails because the process ran out of descriptors (EMFILE, or the
system did: ENFILE), ending what the keeper already started needs descriptors
too: a /proc walk, cgroup.kill. Without them the keeper would be killed and
its command left to init. spawn() holds a few descriptors open (on /dev/null,
close-on-exec) and hands them back for that one retry, the way servers keep a
spare descriptor to answer accept()'s EMFILE.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable

TYPE_CHECKING = False  # typing costs import time (a start loads this module); type checkers take this as True
if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")

# A /proc walk holds two at a time (the directory and one stat file); cgroup.kill one more.
SIZE = 4
_SHORT = (errno.EMFILE, errno.ENFILE)

_lock = threading.Lock()
_held: list[int] = []


def _after_fork_in_child() -> None:
    """A lock another thread held at the fork would never be released in the child (its spares are its own)."""
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def hold() -> None:
    """Top the spare descriptors up to SIZE (as many as can be had: never raises)."""
    with _lock:
        while len(_held) < SIZE:
            try:
                _held.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                return


def retrying(action: Callable[[], T]) -> T:
    """action(); if it fails for want of descriptors, once more with the spare ones given back."""
    try:
        return action()
    except OSError as exc:
        if exc.errno not in _SHORT:
            raise
    with _lock:
        given = list(_held)
        _held.clear()
        for fd in given:
            try:
                os.close(fd)
            except OSError:
                pass
    try:
        return action()
    finally:
        hold()
