"""One service: its record and the task that runs it, from its dependencies to its last exit.

A Service owns at most one contained tree at a time (proctree.spawn_async,
stdout and stderr merged into one pipe read by an asyncio reader into the
service's LogRing). Its lifecycle task is the only code that spawns or ends
that tree: stop() and restart() only state an intent and wake it, so a
restart always ends the old tree (Tree.terminate_async, the stop grace)
before it spawns the new one, and the final status follows the intent, never
the shape of the exit: a service we stopped is `stopped` even if it died of
the SIGTERM, or exited 0 on its own a moment before we asked.

This module must never signal a process other than through its own Tree (or
killnow.kill_now on that Tree, in reap()).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Protocol

from .._containment.spawn import Tree
from .._errors import KeeperLost
from .._table.usage import EMPTY as EMPTY_USAGE
from .._table.usage import Usage
from . import events as _ev
from . import restart as _restart
from .killnow import kill_now
from .logring import LogRing, Row
from .outcome import RunEnd, describe_end, describe_error, describe_exit, describe_keeper_lost, shell_could_not_run
from .outfeed import OutputFeed
from .readiness import Detector
from .readywatch import watch_lines, watch_probes
from .satisfaction import DependencyState
from .satisfaction import verdict as dependency_verdict
from .snapshot import (
    EXITED,
    FAILED,
    LIVE,
    READY,
    RESTARTING,
    RUNNING,
    STARTING,
    STOPPED,
    TERMINAL,
    WAITING,
    ServiceSnapshot,
)
from .spec import ServiceSpec, build_env
from .treeio import PipeReader, close_reader, exit_fields, open_reader, raise_unexpected, wake
from .treerun import always_ended, end_tree, spawn_command

log = logging.getLogger("proctree.supervisor")

STOP = "stop"
RESTART = "restart"

# The snapshot's fields a Service holds under the same names (the rest come from its spec and its ring).
_RECORD_FIELDS = (
    "id",
    "name",
    "status",
    "pid",
    "started_at",
    "ready_at",
    "ended_at",
    "exit_code",
    "exit_signal",
    "url",
    "port",
    "ready_by",
    "port_preoccupied",
    "restarts",
    "kill_incomplete",
    "reason",
    "mode",
)


@dataclass(frozen=True)
class Settings:
    """What every service of one supervisor shares."""

    stop_grace: float
    ready_timeout: float
    contain: str
    log_rows: int
    log_line: int
    tail_rows: int
    output_interval: float
    backoff: _restart.Backoff


class Host(Protocol):
    """What a Service needs from its supervisor."""

    settings: Settings

    def emit(self, event: _ev.ServiceEvent) -> None: ...

    def changed(self) -> None: ...

    async def next_change(self) -> None: ...

    def foreign_ports(self, service: Service) -> set[int]: ...


class Service:
    """One service's record and lifecycle. Created by the Supervisor; callers see snapshots only."""

    def __init__(self, host: Host, sid: str, spec: ServiceSpec, needs: tuple[tuple[Service, str], ...] = ()) -> None:
        settings = host.settings
        self.host = host
        self.id = sid
        self.spec = spec
        self.name = spec.name or sid
        self.needs = needs  # (dependency, condition), resolved when the service was admitted
        self.stop_grace = settings.stop_grace if spec.stop_grace is None else spec.stop_grace
        self.ready_timeout = settings.ready_timeout if spec.ready_timeout is None else spec.ready_timeout
        self.ring = LogRing(settings.log_rows, settings.log_line)
        self.status = WAITING if needs else STARTING
        self.reason: str | None = None
        self.intent: str | None = None
        self.reaped = False
        self.tree: Tree | None = None
        self.mode: str | None = None
        self.pid: int | None = None
        self.started_at: float | None = None
        self.ready_at: float | None = None
        self.ended_at: float | None = None
        self.exit_code: int | None = None
        self.exit_signal: str | None = None
        self.url: str | None = None
        self.port: int | None = spec.port
        self.ready_by: str | None = None
        self.port_preoccupied = False
        self.kill_incomplete = False
        self.runs = 0  # spawns so far
        self.restarts = 0
        self.streak = 0  # quick restarts in a row (restart.decide)
        self.completed = False  # a run exited 0 by itself (depends_on "completed")
        self.task: asyncio.Task[None] | None = None
        self._poke = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._detector: Detector | None = None
        self._run_first_seq = 0  # the ring's last seq when the current run was spawned
        self.out = OutputFeed(self.ring, settings.output_interval, self._send_rows)

    # -- what callers see ---------------------------------------------------------------------

    @property
    def live(self) -> bool:
        return self.status in LIVE

    def snapshot(self, usage: bool = False) -> ServiceSnapshot:
        """This service now; with usage=True also its tree's summed usage, read from /proc (a few ms)."""
        return ServiceSnapshot(
            **{name: getattr(self, name) for name in _RECORD_FIELDS},
            command=self.spec.command,
            cwd=self.spec.cwd,
            depends_on=self.spec.depends_on,
            last_rows=tuple(r.text for r in self.ring.tail(self.host.settings.tail_rows)),
            rows_seen=self.ring.last_seq,
            rows_dropped=self.ring.dropped_total,
            usage=self.usage() if usage else None,
        )

    def usage(self) -> Usage:
        """The summed usage of the current run's tree (Tree.usage(): its live members, the keeper not among
        them); nothing running reads as zero processes. OSError where facts are not read (not Linux)."""
        tree = self.tree
        if tree is None or not self.live:
            return EMPTY_USAGE
        return tree.usage()

    @property
    def claimed_port(self) -> int | None:
        """The port this service holds for readiness: the one it was given, else the one it proved."""
        if self.spec.port is not None:
            return self.spec.port
        return self.port if self.status == READY else None

    # -- what the supervisor asks -------------------------------------------------------------

    def launch(self) -> None:
        """Start the lifecycle task (again, for a finished service restarted on request)."""
        if self.task is not None and not self.task.done():
            return
        if self.status in TERMINAL:  # revived: its dependencies were met by its first run
            self.status = STARTING
            self.intent = None
            self.reason = None
            self.streak = 0
            self.reaped = False
        self._loop = asyncio.get_running_loop()
        self.task = self._loop.create_task(self._lifecycle(), name=f"proctree service {self.id}")

    def request(self, intent: str) -> None:
        """Ask the lifecycle to stop or restart; a stop overrides a restart, never the other way round."""
        if not self.live or self.intent == STOP:
            return
        if intent == RESTART and self.status == WAITING:
            return  # nothing started yet: its first start is still to come
        self.intent = intent
        self._poke.set()
        self.host.changed()

    async def settled(self) -> None:
        """Wait until the lifecycle task is over (it always ends in a terminal status)."""
        task = self.task
        if task is not None and not task.done():
            await asyncio.wait([task])

    def reap(self) -> None:
        """The host is going away: SIGKILL the tree now and mark the service stopped. Synchronous, never raises."""
        if not self.live:
            return
        self.intent = STOP
        self.reaped = True
        tree = self.tree
        if tree is not None:
            kill_now(tree)
        self.status = STOPPED
        if self.ended_at is None or (self.started_at is not None and self.ended_at < self.started_at):
            self.ended_at = time.time()
        wake(self._poke, self._loop)

    # -- the lifecycle ------------------------------------------------------------------------

    async def _lifecycle(self) -> None:
        try:
            if self.status == WAITING and not await self._await_dependencies():
                return
            while True:
                if self.intent == STOP:
                    # Stopped between runs (a restart's backoff): the restart it announced never comes.
                    last = describe_exit(self.exit_code, self.exit_signal)
                    between = self.status == RESTARTING
                    self._finish(STOPPED, f"stopped before its restart (its last run {last})" if between else None)
                    return
                self.intent = None
                self._poke.clear()
                end = await self._run_once()
                if end is None:
                    return  # not started (failed, or stopped before the spawn): final already
                if self.intent == STOP or self.reaped:
                    self._finish(STOPPED)
                    return
                if self.intent == RESTART:
                    self._flush_output()
                    self.status = RESTARTING
                    self.reason = f"restart requested ({end.describe()})"
                    self._emit(_ev.RESTARTING)
                    continue
                if not await self._after_exit(end):
                    return
        except asyncio.CancelledError:
            self._abort()
            if self.status not in TERMINAL:
                self.status = STOPPED
                self.ended_at = time.time()
            raise
        except Exception as exc:  # a bug here must not leave the tree running nor the service live
            self._give_up(exc)
        finally:
            self.host.changed()  # whoever waits for this task to be over

    def _give_up(self, exc: Exception) -> None:
        """The lifecycle failed: kill the tree and end the service in a terminal status. Never raises.

        The task must never die with the service still live: nobody could
        stop, restart or wait for it, and it would hold its slot for good.
        """
        if self.reaped:
            # reap_sync() already SIGKILLed the tree: the host is going away (at interpreter exit
            # the executors a teardown needs are shut down first), so what fails now is expected.
            log.debug("service %s (%s): teardown after reap_sync failed", self.id, self.name, exc_info=exc)
        else:
            log.error("service %s (%s): the supervisor failed running it", self.id, self.name, exc_info=exc)
        self._abort()
        self.kill_incomplete = self.tree is not None
        # Still by intent: a service we were stopping is stopped, whatever failed on the way.
        status = STOPPED if self.intent == STOP else FAILED
        reason = f"internal error in the supervisor: {exc!r}"
        try:
            self._finish(status, reason)
        except Exception:  # even the bookkeeping failed: the status must still become terminal
            log.debug("service %s: finishing after an internal error failed", self.id, exc_info=True)
            self.status, self.reason = status, reason
            self.ended_at = self.ended_at or time.time()

    def _abort(self) -> None:
        """SIGKILL what is left of the tree now, if anything. Never raises."""
        tree = self.tree
        if tree is None:
            return
        try:
            if tree.returncode is not None:
                return
        except KeeperLost:
            return  # the owner has ended what its killed keeper left
        except Exception:
            pass  # unsure whether it ended: kill whatever the tree still reports
        kill_now(tree)

    async def _after_exit(self, end: RunEnd) -> bool:
        """The run ended by itself: restart (after the backoff) -> True; a final status -> False."""
        failed = end.code != 0  # a lost keeper (no status) counts as a crash
        if end.code == 0:
            self.completed = True
        if self._shell_could_not_run(end):
            # The shell's "command not found" / "cannot execute": restarting cannot help.
            what = "not found" if end.code == 127 else "cannot be run"
            self._finish(FAILED, f"the command {what} (the shell's exit status {end.code}; see its output)")
            return False
        decision = _restart.decide(
            self.spec.restart,
            self.spec.max_restarts,
            self.host.settings.backoff,
            failed=failed,
            uptime=end.uptime,
            streak=self.streak,
        )
        self.streak = decision.streak
        what = end.describe()
        self._flush_output()
        if decision.spent and not decision.crash_loop:
            self._finish(FAILED, f"{what}; not restarted (max_restarts={self.spec.max_restarts})")
            return False
        if decision.crash_loop:
            self.status = FAILED
            self.ended_at = self.ended_at or time.time()
            self.reason = (
                f"crash loop: {what}, {decision.streak + 1} times in a row within "
                f"{self.host.settings.backoff.reset_after:g} s of starting (max_restarts={self.spec.max_restarts})"
            )
            self._emit(_ev.CRASH_LOOP)
            self._finish(FAILED, self.reason)
            return False
        if not decision.restart:
            if end.keeper_lost is not None:
                self._finish(FAILED, what)  # not an exit of its own: its status was never known
            else:
                self._finish(EXITED)
            return False
        self.status = RESTARTING
        self.reason = f"{what}; restarting in {decision.delay:.2f} s"
        self._emit(_ev.RESTARTING)
        await self._sleep_unless_poked(decision.delay)
        return True

    def _shell_could_not_run(self, end: RunEnd) -> bool:
        """The run's 126 / 127 is the shell's own: it could not run a command, and said so last.

        A program (or a later step of a script) may exit 127 itself after
        working for a while: that is an ordinary failure, restarted as any
        other. Only a shell line's exit whose last output row is the shell's
        diagnostic ("not found", "Permission denied", ...) counts, before
        readiness.
        """
        if not isinstance(self.spec.command, str) or self.ready_at is not None:
            return False
        last = self.ring.tail(1)
        printed = bool(last) and last[0].seq > self._run_first_seq  # silent: not the shell complaining
        return shell_could_not_run(end.code, last[0].text if printed else None)

    async def _sleep_unless_poked(self, delay: float) -> None:
        if self.intent is not None:
            return
        try:
            await asyncio.wait_for(self._poke.wait(), delay)
        except asyncio.TimeoutError:
            pass

    # -- dependencies -------------------------------------------------------------------------

    def state(self) -> DependencyState:
        """What a service waiting on this one needs to know of it (satisfaction.verdict)."""
        return DependencyState(
            self.name, self.status, self.runs, self.completed, self.ready_timeout, self.describe_end()
        )

    def describe_end(self) -> str:
        return describe_end(self.status, self.reason, self.exit_code, self.exit_signal)

    async def _await_dependencies(self) -> bool:
        while True:
            if self.intent == STOP:
                self._finish(STOPPED, "stopped while waiting for its dependencies")
                return False
            waiting = []
            for dep, condition in self.needs:
                verdict = dependency_verdict(dep.state(), condition)
                if isinstance(verdict, str):
                    self._finish(FAILED, f"dependency {verdict}")
                    return False
                if verdict is None:
                    waiting.append(f"{dep.name} ({condition})")
            if not waiting:
                self.reason = None
                self.status = STARTING
                return True
            self.reason = "waiting for " + ", ".join(waiting)
            await self.host.next_change()

    # -- one run ------------------------------------------------------------------------------

    async def _run_once(self) -> RunEnd | None:
        spec = self.spec
        loop = asyncio.get_running_loop()
        env = build_env(spec.env)
        detector = Detector(
            spec.ready, spec.command, env, spec.port, cwd=spec.cwd, foreign=lambda: self.host.foreign_ports(self)
        )
        if detector.port is not None:
            # Before the spawn: somebody else's server on our port must never make us look ready.
            await asyncio.to_thread(detector.preflight)
        self.port = detector.port
        self.port_preoccupied = detector.port_preoccupied
        self.url = self.ready_by = None
        self.ready_at = self.ended_at = None
        self.exit_code = self.exit_signal = None
        self.kill_incomplete = False
        if self.intent == STOP:  # asked to stop during the pre-flight: nothing to spawn
            self._finish(STOPPED)
            return None
        try:
            tree = await spawn_command(
                spec.command,
                cwd=spec.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                contain=self.host.settings.contain,
                grace=self.stop_grace,
                stop_signal=signal.SIGTERM if spec.stop_signal is None else spec.stop_signal,
            )
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self.note(f"cannot start: {describe_error(exc)}")
            self._finish(FAILED, f"cannot start: {describe_error(exc)}")
            return None
        self.tree = tree
        self._run_first_seq = self.ring.last_seq
        self.mode = tree.mode
        self.pid = tree.pid
        self.started_at = time.time()
        if self.runs:
            self.restarts += 1
        self.runs += 1
        t0 = loop.time()
        if self.reaped:
            kill_now(tree)  # reap_sync() ran while this spawn was under way: it stays stopped
        else:
            self.status = STARTING
            self.reason = None
            self._detector = detector
            detector.members = lambda: [p.pid for p in tree.members()]
            self._emit(_ev.STARTED)
            if spec.ready.kind == "none":
                self.mark_running()
        transport: PipeReader | None = None
        eof = None
        watcher = None
        try:
            async with always_ended(tree) as run:
                transport, eof = await open_reader(tree, self.take_output)
                self.out.attach(transport)
                watcher = loop.create_task(self._watch_readiness_guarded(detector))
                exit_wait = run.watch_exit()
                while not exit_wait.done() and self.intent is None:
                    poke = loop.create_task(self._poke.wait())
                    try:
                        await asyncio.wait([exit_wait, poke], return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        poke.cancel()
                await run.stop_watching()
                raise_unexpected(exit_wait)  # a wait that failed otherwise is a bug: always_ended kills the tree
                # Stopped, restarted or ended by itself: the whole tree is ended (or confirmed gone) here.
                # Its last output is read, however far behind the consumer is: a pipe holds little.
                self.out.read_on()
                self.kill_incomplete = not await self._end_tree(tree)
        finally:
            if watcher is not None:
                watcher.cancel()
            self.out.read_on()
            self.out.attach(None)
            await close_reader(transport, eof)
            self._detector = None  # a last partial line proves nothing about a tree that is gone
            self._take_rows(self.ring.close())
        uptime = loop.time() - t0
        self.ended_at = time.time()
        try:
            returncode, lost = tree.returncode, None
        except KeeperLost as exc:
            returncode, lost = None, exc
        self.exit_code, self.exit_signal = exit_fields(returncode)
        if lost is not None and not self.reaped:
            self.note(describe_keeper_lost(lost))
        return RunEnd(self.exit_code, self.exit_signal, uptime, lost)

    async def _end_tree(self, tree: Tree) -> bool:
        """End the whole tree within the stop grace (treerun.end_tree); whether nothing of it is left."""
        ok, starved = await end_tree(tree, self.stop_grace, f"service {self.id} ({self.name})")
        if starved is not None:
            self.reason = starved
        return ok

    async def _watch_readiness_guarded(self, detector: Detector) -> None:
        """_watch_readiness, its failure logged: a bug there ends the watching, never the run or the loop's quiet."""
        try:
            await self._watch_readiness(detector)
        except Exception:
            log.error("service %s (%s): watching its readiness failed", self.id, self.name, exc_info=True)

    async def _watch_readiness(self, detector: Detector) -> None:
        await watch_probes(self, detector)

    def mark_ready(self, how: str) -> None:
        """Readiness proven (how: what proved it), if it is still to be proven for this run."""
        detector = self._detector
        if self.status not in (STARTING, RUNNING) or detector is None:
            return
        self._flush_output()  # the rows up to the proof are sent before the status changes
        self.status = READY
        self.ready_at = time.time()
        self.ready_by = how
        self.url = detector.url
        self.port = detector.port if detector.port is not None else self.port
        self._emit(_ev.READY)

    def mark_running(self) -> None:
        """Past ready_timeout with nothing that proved readiness: `running`."""
        if self.status == STARTING:
            self._flush_output()
            self.status = RUNNING
            self._emit(_ev.RUNNING)

    # -- output -------------------------------------------------------------------------------

    def note(self, text: str) -> None:
        """A row of the supervisor's own in the service's log (why it could not start, ...)."""
        self._take_rows(self.ring.feed(f"proctree: {text}\n".encode(errors="replace")))

    def take_output(self, data: bytes) -> None:
        """The reader's feed: a chunk of the tree's merged output."""
        try:
            self._take_rows(self.ring.feed(data))
        except Exception:  # never let a bug close the pipe under a running service (it would die of SIGPIPE)
            log.exception("service %s: reading its output failed", self.id)

    def hold_output(self, held: bool) -> None:
        """Stop (True) or go on (False) reading the output pipe (see OutputFeed.hold)."""
        self.out.hold(held)

    def _take_rows(self, rows: list[Row]) -> None:
        if not rows:
            return
        self.out.add(rows)  # first: the rows up to a proof go out before the `ready` event
        watch_lines(self, self._detector, (row.text for row in rows))

    def _flush_output(self) -> None:
        self.out.flush()

    def _send_rows(self, rows: tuple[Row, ...]) -> None:
        self.host.emit(_ev.ServiceEvent(_ev.OUTPUT, self.snapshot(), rows, 0))

    # -- events -------------------------------------------------------------------------------

    def _emit(self, kind: str) -> None:
        self._flush_output()  # output first: the rows a service printed come before its exit
        self.host.emit(_ev.ServiceEvent(kind, self.snapshot()))
        self.host.changed()

    def _finish(self, status: str, reason: str | None = None) -> None:
        self._flush_output()
        self.status = status
        if reason is not None:
            self.reason = reason
        if self.ended_at is None:
            self.ended_at = time.time()
        self._emit({STOPPED: _ev.STOPPED, EXITED: _ev.EXITED, FAILED: _ev.FAILED}[status])
