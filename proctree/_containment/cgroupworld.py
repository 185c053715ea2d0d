"""A tree cgroup as the teardown ladder's world: members from cgroup.procs, cgroup.kill as the last rung.

The decisions are the ladder's (proctree/_teardown/listed.py); this world
only lists the cgroup's members (and those of the cgroups below it) and
writes its kill. terminate() is how a Tree, a held Popen, the keeper's loss
paths and the reaper end a cgroup's members.

Must never: list or kill a cgroup that is not one of ours (cgroup.py refuses
a path outside our tree cgroups); signal by any path but the ladder's.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Mapping

from .._teardown import engine as _engine
from .._teardown import signals as _signals
from .._teardown.listed import _ListedTeardown
from .._teardown.report import TeardownReport
from .._teardown.signals import Guard, Target
from .._teardown.world import System
from . import cgroup as _cgroup


class CgroupWorld(System):
    """The real system, whose tree is the cgroup at path (and the cgroups nested below it)."""

    def __init__(self, path: str) -> None:
        self.path = os.path.normpath(path)

    def listed(self) -> tuple[list[int], int]:
        visible, hidden = _cgroup.members(self.path)
        return list(visible), hidden

    def hold(self, pid: int, guard: Guard, use_pidfd: bool) -> Target | None:
        return _signals.hold(pid, guard, use_pidfd)

    def kill_all(self, use_pidfd: bool) -> None:
        _cgroup.kill(self.path, use_pidfd=use_pidfd)


def terminate(
    path: str,
    grace: float,
    *,
    spare: Iterable[int] = (),
    stop_fd: int | None = None,
    stop_signal: int = signal.SIGTERM,
    already: Mapping[tuple[int, int], int] | None = None,
) -> TeardownReport:
    """End every process in the tree cgroup at path and return the TeardownReport (root None, mode "cgroup").

    The stop signal (SIGTERM by default) + SIGCONT to each member by identity,
    once, late joiners too (none to a member in already, which had one); wait
    (event-driven) up to grace for them to exit; then cgroup.kill, or freeze
    and kill where the kernel lacks it, and SIGKILL each member left (with no
    grace, straight to the kill; the members are read first, for the report).
    spare: pids never signalled one by one (the keeper). stop_fd: once
    readable, the rest of the grace is skipped.
    """
    teardown = _ListedTeardown(CgroupWorld(path), grace, spare=spare, stop_signal=stop_signal, already=already)
    return _engine.run_blocking(teardown, stop_fd)


def ladder(path: str, grace: float) -> _ListedTeardown:
    """terminate(path, grace)'s teardown, not yet started: for a driver that runs it beside others (the reaper's)."""
    return _ListedTeardown(CgroupWorld(path), grace)
