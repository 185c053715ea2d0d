"""TeardownReport: what a teardown found, and how each member ended."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .._table.model import Proc

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class TeardownReport:
    """The outcome of one teardown. Every tuple holds Proc records.

    found:     every process taken as part of the tree (late joiners included)
    exited:    ended after the polite signals, within the grace
    killed:    needed SIGKILL
    survivors: still alive after everything (empty unless something is unkillable)
    late:      joined the tree during the teardown and were handled too
    denied:    members the caller may not signal (AccessDenied); also in survivors if alive
    truncated: the tree exceeded max_procs; what was found was still ended, but
               the rest may survive, so `ok` is False
    elapsed:   seconds from the call to the report
    signals:   pid -> the name of the stop signal each member got ("SIGTERM"), once;
               a member that ended before it was sent one is absent (SIGKILL, for
               the members in `killed`, came on top after the grace)
    """

    root: Proc | None
    found: tuple[Proc, ...] = ()
    exited: tuple[Proc, ...] = ()
    killed: tuple[Proc, ...] = ()
    survivors: tuple[Proc, ...] = ()
    late: tuple[Proc, ...] = ()
    denied: tuple[Proc, ...] = ()
    truncated: bool = False
    elapsed: float = 0.0
    mode: str = "plain"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    signals: dict[int, str] = field(default_factory=dict, compare=False)

    @property
    def ok(self) -> bool:
        """True when nothing of the tree survived, as far as the teardown can know.

        A truncated teardown held only max_procs members: what it could not
        hold may still run, so it is never ok.
        """
        return not self.survivors and not self.truncated

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (Proc records become dicts)."""

        def procs(ps: tuple[Proc, ...]) -> list:
            return [p._asdict() for p in ps]

        return {
            "root": self.root._asdict() if self.root else None,
            "ok": self.ok,
            "found": procs(self.found),
            "exited": procs(self.exited),
            "killed": procs(self.killed),
            "survivors": procs(self.survivors),
            "late": procs(self.late),
            "denied": procs(self.denied),
            "truncated": self.truncated,
            "elapsed": round(self.elapsed, 6),
            "mode": self.mode,
            "signals": {str(pid): name for pid, name in sorted(self.signals.items())},
            **({"extra": self.extra} if self.extra else {}),
        }


def replace(report: TeardownReport, **changes: Any) -> TeardownReport:
    """dataclasses.replace, for modules that load this one lazily (a start must not pay for dataclasses)."""
    return dataclasses.replace(report, **changes)
