"""What the teardown machine asks of its driver (_Wait, _Call), and the loops that serve it.

The machine (machine.py) makes every decision and yields only these two
requests; a driver runs a _Call's blocking function and waits a _Wait, and
sends the result (or the exception) back. run_inline serves a generator with
blocking calls; drive_async serves one from any async library, given how to
call off the loop and how to wait (engine.py's asyncio face and trioface.py's
trio face are two such pairs). Neither decides anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from .report import TeardownReport


class _Wait(NamedTuple):
    """What the engine waits for next: fd readable, or timeout seconds (0: just yield)."""

    fd: int | None
    timeout: float


class _Call(NamedTuple):
    """A blocking call (a snapshot of a big table, a group signal) for the driver to run.

    The sync driver calls it inline; the async driver runs it in a worker
    thread (the C core releases the GIL), so the loop keeps running. Its
    result, or exception, is sent back into the engine.
    """

    fn: Callable[[], Any]


# What the machine's generators yield; each is sent back the _Call's result (None for a _Wait).
Request = _Wait | _Call


class Steps(Protocol):
    """What a driver drives: a teardown's steps, and its abort (ladder.Ladder is one)."""

    def steps(self) -> Generator[Request, Any, TeardownReport]: ...

    def abort(self) -> None: ...


def run_inline(gen: Generator[Request, Any, Any]) -> Any:
    """Drive one of the machine's sub-generators to its result with blocking calls."""
    try:
        req = next(gen)
        while True:
            req = gen.send(req.fn() if isinstance(req, _Call) else None)
    except StopIteration as done:
        return done.value


async def drive_async(
    engine: Steps,
    call: Callable[[Callable[[], Any]], Awaitable[Any]],
    wait: Callable[[_Wait], Awaitable[None]],
) -> TeardownReport:
    """engine.steps() served by an async library: call runs a blocking call off the loop, wait waits.

    Anything raised out of the loop (a cancel, KeyboardInterrupt) aborts the
    engine first: what it holds is SIGKILLed at once, then the exception goes on.
    """
    gen = engine.steps()
    try:
        req = next(gen)
        while True:
            if isinstance(req, _Call):
                try:
                    value = await call(req.fn)
                except Exception as exc:
                    req = gen.throw(exc)
                    continue
                req = gen.send(value)
            else:
                await wait(req)
                req = gen.send(None)
    except StopIteration as done:
        report: TeardownReport = done.value
        return report
    except BaseException:
        engine.abort()
        raise
