"""The ladder over members the kernel lists (a cgroup): no root, no kinship, one write kills them all.

The rungs are ladder.py's; what differs from a tree from a root is how
members are found and the last rung. Members are what the world lists
(cgroup.procs), each read, held (pidfd, or its start time), then confirmed by
a second listing made while it is held: a pid listed then names a member, or
a process that ended since. The last rung is the world's kill_all
(cgroup.kill, or freeze and kill where the kernel lacks it) plus SIGKILL to
each member by identity, so a failed kill_all still ends them.

Must never: signal a spared pid (the keeper) or a member listed as hidden
(cgroup.procs says 0 for a process outside our pid namespace: it is counted,
and only kill_all reaches it); signal a pid before it was confirmed listed
while held.
"""

from __future__ import annotations

import signal
from collections.abc import Generator, Iterable, Mapping
from typing import Protocol

from .._errors import AccessDenied, NoSuchProcess
from .._table.model import Proc
from .ladder import Ladder
from .member import Member, MemberState, signal_name
from .report import TeardownReport
from .requests import Request
from .signals import Guard, Target
from .world import World

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

# How long SIGKILLed members may take to go before they count as survivors.
KILL_PATIENCE = 2.0
# While they go, the listing is read again this often for late joiners.
KILL_RESCAN = 0.02


class ListedWorld(World, Protocol):
    """A World whose members the kernel lists and can kill in one step (a cgroup's)."""

    def listed(self) -> tuple[list[int], int]:
        """(the member pids visible here, how many more are listed as hidden)."""
        ...

    def hold(self, pid: int, guard: Guard, use_pidfd: bool) -> Target | None:
        """signals.hold: a Target for whatever holds pid now, None if it is gone or exiting."""
        ...

    def kill_all(self, use_pidfd: bool) -> None:
        """SIGKILL every member, hidden ones too (OSError or ValueError if it could not)."""
        ...


