"""The teardown ladder: the one place in Python where a tree is stopped, rung by rung.

Every teardown climbs the same ladder (docs/teardown.md says why):
  1. take the members before signalling anything, by identity;
  2. the stop signal (SIGTERM unless the caller chose another) + SIGCONT to
     every member by identity, at most once each (a member the caller says
     already had one is not sent another);
  3. wait for exits by events (pidfds / kqueue), rescanning on a backoff so
     late joiners are taken too (and get the same signals);
  4. after the grace, end what is left, and report.

How members are found and how the last rung kills depend on what holds the
tree: machine._Teardown follows a root's descendants and kin (and freezes
before the kill); listed._ListedTeardown takes what the kernel lists (a
cgroup) and ends it with one write. They override _take, _rescan,
_leader_present, _settled, _escalate, _report, steps and abort; everything
else, and the order of the signals, is here. The C keeper's ladder
(csrc/keeper/teardown.c) is the other one; tests/teardown/test_ladders_agree.py
states what the two must agree on.

Must never: signal anything but a member held by identity (a Target), through
the World; send SIGCONT before the stop signal; send a second stop signal.
"""

from __future__ import annotations

import signal
from collections.abc import Generator, Iterable, Mapping

from .._table.model import Proc
from . import signals as _signals
from .exitwait import Waiter
from .member import Member, MemberState
from .report import TeardownReport
from .requests import Request, _Wait
from .signals import Guard, Target
from .world import System, World

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

# Rescans while waiting: soon after the signals (that is when forks race
# them), then backing off so a long grace costs few scans.
RESCAN_FIRST = 0.005
RESCAN_MAX = 0.1
# Async face: hand control back to the loop after this many members' worth of syscalls.
BATCH = 64


