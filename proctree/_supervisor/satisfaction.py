"""Whether one dependency's condition is met, still to wait for, or can no longer be met: a pure rule.

The facts of the dependency come in as a small record (DependencyState), so
every case is tested on tables; the Service builds that record from its live
state. Nothing here reads a clock, a process or the supervisor.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import deps as _deps
from .snapshot import READY, RUNNING, TERMINAL


@dataclass(frozen=True)
class DependencyState:
    """What the rule needs of a dependency: its name, status, spawns so far, whether a run exited 0,
    its ready_timeout, and how it ended in words (outcome.describe_end), for the reason."""

    name: str
    status: str
    runs: int
    completed: bool
    ready_timeout: float
    ended: str


def verdict(dep: DependencyState, condition: str) -> bool | str | None:
    """True: met. None: wait. A str: it can no longer be met, and why."""
    ended = dep.status in TERMINAL
    if condition == _deps.STARTED:
        if dep.runs > 0:
            return True
        return f"{dep.name} {dep.ended} before it started" if ended else None
    if condition == _deps.READY:
        if dep.status == READY:
            return True
        if dep.status == RUNNING:
            return f"{dep.name} did not prove it was ready within {dep.ready_timeout:g} s (it is running)"
        return f"{dep.name} {dep.ended} before it was ready" if ended else None
    if dep.completed:
        return True
    return f"{dep.name} {dep.ended}" if ended else None
