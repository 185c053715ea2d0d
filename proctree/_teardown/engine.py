"""The teardown engine's two faces: terminate_tree (blocking) and terminate_tree_async (asyncio).

Both drive the one state machine (machine._Teardown) and only carry out its
requests: a _Call runs a blocking call (inline, or in a worker thread for
asyncio), a _Wait waits for an fd or a timeout (poll, or add_reader/sleep).
Arguments are validated here, before the machine touches the system.

Must never: make a decision of its own (every one is the machine's); block the
event loop in the asyncio face; leave a tree half-signalled when interrupted
or cancelled (the machine's abort() ends it at once).
"""

from __future__ import annotations

import asyncio
import select
import time

from .._validate import check_pid, check_positive_int, check_seconds
from . import exitwait as _exitwait
from .machine import _Call, _Teardown, _Wait
from .report import TeardownReport
from .world import World


def _validated(
    pid: int, grace: float, include_root: bool, signal_group: bool, max_procs: int, reap: bool = False
) -> tuple[int, float, bool, bool, int, bool]:
    pid = check_pid(pid)
    grace = check_seconds(grace, "grace")
    max_procs = check_positive_int(max_procs, "max_procs")
    for name, flag in (("include_root", include_root), ("signal_group", signal_group), ("reap", reap)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, not {type(flag).__name__}")
    if pid == 1:
        raise ValueError("refusing to tear down pid 1 (init)")
    return pid, grace, include_root, signal_group, max_procs, reap


def _block(req: _Wait) -> None:
    if req.timeout <= 0:
        return
    if req.fd is None:
        time.sleep(req.timeout)
        return
    p = select.poll()
    p.register(req.fd, select.POLLIN)
    p.poll(req.timeout * 1000.0)


async def _wait_async(loop: asyncio.AbstractEventLoop, req: _Wait) -> None:
    if req.timeout <= 0:
        await asyncio.sleep(0)
        return
    if req.fd is None:
        await asyncio.sleep(req.timeout)
        return
    fut = loop.create_future()

    def wake() -> None:
        if not fut.done():
            fut.set_result(None)

    try:
        loop.add_reader(req.fd, wake)
    except NotImplementedError:  # a loop without add_reader: poll instead
        await asyncio.sleep(min(req.timeout, _exitwait.POLL_MAX))
        return
    try:
        await asyncio.wait_for(fut, req.timeout)
    except asyncio.TimeoutError:
        pass
    finally:
        loop.remove_reader(req.fd)


def run_blocking(engine: _Teardown) -> TeardownReport:
    """Drive engine to its report with blocking waits; on any interruption, abort() it and re-raise."""
    gen = engine.steps()
    try:
        req = next(gen)
        while True:
            if isinstance(req, _Call):
                try:
                    value = req.fn()
                except Exception as exc:
                    req = gen.throw(exc)
                    continue
                req = gen.send(value)
            else:
                _block(req)
                req = gen.send(None)
    except StopIteration as done:
        report: TeardownReport = done.value
        return report
    except BaseException:
        engine.abort()
        raise


async def run_async(engine: _Teardown) -> TeardownReport:
    """Drive engine from the running loop: blocking calls in a worker thread, waits as loop events."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: trio (anyio's trio backend too), or an error naming what is supported
        from . import trioface

        trioface.running_library()
        return await trioface.run_engine(engine)
    gen = engine.steps()
    try:
        req = next(gen)
        while True:
            if isinstance(req, _Call):
                try:
                    value = await loop.run_in_executor(None, req.fn)
                except Exception as exc:
                    req = gen.throw(exc)
                    continue
                req = gen.send(value)
            else:
                await _wait_async(loop, req)
                req = gen.send(None)
    except StopIteration as done:
        report: TeardownReport = done.value
        return report
    except BaseException:
        engine.abort()
        raise


def make_teardown(
    pid: int,
    *,
    grace: float = 2.0,
    include_root: bool = True,
    signal_group: bool = True,
    max_procs: int = 16384,
    reap: bool = False,
    world: World | None = None,
) -> _Teardown:
    """A validated, not yet started teardown of pid in world (the real system by default).

    For layers that drive the machine themselves (run_blocking / run_async)
    with a world of their own.
    """
    return _Teardown(*_validated(pid, grace, include_root, signal_group, max_procs, reap), world=world)


def terminate_tree(
    pid: int,
    *,
    grace: float = 2.0,
    include_root: bool = True,
    signal_group: bool = True,
    max_procs: int = 16384,
    reap: bool = False,
) -> TeardownReport:
    """End pid and every process it started, and nothing else; return a TeardownReport.

    Polite first (SIGHUP to the root's own group, SIGTERM + SIGCONT to every
    member), SIGKILL for whatever is left after `grace` seconds; returns as soon
    as the whole tree is gone. Raises TypeError/ValueError for bad arguments
    (pid 1, the caller, its ancestors) and NoSuchProcess for a pid that is not
    there, before anything is signalled.

    Exits are observed without reaping: members that are the caller's own
    children are left as zombies for their owners (Popen, multiprocessing,
    asyncio) to reap with their exit status. reap=True reaps them (by pidfd,
    that process only) and records their codes in report.extra["reaped"]: for
    callers that own no such objects.
    """
    return run_blocking(
        make_teardown(
            pid, grace=grace, include_root=include_root, signal_group=signal_group, max_procs=max_procs, reap=reap
        )
    )


async def terminate_tree_async(
    pid: int,
    *,
    grace: float = 2.0,
    include_root: bool = True,
    signal_group: bool = True,
    max_procs: int = 16384,
    reap: bool = False,
) -> TeardownReport:
    """terminate_tree for asyncio: the same engine, waiting without blocking the loop.

    Cancelling it skips the rest of the grace: what is left is SIGKILLed at
    once, then CancelledError propagates.
    """
    engine = make_teardown(
        pid, grace=grace, include_root=include_root, signal_group=signal_group, max_procs=max_procs, reap=reap
    )
    return await run_async(engine)
