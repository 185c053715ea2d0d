"""The async faces under trio (directly, or through anyio on its trio backend).

proctree's async functions are written for asyncio: they wait on the running
loop. Under trio there is none, so each async face asks running_library()
first and, under trio, takes one of the two paths here instead:

- the teardown engine driven from trio (run_engine): its blocking calls in
  trio's worker threads, its waits as trio fd waits; a cancel aborts it (the
  rest SIGKILLed at once), as under asyncio;
- a stoppable blocking call in a worker thread (in_worker), for spawn and
  Tree.terminate: a cancel tells it to stop, waits for it, hands what it
  made to discard, then lets the Cancelled through; nothing is left running.

anyio on asyncio is plain asyncio and never comes here. Any other library
(curio, a bare coroutine driven by hand) gets a RuntimeError naming what is
supported. Must never import trio unless a trio run is already under way (it
is not a dependency), nor make a decision of the engine's.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from .ladder import Ladder
from .report import TeardownReport
from .requests import _Wait, drive_async

SUPPORTED = "asyncio or trio (directly, or through anyio on either backend)"

# Tree.wait_async under trio waits in slices: a cancel is seen at once (the thread is
# abandoned), and an abandoned thread still ends within one slice.
WAIT_SLICE = 0.25


def running_library() -> str:
    """ "asyncio" or "trio": what runs the calling task. RuntimeError naming what is supported otherwise."""
    try:
        asyncio.get_running_loop()
        return "asyncio"
    except RuntimeError:
        pass
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_task()
            return "trio"
        except RuntimeError:
            pass
    raise RuntimeError(
        f"proctree's async functions run under {SUPPORTED}: this thread runs neither an asyncio event loop "
        "nor a trio task (the blocking functions, terminate_tree, spawn and Tree.wait, work anywhere)"
    )


async def run_engine(engine: Ladder) -> TeardownReport:
    """engine.steps() driven from trio; interrupted or cancelled, engine.abort() ends the tree at once."""
    import trio

    return await drive_async(engine, trio.to_thread.run_sync, lambda req: _wait(trio, req))


async def _wait(trio: Any, req: _Wait) -> None:
    if req.timeout <= 0:
        await trio.lowlevel.checkpoint()
        return
    with trio.move_on_after(req.timeout):
        if req.fd is None:
            await trio.sleep_forever()
        else:
            await trio.lowlevel.wait_readable(req.fd)


async def in_worker(fn: Callable[[Any], Any], stop: Any, discard: Callable[[Any], Any] | None = None) -> Any:
    """fn(stop) in a trio worker thread, awaited; stop: an object with set() and close().

    Cancelled (or interrupted) before fn is done, fn is told to stop and is
    waited for, shielded; what it returned, if it got that far, goes to
    discard; then the interruption propagates. stop is closed once fn is done.
    """
    import trio

    finished = threading.Event()
    result: list[Any] = []
    lock = threading.Lock()
    state = ["pending"]  # -> "running" (by the worker), or -> "abandoned" (cancelled before it started)

    def work() -> Any:
        with lock:
            if state[0] == "abandoned":
                return None  # cancelled before fn ran: there is nothing to stop
            state[0] = "running"
        try:
            value = fn(stop)
            result.append(value)
            return value
        finally:
            finished.set()

    try:
        return await trio.to_thread.run_sync(work, abandon_on_cancel=True)
    except BaseException:
        with lock:
            if state[0] == "pending":  # to_thread was cancelled before its thread ran fn, and never will now
                state[0] = "abandoned"
                finished.set()
        if finished.is_set() and not result:
            raise  # fn never ran, or failed itself: nothing of it is left running
        stop.set()
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(finished.wait)
            if result and discard is not None:
                await trio.to_thread.run_sync(discard, result[0])
        raise
    finally:
        if finished.is_set():
            stop.close()
        else:  # interrupted while shielded (KeyboardInterrupt): close once fn is done
            threading.Thread(target=lambda: (finished.wait(), stop.close()), daemon=True).start()


async def wait_in_slices(
    wait: Callable[[float | None], int], timeout: float | None, args: Any, then: float | None
) -> int:
    """wait(t) (a blocking Tree.wait) called in slices from trio until it returns, then wait(then) once
    more (the keeper's end of what the command left); subprocess.TimeoutExpired(args, timeout) once
    timeout has passed."""
    import trio

    deadline = None if timeout is None else trio.current_time() + timeout
    while True:
        left = WAIT_SLICE if deadline is None else max(0.0, min(WAIT_SLICE, deadline - trio.current_time()))
        try:
            await trio.to_thread.run_sync(wait, left, abandon_on_cancel=True)
            break
        except subprocess.TimeoutExpired:
            if timeout is not None and deadline is not None and trio.current_time() >= deadline:
                raise subprocess.TimeoutExpired(args, timeout) from None
    return int(await trio.to_thread.run_sync(wait, then, abandon_on_cancel=True))
