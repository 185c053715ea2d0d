"""The small asyncio pieces services and foreground commands share around one contained tree.

Reading a tree's merged output pipe with an asyncio reader, waiting for its
exit, and ending the reader once the tree is gone. Nothing here signals a
process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
from collections.abc import Awaitable, Callable
from typing import IO, Any

from .._containment.spawn import Tree
from .._errors import KeeperLost
from .._validate import signal_name

log = logging.getLogger("proctree.supervisor")

# How long a tree's pipe may stay open after the tree is gone before the reader is closed anyway.
EOF_PATIENCE = 2.0


# At most this much output is taken per wake-up of the loop: a service printing as fast as it can
# costs the loop a few milliseconds per read (about 5 us a row: 16 KiB of 40-byte rows is 2 ms),
# never asyncio's pipe transports' 256 KiB (tens of thousands of rows in one callback). Smaller
# reads cost CPU per line (8 KiB: about 1 us a row more in bench_supervisor.py).
READ_SIZE = 16384


class PipeReader:
    """Reads a pipe on the event loop (loop.add_reader), READ_SIZE bytes per wake-up, handing each chunk to feed.

    Pausable (pause_reading/resume_reading: the writer then blocks once the
    pipe is full); close() closes the pipe and resolves eof, as does the end
    of the file.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, pipe: IO[bytes], feed: Callable[[bytes], Any], eof: asyncio.Future[None]
    ) -> None:
        self._loop = loop
        self._pipe = pipe
        self._fd = pipe.fileno()
        self._feed = feed
        self.eof = eof
        self._reading = False
        self._closed = False
        os.set_blocking(self._fd, False)
        self.resume_reading()

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.close()
            return
        try:
            self._feed(data)
        except Exception:  # a consumer's bug must not close the pipe under a running command (SIGPIPE)
            log.exception("reading a tree's output failed")

    def pause_reading(self) -> None:
        if self._reading:
            self._loop.remove_reader(self._fd)
            self._reading = False

    def resume_reading(self) -> None:
        if not self._closed and not self._reading:
            self._loop.add_reader(self._fd, self._readable)
            self._reading = True

    def is_reading(self) -> bool:
        return self._reading

    def is_closing(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self.pause_reading()
        self._closed = True
        try:
            self._pipe.close()
        except OSError:
            pass
        if not self.eof.done():
            self.eof.set_result(None)


async def open_reader(tree: Tree, feed: Callable[[bytes], Any]) -> tuple[PipeReader, asyncio.Future[None]]:
    """Start reading tree.stdout into feed; return the reader and the future that resolves at end of file."""
    loop = asyncio.get_running_loop()
    eof: asyncio.Future[None] = loop.create_future()
    assert tree.stdout is not None
    return PipeReader(loop, tree.stdout, feed, eof), eof


async def close_reader(transport: PipeReader | None, eof: asyncio.Future[None] | None) -> None:
    """Wait (a little) for the last bytes of a tree that is gone, then close the reader."""
    if transport is None or eof is None:
        return
    try:
        await asyncio.wait_for(asyncio.shield(eof), EOF_PATIENCE)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        pass
    finally:
        transport.close()


async def wait_exit(tree: Tree) -> None:
    """Until the tree's command has ended (and its keeper has ended what it left, within the keeper's own bound).

    Cancel it before ending the tree: it watches the tree's status pipe from
    the loop, and the teardown closes that pipe from a worker thread.
    """
    try:
        await tree.wait_async()
    except subprocess.TimeoutExpired:
        pass  # the keeper is still ending what the command left: the teardown that follows sees to it
    except KeeperLost:
        pass  # the keeper was killed and the owner ended the tree: tree.returncode raises it again


def raise_unexpected(exit_wait: asyncio.Task[None] | None) -> None:
    """Re-raise what made wait_exit() fail (a bug, or a Tree call failing), once it is over; else nothing.

    Retrieving it here also keeps asyncio from logging "Task exception was never retrieved".
    """
    if exit_wait is None or not exit_wait.done() or exit_wait.cancelled():
        return
    exc = exit_wait.exception()
    if exc is not None:
        raise exc


async def stop_waiting(exit_wait: asyncio.Task[None] | None) -> None:
    if exit_wait is not None:
        exit_wait.cancel()
        await quietly(asyncio.wait([exit_wait]))


async def quietly(work: Awaitable[object]) -> None:
    """Await work, ignoring how it ends (for clean-up on a path that already raises)."""
    try:
        await work
    except BaseException:
        pass


def wake(event: asyncio.Event, loop: asyncio.AbstractEventLoop | None) -> None:
    """Set an asyncio event from the loop's own thread, another thread, or after the loop closed (a no-op then).

    For reap_sync() and kill_foreground(), which atexit, a signal handler or another thread may call.
    """
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    try:
        if loop is None or running is loop:
            event.set()
        elif not loop.is_closed():
            loop.call_soon_threadsafe(event.set)
    except RuntimeError:  # the loop closed meanwhile: nobody is left waiting
        pass


def exit_fields(returncode: int | None) -> tuple[int | None, str | None]:
    """(exit_code, exit_signal) from a Popen-style returncode (negative: the signal that ended it)."""
    if returncode is not None and returncode < 0:
        return None, signal_name(-returncode)
    return returncode, None
