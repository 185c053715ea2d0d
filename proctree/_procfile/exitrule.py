"""foreman's exit rule for `proctree up`: whether an entry's end ends the run, and with which status and why.

As in foreman, one entry's end stops the rest, unless it may end: its
settings say can_die, or it is a one-shot something waits on to complete (a
migration, a build) and it exited 0. With --exit-with NAME only NAME's end
(every instance of it) ends the run, with NAME's status; another entry that
ends first must not look like the tests passed. Pure: the plan and the ends,
in the order they are handled, in; decisions out. No clock, no process.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .config import ProcfilePlan, ProcfileService


@dataclass(frozen=True)
class RunEnding:
    """The run ends with status code; reason says why, in words."""

    code: int
    reason: str


class ExitRule:
    """The rule over one plan. on_end() is called once per instance that ended, in the order the ends are handled."""

    def __init__(self, services: Iterable[ProcfileService], exit_with: str | None = None) -> None:
        self._by_name = {s.name: s for s in services}
        # Entries something waits on to complete (migrations, builds): their exit 0 is their job done.
        self._one_shots = {
            dep for s in self._by_name.values() for dep, condition in s.depends_on.items() if condition == "completed"
        }
        self._exit_with = exit_with
        self._exit_with_count = sum(1 for s in self._by_name.values() if s.entry == exit_with)
        self._exit_with_status: dict[str, int] = {}
        self._finished: set[str] = set()  # instances whose end was handled (not --exit-with's)

    @classmethod
    def for_plan(cls, plan: ProcfilePlan, exit_with: str | None = None) -> ExitRule:
        return cls(plan.services, exit_with)

    def on_end(self, name: str, *, failed: bool, status: int, exit_code: int | None, how: str) -> RunEnding | None:
        """Instance name ended (failed: it failed, else it exited; status: the shell's status for its end;
        how: its end in words, "exited with code 3"). The run's end, or None: the run goes on."""
        service = self._by_name.get(name)
        if service is None:
            return None
        if self._exit_with is not None and service.entry == self._exit_with:
            self._exit_with_status[name] = status
            if len(self._exit_with_status) < self._exit_with_count:
                return None
            code = next((c for c in self._exit_with_status.values() if c != 0), 0)
            return RunEnding(code, f"{name} {how}")
        self._finished.add(name)
        if self._may_end(service, failed, exit_code):
            # Counted from the ends in the order they are handled: an entry whose end must stop
            # the run is never passed over.
            if len(self._finished) == len(self._by_name):
                return RunEnding(0, "every entry has ended")
            return None
        what = f"{name} {'failed' if failed else how}"
        if self._exit_with is not None:
            # The run must not look like the tests passed when they never finished.
            return RunEnding(status or 1, f"{what} before {self._exit_with} ended")
        return RunEnding(status, what)

    def _may_end(self, service: ProcfileService, failed: bool, exit_code: int | None) -> bool:
        if service.can_die:
            return True
        return not failed and exit_code == 0 and service.name in self._one_shots
