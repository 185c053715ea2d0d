"""The reaper's records: Orphan, Skipped and ReapReport (immutable, JSON-ready)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._table.model import Proc
from .._teardown.report import TeardownReport

REASONS = ("owner-exited", "owner-pid-reused", "cgroup-owner-gone", "receipt-owner-gone")


@dataclass(frozen=True)
class Orphan:
    """A process whose owner is provably gone.

    reason:   "owner-exited", "owner-pid-reused", "cgroup-owner-gone",
              "receipt-owner-gone", or the name of the rule that matched
    owner:    (pid, start time) of the owner the evidence names; start time
              None where the evidence carries none (a rule's spawner pid)
    via:      how it was attributed: "marker", "ancestor <pid>", "cgroup <path>",
              "session <sid>", "group <pgid>" or "rule <name>"
    evidence: one human-readable line
    """

    proc: Proc
    reason: str
    owner: tuple[int, int | None]
    via: str
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "proc": self.proc._asdict(),
            "reason": self.reason,
            "owner": {"pid": self.owner[0], "start_time": self.owner[1]},
            "via": self.via,
            "evidence": self.evidence,
        }


@dataclass(frozen=True)
class Skipped:
    """A process (or a piece of evidence) that was not taken, and why."""

    pid: int | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "reason": self.reason}


@dataclass(frozen=True)
class ReapReport:
    """What reap_orphans selected and how each orphan ended.

    candidates:       every Orphan selected (in dry-run mode, nothing more happened)
    exited / killed:  ended by SIGTERM within the grace / needed SIGKILL
    survivors:        still alive afterwards (ok is False)
    late:             joined an orphan's tree during the teardown and were ended too
    skipped:          processes and evidence not taken, with the reason
    warnings:         what limited the sweep (unreadable evidence, bounds)
    cgroups_removed:  leftover proctree cgroups removed (dry run: those an empty, dead cgroup would be now)
    receipts_removed: receipts of trees that are entirely gone, removed (dry run: those that would be now)
    """

    candidates: tuple[Orphan, ...] = ()
    exited: tuple[Proc, ...] = ()
    killed: tuple[Proc, ...] = ()
    survivors: tuple[Proc, ...] = ()
    late: tuple[Proc, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    warnings: tuple[str, ...] = ()
    cgroups_removed: tuple[str, ...] = ()
    receipts_removed: tuple[str, ...] = ()
    dry_run: bool = False
    elapsed: float = 0.0
    teardowns: tuple[TeardownReport, ...] = field(default=(), compare=False)

    @property
    def ok(self) -> bool:
        """True when nothing selected survived (always True for a dry run)."""
        return not self.survivors

    def to_dict(self) -> dict[str, Any]:
        def procs(ps: tuple[Proc, ...]) -> list[dict[str, Any]]:
            return [p._asdict() for p in ps]

        return {
            "ok": self.ok,
            "dry_run": self.dry_run,
            "candidates": [o.to_dict() for o in self.candidates],
            "exited": procs(self.exited),
            "killed": procs(self.killed),
            "survivors": procs(self.survivors),
            "late": procs(self.late),
            "skipped": [s.to_dict() for s in self.skipped],
            "warnings": list(self.warnings),
            "cgroups_removed": list(self.cgroups_removed),
            "receipts_removed": list(self.receipts_removed),
            "elapsed": round(self.elapsed, 6),
        }