class Ladder:
    """One teardown's rungs. steps() yields _Wait and _Call requests and returns the TeardownReport.

    world: every system call goes through it (world.System, the real one, by default).
    """

    def __init__(
        self,
        grace: float,
        *,
        world: World | None = None,
        stop_signal: int = signal.SIGTERM,
        already: Mapping[tuple[int, int], int] | None = None,
    ) -> None:
        self.world: World = System() if world is None else world
        self.stop_signal = stop_signal
        # (pid, start time) -> the stop signal another path (the keeper's forward) already sent it
        self.already = dict(already or {})
        self.deadline = float("inf")  # the end of the grace, once the polite signals are out
        self.grace = grace
        self.use_pidfd = self.world.pidfds_available()
        self.members: dict[tuple[int, int], Member] = {}  # (pid, start_time) -> Member, in discovery order
        # id(target) -> Member still to end (kept so each wakeup is O(ended))
        self.unended: dict[int, Member] = {}
        self.scan_cost = 0.0  # seconds the last scan took: paces the rescans
        self.anchors: dict[int, int] = {}  # pid -> start_time of every member (and a tree's root)
        self.killing = False
        # Set by steps() (the guard reads the caller's ancestors, the waiter holds an fd):
        # nothing touches the system before the run starts.
        self.guard: Guard | None = None
        self.waiter: Waiter | None = None
        self.fd_budget = self.world.fd_budget()

    # -- the rungs that depend on what holds the tree --------------------------

    def steps(self) -> Generator[Request, Any, TeardownReport]:
        raise NotImplementedError

    def abort(self) -> None:
        """Cancelled or interrupted: end the whole tree at once, without the grace."""
        raise NotImplementedError

    def _take(self, root: Proc | None) -> Generator[Request, Any, list[Member]]:
        raise NotImplementedError

    def _rescan(self, late: bool, kin: bool = True) -> Generator[Request, Any, list[Member]]:
        raise NotImplementedError

    def _leader_present(self) -> bool:
        """True if members that all ended may still have left something to find."""
        return False

    def _settled(self, late: list[Member]) -> bool:
        """True if a scan that found `late` proves nothing more is there."""
        return not late

    def _escalate(self) -> Generator[Request, Any, None]:
        raise NotImplementedError

    def _report(self, t0: float, root: Proc | None) -> TeardownReport:
        raise NotImplementedError

    # -- bookkeeping and the shared rungs ----------------------------------------

    def _unended_members(self) -> list[Member]:
        """A copy of the members still to end (safe to iterate while signalling)."""
        return list(self.unended.values())

    def _guard(self) -> Guard:
        assert self.guard is not None, "steps() sets the guard before anything is signalled"
        return self.guard

    def _waiter(self) -> Waiter:
        assert self.waiter is not None, "steps() makes the waiter before any member is added"
        return self.waiter

    def _record(self, proc: Proc, late: bool) -> Member:
        m = Member(proc, late)
        self.members[proc.identity] = m
        self.anchors[proc.pid] = proc.start_time
        return m

    def _admit(self, proc: Proc, target: Target | None, late: bool) -> Member:
        """Record proc as a member held by target (None: it ended before it could be held), and watch it."""
        m = self._record(proc, late)
        m.target = target
        if target is None:
            m.status = MemberState.EXITED  # ended (or its pid is someone else's) before we got to it
            return m
        if target.pidfd is not None:
            self.fd_budget -= 1
        self.unended[id(target)] = m
        if not self._waiter().watch(target):
            self._ended(m)
        return m

    def _ended(self, m: Member) -> None:
        self.unended.pop(id(m.target), None)
        m.status = MemberState.KILLED if self.killing and m.signalled else MemberState.EXITED

    def _collect(self) -> None:
        for t in self._waiter().ready():
            m = self.unended.get(id(t))
            if m is not None:
                self._ended(m)

    def _signal(self, m: Member, sig: int) -> None:
        if m.status is not MemberState.LIVE or m.target is None:
            return
        outcome = self.world.send(m.target, sig, self._guard())
        if outcome == _signals.DENIED:
            m.status = MemberState.DENIED
            self.unended.pop(id(m.target), None)
        elif outcome == _signals.SENT and sig in (self.stop_signal, signal.SIGKILL, signal.SIGSTOP):
            m.signalled = True
            if sig == self.stop_signal and m.stop is None:
                m.stop = sig

    def _polite(self, ms: Iterable[Member]) -> Generator[Request, Any, None]:
        """The stop signal then SIGCONT to each member, once (yields to the loop between batches).

        A member that already had a stop signal (self.already) is sent
        neither: a second stop signal is "force quit" to many servers, and it
        is draining already.
        """
        for i, m in enumerate(ms):
            if m.stop is not None:
                continue
            earlier = self.already.get(m.proc.identity)
            if earlier is not None:
                m.stop = earlier
                m.signalled = m.status is MemberState.LIVE
            else:
                self._signal(m, self.stop_signal)
                if m.stop is not None:  # CONT only after a stop signal that was sent: alone it would come first
                    self._signal(m, signal.SIGCONT)
            if i % BATCH == BATCH - 1:
                yield _Wait(None, 0)

    def _wait_spec(self, until: float) -> _Wait:
        timeout = max(0.0, until - self.world.monotonic())
        interval = self._waiter().poll_interval()
        if interval is not None:
            timeout = min(timeout, interval)
        return _Wait(self._waiter().fileno(), timeout)

    def _climb(self, t0: float, root: Proc | None) -> Generator[Request, Any, TeardownReport]:
        """Make the waiter, climb the ladder, and close every target and the waiter however it ends."""
        self.waiter = self.world.make_waiter(self.use_pidfd)
        try:
            return (yield from self._run(t0, root))
        finally:
            self._close()

    def _run(self, t0: float, root: Proc | None) -> Generator[Request, Any, TeardownReport]:
        """The ladder: take the tree, the stop signal + CONT to each member, wait out the grace, kill, report.

        The steps that depend on how members are found (_take, _rescan,
        _leader_present) and ended at the last (_escalate) are methods a
        machine over another kind of membership overrides (listed.py).
        """
        # 1. The tree, before any signal; 2. the stop signal + CONT to every member.
        polite = yield from self._take(root)
        yield from self._polite(polite)

        # 3. Wait for the members to end, keeping the tree current.
        self.deadline = self.world.monotonic() + self.grace
        interval = RESCAN_FIRST
        next_scan = self.world.monotonic() + interval
        while True:
            before = len(self.unended)
            self._collect()
            if len(self.unended) < before:
                # Still dying: a rescan now would only slow the exits down;
                # forks of members that stay alive are caught once it stalls.
                next_scan = max(next_scan, self.world.monotonic() + RESCAN_FIRST)
            if not self.unended:
                # Every known member has ended. Their orphans (if any) can now
                # only be found by kinship, which needs a group or session
                # leader still present: look once more if one is.
                if not self._leader_present():
                    break
                late = yield from self._rescan(late=True)
                if self._settled(late):
                    break
                yield from self._polite(late)
                continue
            now = self.world.monotonic()
            deadline = self.deadline
            if now >= deadline:
                break
            if now >= next_scan:
                late = yield from self._rescan(late=True, kin=False)
                yield from self._polite(late)
                # Back off, and never spend more than about a fifth of the wait
                # scanning (a snapshot of a big machine takes milliseconds).
                interval = min(interval * 2, RESCAN_MAX)
                next_scan = self.world.monotonic() + max(interval, 4 * self.scan_cost)
                continue
            yield self._wait_spec(min(deadline, next_scan))

        # 4. Escalate: end what is left.
        yield from self._escalate()

        self._collect()
        self._finish()
        return self._report(t0, root)

    def hurry(self) -> None:
        """Skip the rest of the grace (a stop request): the machine goes on to the kill and its report."""
        self.grace = 0.0
        self.deadline = min(self.deadline, self.world.monotonic())

    def _close(self) -> None:
        for m in self.members.values():
            if m.target is not None:
                m.target.close()
        if self.waiter is not None:
            self.waiter.close()

    def _finish(self) -> None:
        """After the last rung, before the report (a tree reaps the caller's children among its members)."""
