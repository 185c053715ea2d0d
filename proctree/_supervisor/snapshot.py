"""ServiceSnapshot: the immutable picture of one service that callers and listeners see.

Listeners get snapshots, never the live record, so a bug on the reading side
cannot change supervisor state. This module is pure (no processes, no I/O).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .._table.usage import Usage

# Live statuses: the service holds a slot and something may still happen to it.
WAITING = "waiting"  # declared, waiting for its dependencies before it is spawned
STARTING = "starting"  # spawned, readiness not proven yet
READY = "ready"  # readiness proven (ready_by says how)
RUNNING = "running"  # alive past ready_timeout with nothing that proved readiness: an honest third state
RESTARTING = "restarting"  # its tree ended; the next start is scheduled (backoff) or under way
# Terminal statuses: nothing further happens unless it is restarted on request.
EXITED = "exited"  # ended by itself
FAILED = "failed"  # could not start, a dependency failed, it crashed past its restart budget, or its keeper was killed
STOPPED = "stopped"  # we stopped it: decided by intent, never by how the exit looked

LIVE = frozenset({WAITING, STARTING, READY, RUNNING, RESTARTING})
TERMINAL = frozenset({EXITED, FAILED, STOPPED})
STATUSES = (WAITING, STARTING, READY, RUNNING, RESTARTING, EXITED, FAILED, STOPPED)


def is_terminal(status: str) -> bool:
    """Whether nothing further will happen to a service in this status (unless restarted on request)."""
    return status in TERMINAL


@dataclass(frozen=True)
class ServiceSnapshot:
    """One service at one moment.

    id: "s1", "s2", ... never reused. name: the caller's name (the id when none
    was given). command: the shell line, or the argv as a tuple. pid: the
    command's pid in the current (or last) run, None before the first spawn.
    started_at / ready_at / ended_at: time.time() of the current run's spawn,
    proof of readiness and end (None until they happen). exit_code: the
    command's exit status when it exited, exit_signal: the name of the signal
    that ended it ("SIGKILL"). url / port: what readiness learned (or the port
    given or read from the command). ready_by: how readiness was proven ("url",
    "phrase", "log", "tcp", "http", "exec"). port_preoccupied: the port already
    answered before the spawn, so the port probe was disabled. restarts: how
    many times it was started again. last_rows: its newest output rows (control
    sequences stripped). rows_seen: the log cursor (the seq of the newest row).
    kill_incomplete: a stop could not confirm its whole tree is gone. reason:
    why it failed, or why it is waiting. mode: the containment of its tree.
    usage: its tree's summed usage (a Usage: processes, rss, vms, cpu_user,
    cpu_system) when the snapshot was asked for with usage=True, else None;
    a service with no live tree reads Usage(0, 0, 0, 0.0, 0.0).
    """

    id: str
    name: str
    command: str | tuple[str, ...]
    status: str
    pid: int | None = None
    cwd: str | None = None
    started_at: float | None = None
    ready_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    exit_signal: str | None = None
    url: str | None = None
    port: int | None = None
    ready_by: str | None = None
    port_preoccupied: bool = False
    restarts: int = 0
    last_rows: tuple[str, ...] = ()
    rows_seen: int = 0
    rows_dropped: int = 0
    kill_incomplete: bool = False
    reason: str | None = None
    mode: str | None = None
    depends_on: tuple[tuple[str, str], ...] = ()
    usage: Usage | None = None

    @property
    def live(self) -> bool:
        """Whether the service still holds a slot (not exited, failed or stopped)."""
        return self.status in LIVE

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field and live (the argv as a list, depends_on as a mapping)."""
        out = dataclasses.asdict(self)
        out["live"] = self.live  # a property, so asdict() leaves it out; readers of --json need it
        if isinstance(self.command, tuple):
            out["command"] = list(self.command)
        out["last_rows"] = list(self.last_rows)
        out["depends_on"] = dict(self.depends_on)
        out["usage"] = None if self.usage is None else self.usage.to_dict()
        return out
