"""The keeper's status pipe as the owner reads it: whole lines, a deadline, a stop, and a close that waits for its watchers.

The Tree holds one and reads it under its own lock. The pipe's fd number must
stay ours while an event loop watches it (wait_async() registers it with
add_reader): close() then only marks it, and the last watcher closes it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from .. import _fds
from .keeperproc import _close_fds

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

    from .stopflag import _Stop


class LoopWatch:
    """One event loop's reader on the channel's fd, shared by every wait_async() on that loop.

    add_reader would replace another waiter's callback: one reader per loop and
    fd, and every waiter awaits the same future (ready).
    """

    def __init__(self, loop: Any, fd: int, pump: Callable[[], bool]) -> None:
        self.loop, self.fd, self.waiters = loop, fd, 0
        self.ready = loop.create_future()
        self._pump = pump

    def check(self) -> None:
        """Read what has come (pump() says whether the command's status is known); set ready once it is."""
        if self._pump() and not self.ready.done():
            self.ready.set_result(None)


class StatusChannel:
    """Status lines from one keeper (see protocol.py); fd is None once closed."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd
        self.eof = False  # the keeper closed its end: every line it wrote has been read
        self._buf = b""
        self._watchers = 0  # wait_async() calls whose loop watches fd
        self._closing: list[int] = []  # closed while watched: closed for real by the last watcher
        self._loop_watches: dict[Any, LoopWatch] = {}

    def next_line(self, deadline: float, stop: _Stop | None = None) -> str | None:
        """The next line, None at EOF; TimeoutError once deadline (monotonic) has passed; _Stopped once stop is set."""
        while b"\n" not in self._buf:
            if self.eof:
                return None
            left = max(0.0, deadline - time.monotonic())  # 0: just look
            fd = self.fd
            assert fd is not None  # open until the Tree finishes, which holds the lock its readers hold
            ready = _fds.readable([fd] if stop is None else [fd, stop.fd], left)
            if stop is not None:
                stop.check()
            if not ready:
                raise TimeoutError
            data = os.read(fd, 4096)
            if not data:
                self.eof = True
                return None
            self._buf += data
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode()

    def loop_watch(self, loop: Any, pump: Callable[[], bool]) -> LoopWatch:
        """Watch fd from loop (under the reader's lock, fd open): its number stays ours until loop_unwatch()."""
        assert self.fd is not None
        self._watchers += 1
        watch = self._loop_watches.get(loop)
        if watch is None:
            watch = self._loop_watches[loop] = LoopWatch(loop, self.fd, pump)
            loop.add_reader(self.fd, watch.check)
        watch.waiters += 1
        return watch

    def loop_unwatch(self, watch: LoopWatch) -> None:
        """One waiter is done; the last one on a loop removes its reader, the last one of all closes a closed fd."""
        watch.waiters -= 1
        if not watch.waiters:
            watch.loop.remove_reader(watch.fd)
            del self._loop_watches[watch.loop]
        self._watchers -= 1
        if not self._watchers:
            _close_fds(self._closing)
            self._closing = []

    def close(self) -> None:
        """Close the pipe now, or (while watched) once the last watcher is done."""
        fd, self.fd = self.fd, None
        if fd is not None:
            if self._watchers:
                self._closing.append(fd)
            else:
                _close_fds((fd,))

    def drop(self) -> None:
        """Close at once, watched or not (the Tree is being collected: no loop can still watch it)."""
        fd, self.fd = self.fd, None
        if fd is not None:
            _close_fds((fd,))
