"""The ladder for a tree from its root: end a process and everything it started, and nothing else.

The rungs are ladder.py's (the stop signal + CONT once to each member, the
grace with rescans, the kill, the report); this class says how a tree from a
root is found and ended at the last (docs/teardown.md says why):
  1. the tree is one snapshot, followed by parent links and kinship (the
     groups and sessions members lead), taken by identity before any signal;
     with hangup=True, SIGHUP to the root's process group first, when the root
     leads it and it holds no protected process;
  2. late forks are found by rescans paced by the fork counter;
  3. after the grace: SIGSTOP every survivor and rescan until nothing new
     appears (a stopped process cannot fork), then SIGKILL them all and
     confirm; reap the caller's own children among the members.

Driven by engine.py's faces (blocking, asyncio) and trioface.py; every system
call goes through the World it was given (world.py; the real one by default).

Must never: signal pid 0, pid 1, a negative pid other than the root's
verified group, the caller or an ancestor (refused up front, and guarded at
every send); block the event loop; hold more than max_procs members.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Generator, Iterable, Mapping

from .._errors import AccessDenied, Error, NoSuchProcess
from .._table.model import Proc, Snapshot
from . import membership as _membership
from .ladder import BATCH, Ladder
from .member import Member, MemberState, signal_name
from .report import TeardownReport
from .requests import Request, _Call, _Wait, run_inline
from .world import World

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

# After SIGKILL a process needs only to be scheduled; one stuck longer is in
# uninterruptible sleep and is reported, not waited for forever.
KILL_CONFIRM = 2.0
# Stop-the-world before SIGKILL: rounds of (stop new members, rescan), and how
# long to wait for a stopped member to actually show as stopped.
FREEZE_ROUNDS = 50
FREEZE_WAIT = 0.5
# XNU marks a process stopped in the sender's kill() and does not restart a
# fork in progress, so a member can show as stopped while its child is still
# being created: there one quiet rescan proves nothing, and the engine rescans
# after the kill until a rescan finds nothing new.
STOP_MAY_MISS_FORKS = sys.platform == "darwin"
# Cancelled or interrupted: rounds of (stop what is known, rescan) before the kill.
ABORT_ROUNDS = 10


class _Teardown(Ladder):
    """One teardown of a tree from its root (its descendants and kin). steps() yields requests and returns the report.

    world: every system call goes through it (world.System, the real one, by default).
    """

    def __init__(
        self,
        pid: int,
        grace: float,
        include_root: bool,
        signal_group: bool,
        max_procs: int,
        reap: bool = False,
        *,
        world: World | None = None,
        stop_signal: int = signal.SIGTERM,
        hangup: bool = False,
        already: Mapping[tuple[int, int], int] | None = None,
    ) -> None:
        super().__init__(grace, world=world, stop_signal=stop_signal, already=already)
        self.hangup = hangup
        self.pid = pid
        self.reap = reap
        self.include_root = include_root
        self.signal_group = signal_group
        self.max_procs = max_procs
        self.last_snap: Snapshot | None = None
        self.forks_at_scan: int | None = None  # the system's fork counter when the last scan began
        self.dead_kin_seen: set[tuple[int, int]] = set()  # kin zombies some kinship scan saw already
        self.recheck_kin = False  # the last kinship scan saw a kin zombie for the first time
        # (fork counter, members, may_orphan) at the last kinship scan
        self.last_kin_scan: tuple[int | None, int, int] | None = None
        self.theirs: dict[int, int] = {}  # pid -> start time of what a protected process in the tree started
        self.ambiguous: dict[int, Proc] = {}  # orphans not taken: a protected process shares their session
        self.root_member: Member | None = None
        self.root: Proc | None = None  # the root's Proc as first read
        self.group_ok = False  # the root leads its group, which holds no protected process
        self.spared: dict[int, Proc] = {}
        self.truncated = False
        self.reaped: dict[int, int] = {}
        self.group_note = "not signalled"
        self.owners: set[int] = set()  # the caller and its ancestors, minus pids 0 and 1

    # -- bookkeeping ---------------------------------------------------------

    def _add(self, proc: Proc, late: bool) -> Member:
        use_fd = self.use_pidfd and self.fd_budget > 0
        try:
            target = self.world.open_target(proc, self._guard(), use_fd)
        except AccessDenied:
            m = self._record(proc, late)
            m.status = MemberState.DENIED
            return m
        return self._admit(proc, target, late)

        # Pidfds stay open until the end: they let _reap_own wait for exactly
        # the members that are the caller's children, and the root's pidfd
        # proves (while the root holds its pid, even as a zombie) that its
        # process group is still the tree's, for _kill_group.

    def _finish(self) -> None:
        if self.reap:
            self._reap_own()

    def _reap_own(self) -> None:
        """Reap the members that are the caller's own exited children, recording their status.

        Done last, after the final scan: while the caller's child (often the
        root) stays a zombie its pid still proves its group and session are the
        tree's, so that scan can still find its orphans by kinship. By pidfd
        (waitid P_PIDFD waits for that process only, and only if it is ours);
        members without one, only when the last snapshot showed them as our
        child with the recorded start time (such a pid cannot be reused before
        we reap it).
        """
        snap = self.last_snap
        me = self._guard().me
        for m in self.members.values():
            if m.target is not None and m.target.pidfd is not None:
                code = self.world.reap_if_own_child(m.target, me)
            else:
                p = snap.get(m.proc.pid) if snap is not None else None
                if p is None or p.start_time != m.proc.start_time or p.ppid != me:
                    continue
                if p.is_zombie:  # seen as our zombie: one waitpid, no re-read
                    code = self.world.reap_zombie_child(p.pid)
                else:
                    code = self.world.reap_if_own_child(self.world.unheld_target(m.proc), me)
            if code is not None:
                self.reaped[m.proc.pid] = code

    def _rescan(self, late: bool, kin: bool = True) -> Generator[Request, Any, list[Member]]:
        """Take a snapshot and add members not seen before (a generator: use
        `yield from`). Returns the new _Members.

        kin=False follows parent links only: enough for the periodic rescans,
        whose job is to catch forks of live members, and it skips a pass over
        the whole table.

        A parent-link scan is skipped when the machine's fork counter has not
        moved since the last scan of either kind: a new child of a member needs
        a fork, and every scan follows parent links. A kinship scan is never
        skipped: a process becomes an orphan in a member's session when its
        parent exits, without any fork.
        """
        forks = self.world.fork_count()
        if forks is not None and self._scan_is_redundant(forks, kin):
            return []
        self.forks_at_scan = forks  # read before the snapshot: a later fork changes it
        t = self.world.monotonic()
        snap = self.last_snap = yield _Call(self.world.snapshot)
        self.scan_cost = self.world.monotonic() - t
        sel = _membership.select(
            snap,
            self.anchors,
            self._guard().protected,
            self.max_procs,
            self.owners if kin else None,
            theirs=self.theirs,
            held=len(self.members),
        )
        self.theirs = sel.theirs
        if kin:
            self.last_kin_scan = (forks, len(self.members) + len(sel.new), sel.may_orphan)
            fresh = set(sel.dead_kin) - self.dead_kin_seen
            self.dead_kin_seen |= fresh
            self.recheck_kin = bool(fresh)
        self.truncated = self.truncated or sel.truncated
        for p in sel.spared:
            self.spared[p.pid] = p
        for p in sel.ambiguous:
            self.ambiguous[p.pid] = p
        added = []
        for i, p in enumerate(sel.new):
            added.append(self._add(p, late))
            if i % BATCH == BATCH - 1:
                yield _Wait(None, 0)
        return added

    def _scan_is_redundant(self, forks: int, kin: bool) -> bool:
        """True if the last scan's own result proves a new one would find nothing.

        Parent links: a new child of a member needs a fork, and every scan
        follows parent links, so no fork since the last scan of either kind
        means nothing new. Kinship: a process also becomes an orphan in a
        member's session when its parent exits, without a fork; so a kinship
        scan is redundant only if, besides no fork and no new member since the
        last kinship scan, that scan saw no process in the members' groups and
        sessions that a live parent still held.
        """
        if not kin:
            return forks == self.forks_at_scan
        if self.last_kin_scan is None:
            return False
        kin_forks, n_members, may_orphan = self.last_kin_scan
        return forks == kin_forks and n_members == len(self.members) and may_orphan == 0

    def _settled(self, late: list[Member]) -> bool:
        """True if a scan that found `late` proves nothing more is there.

        Not when it saw a kin zombie for the first time: that process may have
        forked between the snapshot's listing and its read, so one more scan
        (which starts after the zombie was read) is needed; once per zombie.
        """
        fresh, self.recheck_kin = self.recheck_kin, False
        return not late and not fresh

    def _leader_present(self) -> bool:
        """True if the root or a member that led its group or session still
        holds its pid (alive or zombie): kinship can still prove its orphans."""
        recorded = [m.proc for m in self.members.values()]
        if self.root is not None and self.root_member is None:
            recorded.append(self.root)  # include_root=False: an anchor, not a member
        for p in recorded:
            if p.pid != p.pgid and p.pid != p.sid:
                continue
            try:
                if self.world.proc(p.pid).start_time == p.start_time:
                    return True
            except (NoSuchProcess, AccessDenied):
                continue
        return False

    # -- the state machine ---------------------------------------------------

    def steps(self) -> Generator[Request, Any, TeardownReport]:
        t0 = self.world.monotonic()
        guard = self.guard = self.world.guard()
        if self.pid in guard.protected:
            raise ValueError(f"refusing to tear down pid {self.pid}: it is the caller or one of its ancestors")
        root = self.world.proc(self.pid)  # NoSuchProcess for a pid that is not there
        self.root = root
        if self.world.is_kernel_thread(self.pid):
            raise ValueError(f"refusing to tear down pid {self.pid}: it is a kernel thread, not a process tree")
        self.owners = set(guard.protected - {0, 1}) | {guard.me}
        return (yield from self._climb(t0, root))

    def _take(self, root: Proc | None) -> Generator[Request, Any, list[Member]]:
        """The tree from its root, before any signal, and its group checked (hung up if asked): the members to signal."""
        assert root is not None, "a tree from a root has one"
        self.anchors[root.pid] = root.start_time
        root_member = None
        if self.include_root:
            root_member = self.root_member = self._add(root, late=False)
        first = yield from self._rescan(late=False)
        if root_member is not None and self.signal_group:
            yield from self._check_group(root_member)
        return ([root_member] if root_member else []) + first

    def _escalate(self) -> Generator[Request, Any, None]:
        """After the grace: freeze, kill, confirm."""
        if self.unended:
            yield from self._freeze_and_kill()

    def _check_group(self, root_member: Member) -> Generator[Request, Any, None]:
        """Whether the root's group holds tree members alone (group_ok); SIGHUP to it when hangup=True."""
        pgid = root_member.proc.pgid
        guard = self._guard()
        if root_member.status is not MemberState.LIVE or root_member.target is None:
            self.group_note = "root already gone"
        elif pgid != root_member.proc.pid:
            self.group_note = f"skipped: the root does not lead its group {pgid}"
        elif not guard.allows_group(pgid):
            self.group_note = f"skipped: group {pgid} holds the caller or an ancestor"
        elif self._outsiders_in_group(pgid, uncapped=self.truncated):
            self.group_note = f"skipped: group {pgid} holds processes outside the tree"
        elif not self.hangup or self.stop_signal == signal.SIGHUP:
            # SIGHUP as the stop signal reaches each member once by identity: no group hang-up too.
            self.group_ok = True
            self.group_note = f"group {pgid} holds the tree alone; not hung up"
        else:
            self.group_ok = True
            target = root_member.target
            outcome = yield _Call(lambda: self.world.send_group(pgid, signal.SIGHUP, guard, target))
            self.group_note = f"SIGHUP to group {pgid}: {outcome}"

    def _kill_group(self) -> Generator[Request, Any, None]:
        """Truncated tree: SIGKILL the root's group too, to reach members we could not hold.

        Only the group checked by _check_group, and only while the root still
        holds its pid (its pidfd says so), so the group id cannot name another.
        """
        root = self.root_member
        if not (self.truncated and self.group_ok and root is not None and root.target is not None):
            return
        target, guard = root.target, self._guard()
        outsiders = self._outsiders_in_group(root.proc.pid, uncapped=True)
        if outsiders:
            self.group_note += f"; no SIGKILL to group {root.proc.pid}: it holds processes outside the tree"
            return
        try:
            outcome = yield _Call(lambda: self.world.send_group(root.proc.pid, signal.SIGKILL, guard, target))
        except ValueError as exc:  # the guard says no (a protected process joined)
            outcome = str(exc)
        self.group_note += f"; SIGKILL to group {root.proc.pid} (truncated): {outcome}"

    def _outsiders_in_group(self, pgid: int, uncapped: bool = False) -> set[int]:
        """Live processes of group pgid, in the last snapshot, that are not the tree's.

        A group signal reaches every process of the group, so it is sent only
        when the group holds members alone: a sibling job (`b` in `a | b`) or
        what a protected process started shares the group without being a
        member. uncapped: also count as the tree's what max_procs kept out
        (the truncated kill exists to reach exactly those).
        """
        snap = self.last_snap
        if snap is None:
            return {0}  # nothing known: no proof the group is ours
        tree = {ident for ident in self.members}
        if uncapped:
            extra = _membership.select(
                snap, self.anchors, self._guard().protected, 1 << 62, self.owners, theirs=self.theirs
            )
            tree.update(p.identity for p in extra.new)
        return {
            q.pid
            for q in snap.values()
            if q.pgid == pgid and not q.is_zombie and q.identity not in tree and q.pid != pgid
        }

    def _freeze_and_kill(self) -> Generator[Request, Any, None]:
        """SIGSTOP until the tree is closed (nothing new while all are stopped), then SIGKILL."""
        self.killing = True
        frozen: set[tuple[int, int]] = set()
        closed = False  # a rescan found nothing new while every member was stopped
        for _ in range(FREEZE_ROUNDS):
            for i, m in enumerate(self._unended_members()):
                if m.proc.identity not in frozen:
                    self._signal(m, signal.SIGSTOP)
                    frozen.add(m.proc.identity)
                if i % BATCH == BATCH - 1:
                    yield _Wait(None, 0)
            # Wait (briefly) until each frozen member shows as stopped: only
            # then can a rescan be sure it forks no more.
            until = self.world.monotonic() + FREEZE_WAIT
            stopped = self._all_stopped()
            while not stopped and self.world.monotonic() < until:
                yield _Wait(None, 0.001)
                stopped = self._all_stopped()
            self._collect()
            if self._settled((yield from self._rescan(late=True))):
                closed = stopped
                break
        for i, m in enumerate(self._unended_members()):
            self._signal(m, signal.SIGKILL)
            if i % BATCH == BATCH - 1:
                yield _Wait(None, 0)
        yield from self._kill_group()
        until = self.world.monotonic() + KILL_CONFIRM
        while self.unended and self.world.monotonic() < until:
            self._collect()
            if self.unended:
                yield self._wait_spec(until)
        if closed and not STOP_MAY_MISS_FORKS:
            return  # nothing could fork after that scan: there is nothing left to find
        # Not provably closed (a member never showed as stopped, the rounds ran
        # out, or the kernel may stop a process with a fork still completing):
        # whatever slipped in gets the same, until a rescan finds nothing new.
        for _ in range(FREEZE_ROUNDS):
            late = yield from self._rescan(late=True)
            if self._settled(late):
                break
            for m in late:
                self._signal(m, signal.SIGKILL)
            until = self.world.monotonic() + 0.2
            while self.unended and self.world.monotonic() < until:
                self._collect()
                if self.unended:
                    yield self._wait_spec(until)

    def _all_stopped(self) -> bool:
        for m in self.unended.values():
            try:
                state = self.world.proc(m.proc.pid).state
            except (NoSuchProcess, AccessDenied):
                continue
            if state not in ("T", "t", "Z", "X", "D"):
                return False
        return True

    def abort(self) -> None:
        """Cancelled or interrupted: end the whole tree at once, without the grace.

        The interruption may have come before the first scan finished, when only
        the root is known: stop what is known, rescan (kinship included) and
        stop what each scan adds, until a scan finds nothing new or the rounds
        run out, then SIGKILL them all. Bounded, and never waits for exits.
        """
        if self.waiter is None:
            return
        self.killing = True
        # The engine's own waiter may be closed already; the rescans below
        # only need a bag that does not block.
        self.waiter = self.world.polling_waiter()
        try:
            for _ in range(ABORT_ROUNDS):
                self._signal_quietly(self._unended_members(), signal.SIGSTOP)
                try:
                    if self._settled(run_inline(self._rescan(late=True))):
                        break
                except (Error, OSError, ValueError):
                    break  # kill what is known
            self._signal_quietly(self._unended_members(), signal.SIGKILL)
        finally:
            self._close()

    def _signal_quietly(self, members: Iterable[Member], sig: int) -> None:
        for m in members:
            try:
                self._signal(m, sig)
            except (Error, OSError, ValueError):
                pass

    def _report(self, t0: float, root: Proc | None) -> TeardownReport:
        ms = list(self.members.values())

        def having(state: MemberState) -> tuple[Proc, ...]:
            return tuple(m.proc for m in ms if m.status is state)

        may_run = (MemberState.LIVE, MemberState.DENIED)
        survivors = tuple(m.proc for m in ms if m.status in may_run and self._alive(m))
        return TeardownReport(
            root=root,
            found=tuple(m.proc for m in ms),
            exited=having(MemberState.EXITED),
            killed=having(MemberState.KILLED),
            survivors=survivors,
            late=tuple(m.proc for m in ms if m.late),
            denied=having(MemberState.DENIED),
            truncated=self.truncated,
            elapsed=self.world.monotonic() - t0,
            mode="plain",
            signals={m.proc.pid: signal_name(m.stop) for m in ms if m.stop is not None},
            extra={
                "group": self.group_note,
                "pidfds": self.use_pidfd,
                **({"spared": sorted(self.spared)} if self.spared else {}),
                **({"ambiguous": sorted(self.ambiguous)} if self.ambiguous else {}),
                **({"reaped": dict(self.reaped)} if self.reaped else {}),
            },
        )

    def _alive(self, m: Member) -> bool:
        if m.target is None:
            return True  # could not be checked: unknown is not dead
        return not self.world.target_ended(m.target)