class _ListedTeardown(Ladder):
    """One teardown of the members a ListedWorld lists (report: root None, mode "cgroup").

    spare: pids never signalled one by one (the keeper). With no grace the
    stop signal is skipped (a TERM an instant before the KILL would only cost
    time); the members are still read first, for the report.
    """

    def __init__(
        self,
        world: ListedWorld,
        grace: float,
        *,
        spare: Iterable[int] = (),
        stop_signal: int = signal.SIGTERM,
        already: Mapping[tuple[int, int], int] | None = None,
    ) -> None:
        super().__init__(grace, world=world, stop_signal=stop_signal, already=already)
        self.lister = world
        self.spare = frozenset(spare)
        self.by_pid: dict[int, Member] = {}  # the latest member seen under each pid
        self.kill_sent: set[tuple[int, int]] = set()  # members alive at a kill round
        self.hidden = 0  # the most members the listing ever showed as hidden

    def steps(self) -> Generator[Request, Any, TeardownReport]:
        t0 = self.world.monotonic()
        self.guard = self.world.guard()
        return (yield from self._climb(t0, None))

    def _take(self, root: Proc | None) -> Generator[Request, Any, list[Member]]:
        first = yield from self._rescan(late=False)
        return first if self.grace > 0 else []

    def _rescan(self, late: bool, kin: bool = True) -> Generator[Request, Any, list[Member]]:
        """Take in every listed member not yet known; return those held (the ones to signal).

        All are read before any is signalled: a TERM can end the command, and
        the keeper then ends the rest at once, so a member read after the
        first send might be missing from the report.
        """
        t = self.world.monotonic()
        visible, hidden = self.lister.listed()
        self.hidden = max(self.hidden, hidden)
        held: list[Target] = []
        for pid in visible:
            known = self.by_pid.get(pid)
            if known is not None and known.status in (MemberState.LIVE, MemberState.DENIED):
                continue  # held and alive: its pid cannot name another process yet
            if pid in self.spare or not self._guard().allows(pid):
                continue
            try:
                target = self.lister.hold(pid, self._guard(), self.use_pidfd)
            except (NoSuchProcess, AccessDenied, OSError):
                continue  # unreadable: nothing to record it by (kill_all still ends it)
            if target is None:
                self._take_ended(pid, late)
            elif target.proc.identity in self.members:
                target.close()
            else:
                held.append(target)
        listed = set(self.lister.listed()[0]) if held else set()
        added = []
        for target in held:
            proc = target.proc
            if proc.pid in listed:
                added.append(self._take_member(proc, target, late))
                continue
            target.close()
            if self._ended_since(proc):
                # Exiting (the keeper may be ending the tree too): a member when listed, gone now.
                self._take_member(proc, None, late)
            # else its pid was reused by a process outside the tree since the first listing
        self.scan_cost = self.world.monotonic() - t
        return added
        yield  # a generator, as the ladder's rescans are; it makes no request of its own

    def _take_member(self, proc: Proc, target: Target | None, late: bool) -> Member:
        m = self._admit(proc, target, late)
        self.by_pid[proc.pid] = m
        return m

    def _take_ended(self, pid: int, late: bool) -> None:
        """A listed pid that exited before it could be held: a member all the same, if its zombie is still there."""
        try:
            proc = self.world.proc(pid)
        except (NoSuchProcess, AccessDenied, OSError):
            return
        if proc.is_zombie and proc.identity not in self.members:
            self._take_member(proc, None, late)

    def _ended_since(self, proc: Proc) -> bool:
        """proc (as read) is gone or a zombie now: it ended, rather than its pid being reused."""
        try:
            now = self.world.proc(proc.pid)
        except NoSuchProcess:
            return True
        except (AccessDenied, OSError):
            return False
        return now.start_time == proc.start_time and now.is_zombie

    def _escalate(self) -> Generator[Request, Any, None]:
        """kill_all and SIGKILL by identity to each member left, late joiners too, until they are gone.

        Each member is sent its SIGKILL once; after that only the exits are
        waited for. kill_all runs again only for a late joiner (cgroup.kill
        reaches every process in the cgroup when it is written, and the kernel
        kills a child forked meanwhile at birth) or when it failed: re-sending
        to the dying members would cost a write and a signal per member on
        every wake-up while 100 processes exit.
        """
        self.killing = True
        deadline = self.world.monotonic() + KILL_PATIENCE
        killed_all = False
        while True:
            self._collect()
            yield from self._rescan(late=True)  # a late joiner now: killed with the rest
            live = [m for m in self.members.values() if m.status in (MemberState.LIVE, MemberState.DENIED)]
            if not live:
                return
            unsent = [m for m in live if m.proc.identity not in self.kill_sent]
            # Whatever is still alive now ends by this kill, whichever of the
            # two sends reaches it first.
            self.kill_sent.update(m.proc.identity for m in unsent)
            if unsent or not killed_all:
                try:
                    self.lister.kill_all(self.use_pidfd)
                    killed_all = True
                except (OSError, ValueError):
                    pass  # the members are still killed one by one below, and kill_all tried again
            for m in unsent:
                self._signal(m, signal.SIGKILL)
            now = self.world.monotonic()
            if now >= deadline:
                return
            yield self._wait_spec(min(deadline, now + KILL_RESCAN))

    def abort(self) -> None:
        """Cancelled or interrupted: kill_all at once (it reaches every member, hidden ones too)."""
        if self.waiter is None:
            return
        try:
            self.lister.kill_all(self.use_pidfd)
        except (OSError, ValueError):
            pass  # nothing more can be done without waiting
        finally:
            self._close()

    def _report(self, t0: float, root: Proc | None) -> TeardownReport:
        ms = list(self.members.values())
        ended = (MemberState.EXITED, MemberState.KILLED)
        return TeardownReport(
            root=None,
            found=tuple(m.proc for m in ms),
            exited=tuple(m.proc for m in ms if m.status in ended and m.proc.identity not in self.kill_sent),
            killed=tuple(m.proc for m in ms if m.proc.identity in self.kill_sent),
            survivors=tuple(m.proc for m in ms if m.status not in ended),
            late=tuple(m.proc for m in ms if m.late),
            denied=tuple(m.proc for m in ms if m.status is MemberState.DENIED),
            elapsed=self.world.monotonic() - t0,
            mode="cgroup",
            signals={m.proc.pid: signal_name(m.stop) for m in ms if m.stop is not None},
            extra={"hidden": self.hidden} if self.hidden else {},
        )
