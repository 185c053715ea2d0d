"""The teardown engine's world: every system call it makes, behind one object.

The ladder (ladder.Ladder: machine._Teardown, listed._ListedTeardown) decides;
the World it is given acts. System
is the real one: process reads through proctree._table, identity-checked
sends through signals, exit waiting through exitwait and pidexit, reaping
through reaping, the clock, the fork counter and the fd budget. Tests pass a fake
World to run the state machine on a simulated table; the reaper and the
supervisor can pass their own to reuse the engine.

System looks each module function up when called (never binds it at import),
so a test that swaps signals.send or forces signals._pidfd_ok still reaches
the engine. Must never: decide anything (that is the engine's job), or
signal or reap by any other path than signals and reaping.
"""

from __future__ import annotations

import resource
import time
from typing import Protocol

from .._table import binding as _binding
from .._table.model import Proc, Snapshot
from . import exitwait as _exitwait
from . import pidexit as _pidexit
from . import reaping as _reaping
from . import signals as _signals
from .exitwait import Waiter
from .signals import Guard, Outcome, Target


class World(Protocol):
    """What the engine needs from the system. Each method is one effect or one read."""

    # -- process reads
    def proc(self, pid: int) -> Proc: ...

    def snapshot(self) -> Snapshot: ...

    def is_kernel_thread(self, pid: int) -> bool: ...

    # -- targets and sends (signals.py's contracts)
    def guard(self) -> Guard: ...

    def open_target(self, proc: Proc, guard: Guard, use_pidfd: bool) -> Target | None: ...

    def send(self, target: Target, sig: int, guard: Guard) -> Outcome: ...

    def send_group(self, pgid: int, sig: int, guard: Guard, leader: Target) -> Outcome: ...

    def target_ended(self, target: Target) -> bool: ...

    # -- waiting and time
    def make_waiter(self, use_pidfd: bool) -> Waiter: ...

    def polling_waiter(self) -> Waiter: ...

    def monotonic(self) -> float: ...

    # -- capacities
    def fork_count(self) -> int | None: ...

    def pidfds_available(self) -> bool: ...

    def fd_budget(self) -> int: ...

    # -- reaping (reaping.py's contracts)
    def reap_zombie_child(self, pid: int) -> int | None: ...

    def reap_if_own_child(self, target: Target, me: int) -> int | None: ...

    def unheld_target(self, proc: Proc) -> Target: ...


class System:
    """The real world: this machine's process table, signals, clock and limits."""

    def proc(self, pid: int) -> Proc:
        return _binding.proc(pid)

    def snapshot(self) -> Snapshot:
        return _binding.snapshot()

    def is_kernel_thread(self, pid: int) -> bool:
        return _binding.is_kernel_thread(pid)

    def guard(self) -> Guard:
        return _signals.Guard()

    def open_target(self, proc: Proc, guard: Guard, use_pidfd: bool) -> Target | None:
        return _signals.open_target(proc, guard, use_pidfd)

    def send(self, target: Target, sig: int, guard: Guard) -> Outcome:
        return _signals.send(target, sig, guard)

    def send_group(self, pgid: int, sig: int, guard: Guard, leader: Target) -> Outcome:
        return _signals.send_group(pgid, sig, guard, leader)

    def target_ended(self, target: Target) -> bool:
        """True if target's process is gone or a zombie (its pidfd turned readable, or by reading)."""
        if target.pidfd is not None:
            return _pidexit.exited(target.pidfd)
        return _exitwait.ended_by_reading(target)

    def make_waiter(self, use_pidfd: bool) -> Waiter:
        return _exitwait.make_waiter(use_pidfd)

    def polling_waiter(self) -> Waiter:
        return _exitwait.PollingWaiter()

    def monotonic(self) -> float:
        return time.monotonic()

    def fork_count(self) -> int | None:
        """Processes created since boot (Linux /proc/stat "processes"), or None where unknown.

        A 64-bit counter of every fork and clone on the machine: if it has not
        moved, no process can have joined the tree.
        """
        try:
            with open("/proc/stat", "rb") as f:
                for line in f:
                    if line.startswith(b"processes "):
                        return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return None

    def pidfds_available(self) -> bool:
        return _signals.pidfds_available()

    def fd_budget(self) -> int:
        """How many pidfds to hold at once: at most half the caller's fd limit, so
        the caller keeps room; members beyond it use start-time checks and polling."""
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY or soft <= 0:
            soft = 65536
        return max(0, min(soft // 2 - 64, 16384))

    def reap_zombie_child(self, pid: int) -> int | None:
        return _reaping.reap_zombie_child(pid)

    def reap_if_own_child(self, target: Target, me: int) -> int | None:
        return _reaping.reap_if_own_child(target, me)

    def unheld_target(self, proc: Proc) -> Target:
        """A Target for proc without a pidfd (for reaping by pid once its identity was seen)."""
        return _signals.Target(proc, None)
