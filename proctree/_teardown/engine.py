"""The teardown engine's two faces: terminate_tree (blocking) and terminate_tree_async (asyncio).

Both drive the one state machine (machine._Teardown) and only carry out its
requests: a _Call runs a blocking call (inline, or in a worker thread for
asyncio), a _Wait waits for an fd or a timeout (poll, or add_reader/sleep).
Arguments are validated here, before the machine touches the system.

The blocking drivers (run_blocking, run_blocking_many) start no thread and
no event loop: a teardown must work when the pid space is full (a fork storm
in the tree is exactly when it is needed), and a thread needs a pid. A stop
fd polled beside the engine's own waits lets another thread cut the grace
short.

Must never: make a decision of its own (every one is the machine's); block the
event loop in the asyncio face; leave a tree half-signalled when interrupted
or cancelled (the machine's abort() ends it at once).
"""

from __future__ import annotations

import select
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from signal import SIGTERM

from .._validate import check_pid, check_positive_int, check_seconds, check_signal
from . import exitwait as _exitwait
from .machine import _Teardown
from .report import TeardownReport
from .requests import Steps, _Call, _Wait, drive_async
from .world import World

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    import asyncio  # imported where it is used: `proctree kill` must not pay ~40 ms for it
    from typing import Any


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


def _check_stop(stop_signal: object, hangup: object, signal_group: bool) -> tuple[int, bool]:
    sig = check_signal(stop_signal, "signal")
    if not isinstance(hangup, bool):
        raise TypeError(f"hangup must be a bool, not {type(hangup).__name__}")
    if hangup and not signal_group:
        raise ValueError("hangup=True needs signal_group=True (the hang-up is a signal to the root's group)")
    return sig, hangup


def _readable(fds: Sequence[int], timeout: float) -> set[int]:
    """The fds of fds that turn readable within timeout seconds (poll(2); no fd: a sleep)."""
    if not fds:
        if timeout > 0:
            time.sleep(timeout)
        return set()
    p = select.poll()
    for fd in fds:
        p.register(fd, select.POLLIN)
    return {fd for fd, _ in p.poll(max(0.0, timeout) * 1000.0)}


def _stop_set(stop_fd: int | None) -> bool:
    return stop_fd is not None and bool(_readable([stop_fd], 0))


async def _wait_async(loop: asyncio.AbstractEventLoop, req: _Wait) -> None:
    import asyncio

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


def run_blocking(engine: Steps, stop_fd: int | None = None) -> TeardownReport:
    """Drive engine to its report with blocking waits, in this thread; on any interruption, abort() it and re-raise.

    stop_fd: an fd that turns readable when the teardown must hurry (the rest
    of the grace is skipped, the tree killed, and the report returned).
    """
    (result,) = run_blocking_many([engine], stop_fd, capture=())
    assert isinstance(result, TeardownReport)
    return result


def run_blocking_many(
    engines: Sequence[Steps], stop_fd: int | None = None, capture: tuple[type[Exception], ...] = (Exception,)
) -> list[TeardownReport | Exception]:
    """Drive several engines together, in this thread: their waits share one poll(2), so N cost one grace.

    Each result is the engine's report, or the exception of a kind in capture
    that ended it (another kind aborts every engine and propagates, as any
    interruption does). stop_fd: as for run_blocking, for all of them.
    """
    gens = [e.steps() for e in engines]
    results: list[TeardownReport | Exception | None] = [None] * len(engines)
    pending: dict[int, tuple[_Wait, float]] = {}  # engine index -> (its wait, its deadline)
    hurried = False

    def advance(i: int, value: object = None, exc: Exception | None = None, first: bool = False) -> None:
        """Run engine i until it waits for something (recorded in pending) or ends (results)."""
        gen = gens[i]
        try:
            req = next(gen) if first else (gen.throw(exc) if exc is not None else gen.send(value))
            while True:
                if isinstance(req, _Call):
                    try:
                        got = req.fn()
                    except Exception as err:
                        req = gen.throw(err)
                        continue
                    req = gen.send(got)
                elif req.timeout <= 0:
                    req = gen.send(None)
                else:
                    pending[i] = (req, time.monotonic() + req.timeout)
                    return
        except StopIteration as done:
            results[i] = done.value
        except capture as err:
            results[i] = err

    try:
        for i in range(len(gens)):
            advance(i, first=True)
        while pending:
            if not hurried and _stop_set(stop_fd):
                hurried = True
                for e in engines:
                    e.hurry()
                for i in list(pending):
                    del pending[i]
                    advance(i)
                continue
            now = time.monotonic()
            timeout = min(deadline for _, deadline in pending.values()) - now
            fds = sorted({w.fd for w, _ in pending.values() if w.fd is not None})
            watch = fds + ([stop_fd] if stop_fd is not None and not hurried else [])
            ready = _readable(watch, max(0.0, timeout))
            now = time.monotonic()
            for i, (w, deadline) in list(pending.items()):
                if deadline <= now or (w.fd is not None and w.fd in ready):
                    del pending[i]
                    advance(i)
    except BaseException:
        for i, e in enumerate(engines):
            if results[i] is None:
                e.abort()
        raise
    done = [r for r in results if r is not None]
    assert len(done) == len(engines), "every engine ends with a report or an exception"
    return done


