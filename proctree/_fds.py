"""Waiting on file descriptors with no limit on their numbers; keeping held ones off fds 0-2.

select() cannot take a descriptor numbered FD_SETSIZE (1024) or above, and a
process that holds many trees (a supervisor with hundreds of services, each
with its pipes, pidfds and pty) gets there. poll() has no such limit, so every
wait in proctree goes through here; select() is the fallback only where poll()
is missing. A closed descriptor counts as ready (poll's POLLNVAL), so callers
find out on their next read instead of getting an exception here.
"""

from __future__ import annotations

import fcntl
import math
import os
import select
from collections.abc import Sequence

_IN = getattr(select, "POLLIN", 1) | getattr(select, "POLLPRI", 2)
_OUT = getattr(select, "POLLOUT", 4)
_MAX_MS = 2**31 - 1


def wait(
    readers: Sequence[int], writers: Sequence[int] = (), timeout: float | None = None
) -> tuple[list[int], list[int]]:
    """(readable, writable): the fds ready within timeout seconds (None: no limit; 0: just look).

    Readable includes end of file, hang-up and error; with no fds at all it
    sleeps for timeout.
    """
    if not hasattr(select, "poll"):
        r, w, _ = select.select(list(readers), list(writers), [], timeout)
        return r, w
    poller = select.poll()
    for fd in set(readers) | set(writers):
        poller.register(fd, (_IN if fd in readers else 0) | (_OUT if fd in writers else 0))
    # poll() takes an int of milliseconds: a longer wait (a grace of years) is a wait without limit.
    ms = None if timeout is None or timeout * 1000 >= _MAX_MS else max(0, math.ceil(timeout * 1000))
    events = poller.poll(ms)
    reading, writing = set(readers), set(writers)
    out_r = [fd for fd, ev in events if fd in reading and ev & ~_OUT]
    out_w = [fd for fd, ev in events if fd in writing and ev & ~_IN]
    return out_r, out_w


def readable(fds: Sequence[int], timeout: float | None = None) -> list[int]:
    """The fds among fds readable (or at end of file, hung up, closed) within timeout seconds."""
    return wait(fds, (), timeout)[0]


def above_stdio(fd: int) -> int:
    """fd itself if it is above 2, else a close-on-exec copy above 2 (fd is closed).

    A caller that closed some of fds 0-2 gets those numbers back from the
    next open, pipe or pidfd_open. One that proctree holds there is lost when
    the caller reopens or redirects its std stream onto that number (dup2
    closes it silently), and closing it later closes the caller's stream.
    """
    if fd > 2:
        return fd
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(fd)
