"""Supervisor: services and foreground commands over contained trees, for one asyncio host.

The public face of the layer. It checks every request whole before anything
starts (a batch of services with their dependencies is refused as a whole),
hands out ids that are never reused (s1, s2, ...: a stale id can only be a
no-op), refuses a start at max_services live services naming them (a live
record is never evicted to make room; finished ones are, oldest first), and
stops in reverse dependency order. Leaving `async with` stops everything;
reap_sync() is the host's synchronous last word (atexit, signal paths).

It must never stop a foreground command when stopping services, nor a
service when killing foreground work; and it signals processes only through
the Trees its services and commands own.
"""

from __future__ import annotations

import asyncio
import atexit
import builtins
import concurrent.futures
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .._containment.spawn import MODES
from .._errors import SupervisorError, UnknownServiceError
from .._validate import check_positive_int, check_seconds, check_stop_grace
from . import deps as _deps
from . import restart as _restart
from .events import Listener, Listeners, ServiceEvent
from .foreground import Foreground, ForegroundResult
from .logring import LogPage
from .records import Records
from .service import RESTART, STOP, Service, Settings
from .snapshot import READY, RUNNING, STATUSES, TERMINAL, ServiceSnapshot
from .spec import ALL, ServiceSpec, check_specs


class Supervisor:
    """Services (long-running, watched, restarted) and foreground commands, each a contained tree.

    Use it as an async context manager; leaving the block stops every service
    (dependents first, each within its stop_grace) and kills foreground work.

    max_services: live services at most (a start beyond is refused, naming
    them). stop_grace: seconds between SIGTERM and SIGKILL when stopping a
    service (at most one day, MAX_STOP_GRACE). ready_timeout: seconds a service may take to prove readiness
    before it is reported `running`. contain: the containment mode of every
    tree (see proctree.spawn). log_rows / log_line: each service's log ring
    (rows kept, characters per row). tail_rows: rows in a snapshot's
    last_rows. output_interval: output events are coalesced to at most one
    per service per this many seconds. backoff: restart delays
    (restart.Backoff). max_records: finished services remembered (the oldest
    finished are forgotten beyond it; a forgotten id reads as a no-op).
    """

    def __init__(
        self,
        *,
        max_services: int = 16,
        stop_grace: float = 3.0,
        ready_timeout: float = 30.0,
        contain: str = "auto",
        log_rows: int = 2000,
        log_line: int = 16384,
        tail_rows: int = 20,
        output_interval: float = 0.05,
        backoff: _restart.Backoff | None = None,
        max_records: int | None = None,
    ) -> None:
        if not isinstance(contain, str) or contain not in MODES:
            raise ValueError(f"contain must be one of {', '.join(MODES)}, got {contain!r}")
        if backoff is not None and not isinstance(backoff, _restart.Backoff):
            raise TypeError(f"backoff must be a Backoff, not {type(backoff).__name__}")
        if isinstance(tail_rows, bool) or not isinstance(tail_rows, int) or tail_rows < 0:
            raise ValueError(f"tail_rows must be an int >= 0, got {tail_rows!r}")
        self.max_services = check_positive_int(max_services, "max_services")
        self.max_records = check_positive_int(
            max(64, 4 * self.max_services) if max_records is None else max_records, "max_records"
        )
        self.settings = Settings(
            stop_grace=check_stop_grace(stop_grace),
            ready_timeout=check_seconds(ready_timeout, "ready_timeout"),
            contain=contain,
            log_rows=check_positive_int(log_rows, "log_rows"),
            log_line=check_positive_int(log_line, "log_line"),
            tail_rows=tail_rows,
            output_interval=check_seconds(output_interval, "output_interval"),
            backoff=backoff or _restart.Backoff(),
        )
        self._records = Records(self.max_records)
        self._listeners = Listeners(interrupt=_reraise_soon)
        self._foreground = Foreground(
            contain=contain, grace=self.settings.stop_grace, log_rows=log_rows, log_line=log_line
        )
        self._closed = False
        self._change: asyncio.Future[None] | None = None
        self._atexit = False

    def __repr__(self) -> str:
        return f"<proctree.Supervisor live={self.live_count()} services={len(self._records.by_id)}>"

    # -- context ------------------------------------------------------------------------------

    async def __aenter__(self) -> Supervisor:
        self._prepare()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Refuse new work, stop every service, kill foreground work. Cancelled, it kills what is left at once.

        Coroutine listeners still running then get stop_grace seconds to end;
        the rest are cancelled. One that swallows its CancelledError goes on
        running on the host's loop, and asyncio.run() waits for it (logged).
        """
        self._closed = True
        try:
            self._foreground.kill()
            await self.stop(ALL)
            await self._listeners.drain(self.settings.stop_grace)
        except BaseException:
            self.reap_sync()
            raise
        finally:
            if self._atexit:
                atexit.unregister(self.reap_sync)
                self._atexit = False

    def _prepare(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # trio (directly or through anyio), or no event loop at all
            raise RuntimeError(
                "proctree.Supervisor runs on asyncio (anyio's asyncio backend included); "
                "elsewhere (trio, threads) use proctree.SyncSupervisor, which runs its own"
            ) from None
        # Spawns and teardowns run in the loop's default executor: give it room for every
        # service's teardown at once, so that stopping 16 services takes one grace, not three.
        # Only when the loop has made none yet (asyncio's own attribute; other loops are left as they are).
        if getattr(loop, "_default_executor", False) is None:
            loop.set_default_executor(
                concurrent.futures.ThreadPoolExecutor(
                    max_workers=8 + 4 * self.max_services, thread_name_prefix="proctree-supervisor"
                )
            )
        if not self._atexit:
            atexit.register(self.reap_sync)
            self._atexit = True

    # -- starting -----------------------------------------------------------------------------

    async def start(
        self,
        command: str | Sequence[str],
        *,
        name: str | None = None,
        cwd: Any = None,
        env: Mapping[str, str | None] | None = None,
        port: int | None = None,
        ready: Any = None,
        depends_on: Any = None,
        restart: str = _restart.NO,
        max_restarts: int | None = 5,
        ready_timeout: float | None = None,
        stop_grace: float | None = None,
        stop_signal: Any = None,
    ) -> ServiceSnapshot:
        """Start one service; return its snapshot once it is spawned (or has failed).

        See ServiceSpec for the keywords. With depends_on, it waits for its
        dependencies first. TypeError / ValueError for bad arguments and
        SupervisorError (at max_services, a live service of the same name, a
        closed supervisor) before anything starts; a command that cannot
        start gives a `failed` snapshot with the reason.
        """
        spec = ServiceSpec(
            command,
            name=name,
            cwd=cwd,
            env=env,
            port=port,
            ready=ready,
            depends_on=depends_on,
            restart=restart,
            max_restarts=max_restarts,
            ready_timeout=ready_timeout,
            stop_grace=stop_grace,
            stop_signal=stop_signal,
        )
        return (await self.start_all([spec]))[0]

    async def start_all(self, specs: Iterable[ServiceSpec]) -> list[ServiceSnapshot]:
        """Start several services in dependency order; return their snapshots once each is spawned (or has failed).

        The batch is checked whole before anything starts: duplicate names,
        unknown dependencies (names neither in the batch nor already known),
        cycles, the max_services limit. Services that do not depend on each
        other start at once. Cancelled, it stops the services it admitted.
        """
        batch = check_specs(specs)
        self._refuse_if_closed()
        self._prepare()
        services = self._admit(batch)
        try:
            await self._until(services, lambda s: s.runs > 0)
        except BaseException:
            for service in services:
                service.request(STOP)
            raise
        self._refuse_if_closed()  # close() stopped them meanwhile: their snapshots would tell of an undone start
        return [s.snapshot() for s in services]

    def _refuse_if_closed(self) -> None:
        if self._closed:
            raise SupervisorError("the supervisor is closed")

    def _admit(self, batch: list[ServiceSpec]) -> list[Service]:
        """Check the batch whole, then register and launch it. Synchronous: nothing interleaves."""
        self._refuse_if_closed()
        names = [spec.name for spec in batch if spec.name is not None]
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise ValueError(f"two services are named {name!r}")
            seen.add(name)
            taken = self._records.by_name.get(name)
            if taken is not None and taken.live:
                raise SupervisorError(f"a live service is already named {name!r} ({taken.id}); stop it first", name)
        graph = {
            spec.name if spec.name is not None else f"#{i}": [d for d, _ in spec.depends_on]
            for i, spec in enumerate(batch)
        }
        _deps.check_graph(graph, known=self._records.by_name)
        self._check_ports(batch)
        live = [s.id for s in self._records.by_id.values() if s.live]
        if len(live) + len(batch) > self.max_services:
            want = f"{len(batch)} more" if len(batch) > 1 else "another"
            raise SupervisorError(
                f"{len(live)} of max_services={self.max_services} services are live ({', '.join(live) or 'none'}): "
                f"cannot start {want}; stop one first"
            )
        self._records.forget_finished(len(batch))
        sids = [self._records.new_id() for _ in batch]
        in_batch = {spec.name: sid for spec, sid in zip(batch, sids) if spec.name is not None}
        services: dict[str, Service] = {}
        for level in _deps.levels(
            {sid: [in_batch[d] for d, _ in spec.depends_on if d in in_batch] for spec, sid in zip(batch, sids)}
        ):
            for sid in level:
                spec = batch[sids.index(sid)]
                needs = tuple(
                    (services[in_batch[d]] if d in in_batch else self._records.by_name[d], condition)
                    for d, condition in spec.depends_on
                )
                services[sid] = Service(self, sid, spec, needs)
        ordered = [services[sid] for sid in sids]
        for service in ordered:
            self._records.add(service)
        for service in ordered:
            service.launch()
        return ordered

    def _check_ports(self, batch: list[ServiceSpec]) -> None:
        """Refuse a port= another live service (or another of the batch) was given: one port, one server."""
        held = {s.spec.port: s for s in self._records.by_id.values() if s.live and s.spec.port is not None}
        in_batch: dict[int, str] = {}
        for i, spec in enumerate(batch):
            if spec.port is None:
                continue
            who = spec.name or f"specs[{i}]"
            other = held.get(spec.port)
            if other is not None:
                raise SupervisorError(
                    f"{who}: port {spec.port} is already live service {other.id}'s ({other.name}); "
                    "two services on one port would prove each other ready"
                )
            if spec.port in in_batch:
                raise ValueError(f"{in_batch[spec.port]} and {who} are both given port {spec.port}")
            in_batch[spec.port] = who

    # -- reading ------------------------------------------------------------------------------

    def get(self, id_or_name: str, *, usage: bool = False) -> ServiceSnapshot | None:
        """The snapshot of a service by id or name (the newest of that name); None for a forgotten id.

        usage=True also reads its tree's summed usage into the snapshot's usage (a few ms of /proc reads, in
        this thread; OSError where facts are not read, not Linux). UnknownServiceError for a name nobody has,
        or an id never handed out.
        """
        service = self._records.find(id_or_name)
        return None if service is None else service.snapshot(usage=_check_flag(usage))

    def list(self, *, usage: bool = False) -> list[ServiceSnapshot]:
        """Snapshots of every remembered service, live and finished, oldest first; usage=True as in get()."""
        want = _check_flag(usage)
        return [s.snapshot(usage=want) for s in self._records.by_id.values()]

    def live_count(self) -> int:
        """How many services are live (waiting, starting, ready, running or restarting)."""
        return sum(1 for s in self._records.by_id.values() if s.live)

    def read(self, id_or_name: str, since: int | None = None, limit: int | None = None) -> LogPage:
        """A page of a service's log: rows with seq > since, oldest first (see LogRing.read).

        For a forgotten id the page is empty and every row after since counts
        in dropped (next is its last row's seq), so a pager sees each row once
        or counts it; a since past that last row is a ValueError, as for a
        remembered service.
        """
        service = self._records.find(id_or_name)
        if service is None:
            return self._records.forgotten_page(id_or_name, since, limit)
        return service.ring.read(since, limit)

    def pause_output(self, id_or_name: str = ALL) -> None:
        """Stop reading a service's (or every service's) output pipe until resume_output().

        For a consumer of output events that falls behind (a slow terminal):
        the service then blocks in its next write once the pipe is full, as
        under foreman, and no row is lost. The hold outlives restarts; a tree
        being ended is read to its end regardless.
        """
        for service in self._held_targets(id_or_name):
            service.hold_output(True)

    def resume_output(self, id_or_name: str = ALL) -> None:
        """Read a service's (or every service's) output pipe again after pause_output()."""
        for service in self._held_targets(id_or_name):
            service.hold_output(False)

    def _held_targets(self, id_or_name: str) -> builtins.list[Service]:
        if id_or_name == ALL:
            return builtins.list(self._records.by_id.values())
        service = self._records.find(id_or_name)
        return [] if service is None else [service]

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call listener(event) for every ServiceEvent from now on; return the function that unsubscribes it."""
        return self._listeners.add(listener)

    async def wait(
        self, id_or_name: str, until: str | Iterable[str] = (READY, RUNNING), timeout: float | None = None
    ) -> ServiceSnapshot:
        """Wait until the service's status is one of until, or terminal; return its snapshot.

        asyncio.TimeoutError (TimeoutError from 3.11) after timeout seconds, the
        service untouched. UnknownServiceError for a forgotten id (its end is
        no longer known), as for a name nobody has.
        """
        if isinstance(until, str):
            wanted = {until}
        elif isinstance(until, Iterable) and not isinstance(until, (bytes, bytearray)):
            wanted = set(until)
            if not all(isinstance(status, str) for status in wanted):
                raise TypeError(f"until must hold status names (str), got {sorted(map(repr, wanted))}")
        else:
            raise TypeError(
                f"until must be a status or a collection of statuses ({', '.join(STATUSES)}; () for the end), "
                f"not {type(until).__name__}"
            )
        bad = wanted - set(STATUSES)
        if bad:
            raise ValueError(f"until: unknown statuses {sorted(bad)} (statuses: {', '.join(STATUSES)})")
        service = self._records.find(id_or_name)
        if service is None:
            raise UnknownServiceError(
                f"service {id_or_name!r} was forgotten (max_records): its end is not known", id_or_name
            )
        limit = None if timeout is None else check_seconds(timeout, "timeout")
        await asyncio.wait_for(self._until([service], lambda s: s.status in wanted), limit)
        return service.snapshot()

    async def _until(self, services: builtins.list[Service], done: Callable[[Service], bool]) -> None:
        """Until done(service) or the service is terminal (and its task over), for every service."""
        while True:
            pending = [s for s in services if not (done(s) or s.status in TERMINAL)]
            if not pending:
                return
            await self.next_change()

    # -- stopping and restarting --------------------------------------------------------------

    async def stop(self, id_or_name: str = ALL) -> builtins.list[ServiceSnapshot]:
        """Stop a service (by id or name), or every live one ("all", dependents first); return their snapshots.

        Each is ended within its stop_grace (SIGTERM, then SIGKILL), its whole
        tree with it; its status is then `stopped`, whatever its exit looked
        like. A finished service is left as it is; a forgotten id gives [].
        Cancelled, only the waiting ends: the stop carries on in the background
        (the snapshot keeps its status until the tree is ended).
        """
        if id_or_name == ALL:
            targets = [s for s in self._records.by_id.values() if s.live or not _settled(s)]
        else:
            service = self._records.find(id_or_name)
            if service is None:
                return []
            targets = [service]
        graph = _stop_graph(targets)
        by_id = {s.id: s for s in targets}
        for level in _deps.stop_levels(graph):
            services = [by_id[sid] for sid in level]
            for service in services:
                service.request(STOP)
            await asyncio.gather(*(s.settled() for s in services))
        return [s.snapshot() for s in targets]

    async def restart(self, id_or_name: str = ALL) -> builtins.list[ServiceSnapshot]:
        """Restart a service (or every live one): its tree is ended, then it is started again.

        A finished service (exited, failed, stopped) is started again too,
        under the same id (its dependencies are not waited for again), if
        there is room under max_services. Returns the snapshots once each new
        run is spawned (or has failed).
        """
        self._refuse_if_closed()
        if id_or_name == ALL:
            targets = [s for s in self._records.by_id.values() if s.live]
        else:
            service = self._records.find(id_or_name)
            if service is None:
                return []
            targets = [service]
        revive = [s for s in targets if not s.live]
        if revive:
            live = [s.id for s in self._records.by_id.values() if s.live]
            if len(live) + len(revive) > self.max_services:
                raise SupervisorError(
                    f"{len(live)} of max_services={self.max_services} services are live ({', '.join(live)}): "
                    "cannot restart a finished one; stop one first"
                )
        before = {s.id: s.runs for s in targets}
        for service in targets:
            if service.live:
                service.request(RESTART)
            else:
                await service.settled()
                service.launch()
        await self._until(targets, lambda s: s.runs > before[s.id] or s.status == "waiting")
        self._refuse_if_closed()  # close() stopped them meanwhile
        return [s.snapshot() for s in targets]

    # -- foreground commands ------------------------------------------------------------------

    async def run_foreground(
        self,
        command: str | Sequence[str],
        *,
        cwd: Any = None,
        env: Mapping[str, str | None] | None = None,
        timeout: float | None = None,
        input: bytes | str | None = None,
    ) -> ForegroundResult:
        """Run a short command as a contained tree and wait for it; its output is kept in a bounded ring.

        Kept apart from services: kill_foreground() ends it, stopping services
        never does. timeout: seconds before it is ended (stop_grace applies;
        result.timed_out). Cancelled, it kills the tree and re-raises. A
        command that cannot start raises (FileNotFoundError, ...).
        """
        self._refuse_if_closed()
        self._prepare()
        return await self._foreground.run(command, cwd=cwd, env=env, timeout=timeout, input=input)

    def kill_foreground(self) -> int:
        """SIGKILL every running foreground command (its whole tree), now; return how many. Never touches a service."""
        return self._foreground.kill()

    def foreground_count(self) -> int:
        return self._foreground.count()

    # -- host exit ----------------------------------------------------------------------------

    def reap_sync(self) -> None:
        """SIGKILL everything now: every service's tree and every foreground command's. Marks the services stopped.

        Synchronous, idempotent and non-blocking (one read of each tree's
        members and one signal each, no waiting): for atexit and the host's
        SIGINT / SIGTERM / SIGHUP paths. It never raises. Events for the
        services it stopped are sent when (if) the event loop runs again.
        """
        for service in list(self._records.by_id.values()):
            try:
                service.reap()
            except Exception:
                pass
        try:
            self._foreground.kill()
        except Exception:
            pass

    # -- the host side of Service -------------------------------------------------------------

    def emit(self, event: ServiceEvent) -> None:
        self._listeners.emit(event)

    def foreign_ports(self, service: Service) -> set[int]:
        """The ports other live services hold: none of them ever proves service ready."""
        ports = set()
        for other in self._records.by_id.values():
            if other is not service and other.live:
                port = other.claimed_port
                if port is not None:
                    ports.add(port)
        return ports

    def changed(self) -> None:
        change, self._change = self._change, None
        if change is not None and not change.done():
            change.set_result(None)

    async def next_change(self) -> None:
        """Until the next changed() (a waiter cancelled meanwhile does not disturb the others)."""
        if self._change is None or self._change.done():
            self._change = asyncio.get_running_loop().create_future()
        await asyncio.wait([self._change])