async def run_async(engine: _Teardown) -> TeardownReport:
    """Drive engine from the running loop: blocking calls in a worker thread, waits as loop events."""
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: trio (anyio's trio backend too), or an error naming what is supported
        from . import trioface

        trioface.running_library()
        return await trioface.run_engine(engine)

    def call(fn: Callable[[], Any]) -> Awaitable[Any]:
        return loop.run_in_executor(None, fn)

    return await drive_async(engine, call, lambda req: _wait_async(loop, req))


def make_teardown(
    pid: int,
    *,
    grace: float = 2.0,
    include_root: bool = True,
    signal_group: bool = True,
    max_procs: int = 16384,
    reap: bool = False,
    world: World | None = None,
    signal: int | str = SIGTERM,
    hangup: bool = False,
    already: Mapping[tuple[int, int], int] | None = None,
) -> _Teardown:
    """A validated, not yet started teardown of pid in world (the real system by default).

    For layers that drive the machine themselves (run_blocking / run_async)
    with a world of their own. already: (pid, start time) -> the stop signal
    another path already sent that process (it is not sent another).
    """
    args = _validated(pid, grace, include_root, signal_group, max_procs, reap)
    sig, hangup = _check_stop(signal, hangup, args[3])
    return _Teardown(*args, world=world, stop_signal=sig, hangup=hangup, already=already)


def terminate_tree(
    pid: int,
    *,
    grace: float = 2.0,
    include_root: bool = True,
    signal_group: bool = True,
    max_procs: int = 16384,
    reap: bool = False,
    signal: int | str = SIGTERM,
    hangup: bool = False,
) -> TeardownReport:
    """End pid and every process it started, and nothing else; return a TeardownReport.

    Polite first (the stop signal, SIGTERM unless `signal` names another, and
    SIGCONT, to every member once), SIGKILL for whatever is left after `grace`
    seconds; returns as soon as the whole tree is gone. hangup=True also sends
    SIGHUP to the root's own group first (as a closing terminal would).
    report.signals says which stop signal each member got. Raises
    TypeError/ValueError for bad arguments (pid 1, the caller, its ancestors,
    SIGKILL as the stop signal) and NoSuchProcess for a pid that is not
    there, before anything is signalled. Runs in the calling thread and
    starts none (a full pid space still gets its report).

    Exits are observed without reaping: members that are the caller's own
    children are left as zombies for their owners (Popen, multiprocessing,
    asyncio) to reap with their exit status. reap=True reaps them (by pidfd,
    that process only) and records their codes in report.extra["reaped"]: for
    callers that own no such objects.
    """
    return run_blocking(
        make_teardown(
            pid,
            grace=grace,
            include_root=include_root,
            signal_group=signal_group,
            max_procs=max_procs,
            reap=reap,
            signal=signal,
            hangup=hangup,
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
    signal: int | str = SIGTERM,
    hangup: bool = False,
) -> TeardownReport:
    """terminate_tree for asyncio: the same engine, waiting without blocking the loop.

    Cancelling it skips the rest of the grace: what is left is SIGKILLed at
    once, then CancelledError propagates.
    """
    engine = make_teardown(
        pid,
        grace=grace,
        include_root=include_root,
        signal_group=signal_group,
        max_procs=max_procs,
        reap=reap,
        signal=signal,
        hangup=hangup,
    )
    return await run_async(engine)
