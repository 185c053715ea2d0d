"""Stopping a blocking spawn or teardown from another thread: the stop flag, and the asyncio face that runs them in a worker."""

from __future__ import annotations

import os
import threading

from .keeperproc import _close_fds

# asyncio and the trio face are imported by the async functions themselves: they run on a loop, which has
# them already, and a blocking spawn (proctree.Popen's holder) must not pay their import time.


class _Stopped(Exception):
    """A worker thread was asked (by a cancelled spawn_async/terminate_async) to stop."""


class _Stop:
    """A request from the event loop that a spawn or teardown running in a worker stop at once.

    fd becomes readable once set (for select), and wait(t) sleeps until set.
    Closed by whoever made it, once the worker has finished.
    """

    def __init__(self):
        self._event = threading.Event()
        self._lock = threading.Lock()
        self.fd, self._w = os.pipe()

    def set(self):
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            os.write(self._w, b"x")

    def is_set(self):
        return self._event.is_set()

    def wait(self, timeout):
        return self._event.wait(timeout)

    def check(self):
        if self._event.is_set():
            raise _Stopped

    def close(self):
        _close_fds((self.fd, self._w))


async def _in_worker(fn, discard=None):
    """fn(stop) in a worker thread, awaited; the asyncio face of spawn and terminate.

    If the awaiting task is cancelled (or anything else interrupts it) before
    fn is done, fn is told to stop at once and is waited for, its result (if
    it got that far) handed to discard (in a worker too), and then the
    interruption propagates: a cancelled call leaves nothing running.
    """
    import asyncio
    import contextvars

    from .._teardown import trioface as _trioface

    if _trioface.running_library() == "trio":
        return await _trioface.in_worker(fn, _Stop(), discard)
    loop = asyncio.get_running_loop()
    stop = _Stop()
    work = loop.run_in_executor(None, contextvars.copy_context().run, fn, stop)  # as asyncio.to_thread
    try:
        return await asyncio.shield(work)
    except BaseException:
        if work.done() and (work.cancelled() or work.exception() is not None):
            raise  # fn itself failed: nothing of it is left running
        stop.set()
        await _settle(work)
        if discard is not None and not work.cancelled() and work.exception() is None:
            await _settle(loop.run_in_executor(None, discard, work.result()))
        raise
    finally:
        if work.done():
            stop.close()
        else:  # the loop is going away under us: let the worker close it when done
            work.add_done_callback(lambda _: stop.close())


async def _settle(fut):
    """Wait until fut is done, through further cancellations: what it runs has been told to stop, so it ends soon."""
    import asyncio

    while not fut.done():
        try:
            await asyncio.wait([fut])
        except asyncio.CancelledError:
            continue
    if not fut.cancelled():
        fut.exception()  # retrieved: a _Stopped is expected, not "never retrieved"
