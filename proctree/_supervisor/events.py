"""Service events and the listeners that receive them, each isolated from the others and from the supervisor.

A listener is called in the event loop's thread with one ServiceEvent; what
it raises is logged (logger "proctree.supervisor") and goes no further: a
rendering bug must never kill a ten-minute build, nor keep the next listener
from hearing about it. A listener may be a coroutine function: its coroutine
runs as a task, isolated the same way.

SystemExit and KeyboardInterrupt (sys.exit() in a listener, a Ctrl+C that
lands while one runs) are the host's to see, but never in the middle of a
service's bookkeeping: the dispatch finishes, then the interruption is handed
to `interrupt` (the Supervisor re-raises it from the event loop, as asyncio
does for its own callbacks, so leaving `async with` still stops every tree).
Any other BaseException of a listener is isolated like an Exception.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .logring import Row
from .snapshot import ServiceSnapshot

STARTED = "started"  # spawned (a restart's new run too)
OUTPUT = "output"  # new rows (coalesced: at most one event per service per interval)
READY = "ready"  # readiness proven
RUNNING = "running"  # ready_timeout passed with nothing that proved readiness
EXITED = "exited"  # ended by itself, and will not be restarted
STOPPED = "stopped"  # we stopped it
RESTARTING = "restarting"  # its tree ended (a crash, or a restart asked for) and it starts again
CRASH_LOOP = "crash-loop"  # it kept crashing and its restart budget is spent ("failed" follows)
FAILED = "failed"  # could not start, a dependency failed, its restart budget is spent, or its keeper was killed
KINDS = (STARTED, OUTPUT, READY, RUNNING, EXITED, STOPPED, RESTARTING, CRASH_LOOP, FAILED)

log = logging.getLogger("proctree.supervisor")

Listener = Callable[["ServiceEvent"], Any]


@dataclass(frozen=True)
class ServiceEvent:
    """Something happened to a service: kind (one of KINDS) and the snapshot right after it.

    Output events carry the rows that arrived since the previous output event
    of the service (oldest first), and dropped: how many rows in between the
    ring no longer held when the event was sent (read() pages through the ring).
    """

    kind: str
    snapshot: ServiceSnapshot
    rows: tuple[Row, ...] = ()
    dropped: int = 0
    at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: kind, at, the snapshot as a dict, and the rows' seq and text (control sequences stripped)."""
        out: dict[str, Any] = {"kind": self.kind, "at": self.at, "service": self.snapshot.to_dict()}
        if self.kind == OUTPUT:
            out["rows"] = [{"seq": r.seq, "at": r.at, "text": r.text} for r in self.rows]
            out["dropped"] = self.dropped
        return out


class Listeners:
    """The subscribed listeners, called in order of subscription; errors counted and logged, never raised."""

    def __init__(self, interrupt: Callable[[BaseException], None] | None = None) -> None:
        self._listeners: dict[int, Listener] = {}
        self._next = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self.interrupt = interrupt  # gets a listener's SystemExit / KeyboardInterrupt; None: logged only
        self.errors = 0  # how many times a listener raised

    def add(self, listener: Listener) -> Callable[[], None]:
        """Subscribe listener; return a function that unsubscribes it (calling that twice is harmless)."""
        if not callable(listener):
            raise TypeError(f"a listener must be callable, not {type(listener).__name__}")
        key = self._next
        self._next += 1
        self._listeners[key] = listener

        def unsubscribe() -> None:
            self._listeners.pop(key, None)

        return unsubscribe

    def clear(self) -> None:
        self._listeners.clear()

    def emit(self, event: ServiceEvent) -> None:
        """Call every listener with event; a listener subscribed or removed meanwhile takes effect next time."""
        interruption: BaseException | None = None
        for listener in list(self._listeners.values()):
            try:
                result = listener(event)
                if asyncio.iscoroutine(result):
                    self._run(result, listener, event)
            except (SystemExit, KeyboardInterrupt) as exc:
                self._failed(listener, event, exc)
                interruption = interruption or exc
            except BaseException:
                self._failed(listener, event)
        if interruption is not None and self.interrupt is not None:
            self.interrupt(interruption)

    def _run(self, coro: Any, listener: Listener, event: ServiceEvent) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coro)
        except RuntimeError:  # no loop running (reap_sync at interpreter exit): it cannot run
            coro.close()
            return
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                self._failed(listener, event, t.exception())

        # A coroutine listener's SystemExit / KeyboardInterrupt leaves the loop by itself (asyncio
        # re-raises those from any task); the callback only logs it.

        task.add_done_callback(done)

    def _failed(self, listener: Listener, event: ServiceEvent, exc: BaseException | None = None) -> None:
        self.errors += 1
        # The first failures in full; after that a listener that fails on every output row would flood the log.
        level = logging.WARNING if self.errors <= 3 else logging.DEBUG
        log.log(
            level,
            "a supervisor listener %r raised on a %s event of %s; ignored",
            listener,
            event.kind,
            event.snapshot.id,
            exc_info=exc if exc is not None else True,
        )

    async def drain(self, timeout: float) -> int:
        """Wait up to timeout seconds for the coroutine listeners still running, then cancel the rest.

        Returns how many were cancelled. A listener that ignores its
        cancellation is left to the loop (waited for another `timeout` at most)
        and a warning says so: it is a task of the host's loop like any other,
        and asyncio.run() waits for every task before it returns. Taking it off
        the loop would take private asyncio calls, or running listeners off
        the loop's thread, which they are promised.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._tasks and loop.time() < deadline:
            await asyncio.wait(list(self._tasks), timeout=max(0.0, deadline - loop.time()))
        late = list(self._tasks)
        for task in late:
            task.cancel()
        if late:
            log.warning(
                "%d coroutine listener(s) still running %g s after the services stopped; cancelled", len(late), timeout
            )
            await asyncio.wait(late, timeout=timeout)
        stubborn = [task for task in late if not task.done()]
        if stubborn:
            log.warning(
                "%d coroutine listener(s) ignored their cancellation and still run; the event loop's end "
                "(asyncio.run(), a SyncSupervisor's close()) waits for them: a listener must let CancelledError through",
                len(stubborn),
            )
        return len(late)
