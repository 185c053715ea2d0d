"""A service's output on its way to listeners: every row once, coalesced, and its pipe held when asked.

Rows wait here until output_interval has passed since the first of them,
or until as many as the ring holds (or its max_chars) wait, then go out in
one output event: listeners get every row, whatever the ring keeps for
read(since=...). hold() stops reading the pipe (backpressure: the service
then blocks in its write); read_on() reads it regardless, for a tree being
ended. Nothing here signals or starts anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .logring import LogRing, Row
from .treeio import PipeReader


class OutputFeed:
    """One service's pending output rows, sent through send(rows) in order."""

    def __init__(self, ring: LogRing, interval: float, send: Callable[[tuple[Row, ...]], None]) -> None:
        self.ring = ring
        self.interval = interval
        self.send = send
        self.reader: PipeReader | None = None  # the current run's pipe, while it is read
        self.held = False  # the host asked to stop reading the pipe (its consumer is behind)
        self._pending: list[Row] = []
        self._chars = 0
        self._handle: asyncio.TimerHandle | None = None

    def add(self, rows: list[Row]) -> None:
        """Rows read from the pipe (or the supervisor's own): sent within interval, or now if many wait."""
        if not rows:
            return
        self._pending.extend(rows)
        self._chars += sum(len(r.text) for r in rows)
        if len(self._pending) >= self.ring.max_rows or self._chars >= self.ring.max_chars:
            self.flush()  # a burst: sent now, so that what waits to be sent stays bounded
        elif self._handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self._handle = loop.call_later(self.interval, self.flush)

    def flush(self) -> None:
        """Send what waits, now."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not self._pending:
            return
        rows = tuple(self._pending)
        self._pending = []
        self._chars = 0
        self.send(rows)

    def attach(self, reader: PipeReader | None) -> None:
        """The pipe of a new run (or None once it is closed); a hold carries over to it."""
        self.reader = reader
        if reader is not None and self.held:
            reader.pause_reading()

    def hold(self, held: bool) -> None:
        """Stop (True) or go on (False) reading the pipe; a held service blocks once its pipe is full."""
        self.held = held
        reader = self.reader
        if reader is None or reader.is_closing():
            return
        if held:
            reader.pause_reading()
        else:
            reader.resume_reading()

    def read_on(self) -> None:
        """Read the pipe whatever the hold: the tree is ending, and its last output must not be stuck."""
        reader = self.reader
        if reader is not None and not reader.is_closing() and not reader.is_reading():
            reader.resume_reading()
