"""The keeper's status pipe as the owner reads it: whole lines, a deadline, a stop, and a close that waits for its watchers.

The Tree holds one and reads it under its own lock. The pipe's fd number must
stay ours while an event loop watches it (wait_async() registers it with
add_reader): close() then only marks it, and the last watcher closes it.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from .. import _fds
from .keeperproc import _close_fds

if TYPE_CHECKING:
    from .stopflag import _Stop


class StatusChannel:
    """Status lines from one keeper (see protocol.py); fd is None once closed."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd
        self.eof = False  # the keeper closed its end: every line it wrote has been read
        self._buf = b""
        self._watchers = 0  # wait_async() calls whose loop watches fd
        self._closing: list[int] = []  # closed while watched: closed for real by the last watcher

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

    def watch(self) -> None:
        """An event loop starts watching fd: its number stays ours until unwatch()."""
        self._watchers += 1

    def unwatch(self) -> None:
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
            try:
                os.close(fd)
            except OSError:
                pass
