"""SyncSupervisor: the Supervisor for synchronous hosts, on an event loop of its own in a daemon thread.

Every method may be called from any thread and blocks until the Supervisor
has answered; the Supervisor's state is only ever touched in its own loop's
thread. Listeners run in that thread too, so a listener must not call back
into the SyncSupervisor and wait (that would wait for itself): such a call
raises RuntimeError instead of hanging.

It must never leave its thread or loop running after close(), and never
swallow an interruption: a KeyboardInterrupt while waiting cancels the call
it interrupted (a cancelled start stops what it started) and propagates.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .events import Listener
from .foreground import ForegroundResult
from .logring import LogPage
from .snapshot import ServiceSnapshot
from .spec import ALL, ServiceSpec, check_specs
from .supervisor import Supervisor


class SyncSupervisor:
    """A Supervisor for code without an event loop: the same calls, blocking, thread-safe.

    Takes the Supervisor's keywords. Use it as a context manager (leaving it
    stops everything and ends the thread) or call close().
    """

    def __init__(self, **settings: Any) -> None:
        self._sup = Supervisor(**settings)  # bad settings raise here, in the caller's thread
        # Listeners run in this object's thread, where sys.exit() could not end the program anyway:
        # a listener's SystemExit / KeyboardInterrupt is logged and ignored like any other error.
        self._sup._listeners.interrupt = None
        self._loop = asyncio.new_event_loop()
        self._closed = False
        self._lock = threading.Lock()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name="proctree-supervisor", daemon=True)
        self._thread.start()
        ready.wait()

    def _serve(self, ready: threading.Event) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            try:
                # What an interrupted close() left running ends as asyncio.run() ends it: cancelled,
                # which kills each service's tree and reaps its keeper.
                pending = asyncio.all_tasks(loop)
                for task in pending:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is self._thread:
            raise RuntimeError(
                "a SyncSupervisor cannot be called from its own thread (a listener): it would wait for itself"
            )
        if self._closed:
            # After close the loop is gone; the Supervisor itself refuses new work the same way.
            from .._errors import SupervisorError

            raise SupervisorError("the supervisor is closed")

        async def job() -> Any:
            result = fn(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result

        future = asyncio.run_coroutine_threadsafe(job(), self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # interrupted while waiting: the call is cancelled, then the interruption goes on
            raise

    # -- the Supervisor's calls, blocking -----------------------------------------------------

    def start(self, command: str | Sequence[str], **kwargs: Any) -> ServiceSnapshot:
        """Supervisor.start(), blocking until the service is spawned (or has failed)."""
        return self._call(self._sup.start, command, **kwargs)

    def start_all(self, specs: Iterable[ServiceSpec]) -> builtins.list[ServiceSnapshot]:
        return self._call(self._sup.start_all, check_specs(specs))

    def get(self, id_or_name: str, *, usage: bool = False) -> ServiceSnapshot | None:
        return self._answer(self._sup.get, id_or_name, usage=usage)

    def list(self, *, usage: bool = False) -> builtins.list[ServiceSnapshot]:
        return self._answer(self._sup.list, usage=usage)

    def live_count(self) -> int:
        return self._answer(self._sup.live_count)

    def read(self, id_or_name: str, since: int | None = None, limit: int | None = None) -> LogPage:
        return self._answer(self._sup.read, id_or_name, since, limit)

    def _answer(self, read: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A read of the Supervisor's records: in its loop while it runs, and after close() from the final state.

        Once the loop's thread has ended nothing changes the records any
        more, so the caller's thread may read them (as the async
        Supervisor's get() and list() answer after close()).
        """
        if self._closed and threading.current_thread() is not self._thread:
            self._thread.join()  # close() may still be ending it
            return read(*args, **kwargs)
        return self._call(read, *args, **kwargs)

    def wait(self, id_or_name: str, until: Any = ("ready", "running"), timeout: float | None = None) -> ServiceSnapshot:
        return self._call(self._sup.wait, id_or_name, until, timeout)

    def stop(self, id_or_name: str = ALL) -> builtins.list[ServiceSnapshot]:
        return self._call(self._sup.stop, id_or_name)

    def restart(self, id_or_name: str = ALL) -> builtins.list[ServiceSnapshot]:
        return self._call(self._sup.restart, id_or_name)

    def pause_output(self, id_or_name: str = ALL) -> None:
        return self._call(self._sup.pause_output, id_or_name)

    def resume_output(self, id_or_name: str = ALL) -> None:
        return self._call(self._sup.resume_output, id_or_name)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Subscribe listener (called in the supervisor's thread); the returned function unsubscribes it, from any thread."""
        unsubscribe = self._call(self._sup.subscribe, listener)

        def unsubscribe_here() -> None:
            if self._closed or threading.current_thread() is self._thread:
                unsubscribe()
            else:
                self._call(unsubscribe)

        return unsubscribe_here

    def run_foreground(self, command: str | Sequence[str], **options: Any) -> ForegroundResult:
        """Supervisor.run_foreground(): the same keywords (cwd, env, timeout, input)."""
        return self._call(self._sup.run_foreground, command, **options)

    def kill_foreground(self) -> int:
        """Supervisor.kill_foreground(): safe from any thread, it does not wait for the loop."""
        return self._sup.kill_foreground()

    def reap_sync(self) -> None:
        """Supervisor.reap_sync(): safe from any thread (and from atexit), it does not wait for the loop."""
        self._sup.reap_sync()

    # -- the end ------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every service, kill foreground work, end the thread. Idempotent. Interrupted, it kills what is left."""
        with self._lock:
            if self._closed:
                return
            try:
                self._call(self._sup.close)
            except BaseException:
                self._sup.reap_sync()
                raise
            finally:
                self._closed = True
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join()

    def __enter__(self) -> SyncSupervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<proctree.SyncSupervisor closed={self._closed}>"