def _reraise_soon(exc: BaseException) -> None:
    """Re-raise a listener's SystemExit / KeyboardInterrupt from the event loop, once the dispatch is over.

    asyncio lets exactly these out of a callback: asyncio.run() then raises
    it, after cancelling the tasks left (the block's `async with` exits and
    stops every service). Without a running loop it can only be logged.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return

    def reraise() -> None:
        raise exc

    loop.call_soon(reraise)


def _stop_graph(targets: builtins.list[Service]) -> dict[str, builtins.list[str]]:
    """What each target depends on among the targets, transitively through services that are not stopped now.

    web -> migrate (a finished one-shot, not a target) -> db: web still stops before db.
    """
    ids = {s.id for s in targets}
    graph: dict[str, builtins.list[str]] = {}
    for service in targets:
        found: set[str] = set()
        seen: set[str] = set()
        todo = [dep for dep, _ in service.needs]
        while todo:
            dep = todo.pop()
            if dep.id in seen:
                continue
            seen.add(dep.id)
            if dep.id in ids:
                found.add(dep.id)
            else:
                todo.extend(d for d, _ in dep.needs)
        graph[service.id] = sorted(found)
    return graph


def _check_flag(usage: object) -> bool:
    if not isinstance(usage, bool):
        raise TypeError(f"usage must be a bool, not {type(usage).__name__}")
    return usage


def _settled(service: Service) -> bool:
    return service.task is None or service.task.done()
