"""The teardown engine: end a process and everything it started, and nothing else.

One implementation, a step-wise state machine (_Teardown.steps, a generator),
with two faces: terminate_tree drives it with blocking waits, and
terminate_tree_async drives it from the asyncio loop (waits become
add_reader/sleep, blocking calls run in a worker thread, long loops yield to
the loop every few dozen members), so the loop is never blocked for long.
The engine only ever yields two kinds of request, _Wait and _Call; all
decisions are the engine's, none the drivers'.

The policy (docs/teardown.md says why):
  1. take the tree (one snapshot) before signalling anything, by identity;
  2. hang up the root's process group when the root leads it and it holds
     no protected process; SIGTERM + SIGCONT every member by identity;
  3. wait for exits by events (pidfds / kqueue), rescanning on a backoff so
     late forks join the tree (and get the same signals);
  4. after the grace: SIGSTOP every survivor and rescan until nothing new
     appears (a stopped process cannot fork), then SIGKILL them all and
     confirm; reap the caller's own children among the members.

Must never: signal pid 0, pid 1, a negative pid other than the root's
verified group, the caller or an ancestor (refused up front, and guarded at
every send); block the event loop; hold more than max_procs members.
"""
import asyncio
import select
import signal
import sys
import time
from typing import Any, Callable, NamedTuple, Optional

from .._table import binding as _binding
from . import exitwait as _exitwait
from . import membership as _membership
from . import signals as _signals
from .._errors import AccessDenied, Error, NoSuchProcess
from .report import TeardownReport
from .._validate import check_pid, check_positive_int, check_seconds

# Rescans while waiting: soon after the signals (that is when forks race
# them), then backing off so a long grace costs few scans.
RESCAN_FIRST = 0.005
RESCAN_MAX = 0.1
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
# Async face: hand control back to the loop after this many members' worth of syscalls.
BATCH = 64


class _Wait(NamedTuple):
    """What the engine waits for next: fd readable, or timeout seconds (0: just yield)."""

    fd: Optional[int]
    timeout: float


class _Call(NamedTuple):
    """A blocking call (a snapshot of a big table, a group signal) for the driver to run.

    The sync driver calls it inline; the async driver runs it in a worker
    thread (the C core releases the GIL), so the loop keeps running. Its
    result, or exception, is sent back into the engine.
    """

    fn: Callable[[], Any]


def _fork_count():
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


def _validated(pid, grace, include_root, signal_group, max_procs, reap=False):
    pid = check_pid(pid)
    grace = check_seconds(grace, "grace")
    max_procs = check_positive_int(max_procs, "max_procs")
    for name, flag in (("include_root", include_root), ("signal_group", signal_group), ("reap", reap)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, not {type(flag).__name__}")
    if pid == 1:
        raise ValueError("refusing to tear down pid 1 (init)")
    return pid, grace, include_root, signal_group, max_procs, reap


class _Member:
    __slots__ = ("proc", "target", "status", "late", "signalled")

    def __init__(self, proc, late):
        self.proc = proc
        self.target = None
        self.status = "live"  # live | exited | killed | denied
        self.late = late
        self.signalled = False


class _Teardown:
    """One teardown. steps() yields _Wait and _Call requests and returns the TeardownReport."""

    def __init__(self, pid, grace, include_root, signal_group, max_procs, reap=False):
        self.pid = pid
        self.reap = reap
        self.grace = grace
        self.include_root = include_root
        self.signal_group = signal_group
        self.max_procs = max_procs
        self.use_pidfd = _signals.pidfds_available()
        self.members = {}  # (pid, start_time) -> _Member, in discovery order
        self.live = {}  # id(target) -> _Member still to end (kept so each wakeup is O(ended))
        self.scan_cost = 0.0  # seconds the last snapshot took: paces the rescans
        self.last_snap = None
        self.forks_at_scan = None  # the system's fork counter when the last scan began
        self.last_kin_scan = None  # (fork counter, members, may_orphan) at the last kinship scan
        self.theirs = {}  # pid -> start time of what a protected process in the tree started
        self.ambiguous = {}  # orphans not taken: a protected process shares their session
        self.root_member = None
        self.root = None  # the root's Proc as first read
        self.group_ok = False  # the root leads its group, which holds no protected process
        self.anchors = {}  # pid -> start_time of the root and every member
        self.spared = {}
        self.truncated = False
        self.killing = False
        self.reaped = {}
        self.group_note = "not signalled"
        self.waiter = None
        self.fd_budget = self._fd_budget()

    @staticmethod
    def _fd_budget():
        """How many pidfds to hold at once: at most half the caller's fd limit, so
        the caller keeps room; members beyond it use start-time checks and polling."""
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY or soft <= 0:
            soft = 65536
        return max(0, min(soft // 2 - 64, 16384))

    # -- bookkeeping ---------------------------------------------------------

    def _live(self):
        return list(self.live.values())

    def _add(self, proc, late):
        m = _Member(proc, late)
        self.members[proc.identity] = m
        self.anchors[proc.pid] = proc.start_time
        use_fd = self.use_pidfd and self.fd_budget > 0
        try:
            m.target = _signals.open_target(proc, self.guard, use_fd)
        except AccessDenied:
            m.status = "denied"
            return m
        if m.target is None:
            m.status = "exited"  # ended (or its pid is someone else's) before we got to it
            return m
        if m.target.pidfd is not None:
            self.fd_budget -= 1
        self.live[id(m.target)] = m
        if not self.waiter.watch(m.target):
            self._ended(m)
        return m

    def _ended(self, m):
        self.live.pop(id(m.target), None)
        m.status = "killed" if self.killing and m.signalled else "exited"
        # Pidfds stay open until the end: they let _reap_own wait for exactly
        # the members that are the caller's children, and the root's pidfd
        # proves (while the root holds its pid, even as a zombie) that its
        # process group is still the tree's, for _kill_group.

    def _reap_own(self):
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
        me = self.guard.me
        for m in self.members.values():
            if m.target is not None and m.target.pidfd is not None:
                code = _signals.reap_if_own_child(m.target, me)
            else:
                p = snap.get(m.proc.pid) if snap is not None else None
                if p is None or p.start_time != m.proc.start_time or p.ppid != me:
                    continue
                if p.is_zombie:  # seen as our zombie: one waitpid, no re-read
                    code = _signals.reap_zombie_child(p.pid)
                else:
                    code = _signals.reap_if_own_child(_signals.Target(m.proc, None), me)
            if code is not None:
                self.reaped[m.proc.pid] = code

    def _collect(self):
        for t in self.waiter.ready():
            m = self.live.get(id(t))
            if m is not None:
                self._ended(m)

    def _rescan(self, late, kin=True):
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
        forks = _fork_count()
        if forks is not None and self._scan_is_redundant(forks, kin):
            return []
        self.forks_at_scan = forks  # read before the snapshot: a later fork changes it
        t = time.monotonic()
        snap = self.last_snap = yield _Call(_binding.snapshot)
        self.scan_cost = time.monotonic() - t
        sel = _membership.select(
            snap,
            self.anchors,
            self.guard.protected,
            self.max_procs,
            self.owners if kin else None,
            theirs=self.theirs,
            held=len(self.members),
        )
        self.theirs = sel.theirs
        if kin:
            self.last_kin_scan = (forks, len(self.members) + len(sel.new), sel.may_orphan)
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

    def _scan_is_redundant(self, forks, kin):
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

    def _leader_present(self):
        """True if the root or a member that led its group or session still
        holds its pid (alive or zombie): kinship can still prove its orphans."""
        recorded = [m.proc for m in self.members.values()]
        if self.root is not None and self.root_member is None:
            recorded.append(self.root)  # include_root=False: an anchor, not a member
        for p in recorded:
            if p.pid != p.pgid and p.pid != p.sid:
                continue
            try:
                if _binding.proc(p.pid).start_time == p.start_time:
                    return True
            except (NoSuchProcess, AccessDenied):
                continue
        return False

    def _signal(self, m, sig):
        if m.status != "live":
            return
        outcome = _signals.send(m.target, sig, self.guard)
        if outcome == _signals.DENIED:
            m.status = "denied"
            self.live.pop(id(m.target), None)
        elif outcome == _signals.SENT and sig in (signal.SIGTERM, signal.SIGKILL, signal.SIGSTOP):
            m.signalled = True

    def _polite(self, ms):
        """SIGTERM then SIGCONT each member (yields to the loop between batches)."""
        for i, m in enumerate(ms):
            self._signal(m, signal.SIGTERM)
            self._signal(m, signal.SIGCONT)
            if i % BATCH == BATCH - 1:
                yield _Wait(None, 0)

    def _wait_spec(self, until):
        timeout = max(0.0, until - time.monotonic())
        interval = self.waiter.poll_interval()
        if interval is not None:
            timeout = min(timeout, interval)
        return _Wait(self.waiter.fileno(), timeout)

    # -- the state machine ---------------------------------------------------

    def steps(self):
        t0 = time.monotonic()
        self.guard = _signals.Guard()
        if self.pid in self.guard.protected:
            raise ValueError(
                f"refusing to tear down pid {self.pid}: it is the caller or one of its ancestors"
            )
        root = _binding.proc(self.pid)  # NoSuchProcess for a pid that is not there
        self.root = root
        if _binding.is_kernel_thread(self.pid):
            raise ValueError(f"refusing to tear down pid {self.pid}: it is a kernel thread, not a process tree")
        self.owners = (self.guard.protected - {0, 1}) | {self.guard.me}
        self.waiter = _exitwait.make_waiter(self.use_pidfd)
        try:
            report = yield from self._run(t0, root)
        finally:
            self._close()
        return report

    def _run(self, t0, root):
        # 1. The tree, before any signal.
        self.anchors[root.pid] = root.start_time
        root_member = None
        if self.include_root:
            root_member = self.root_member = self._add(root, late=False)
        first = yield from self._rescan(late=False)

        # 2. Hang up the root's group, then TERM + CONT every member.
        if root_member is not None and self.signal_group:
            yield from self._hangup_group(root_member)
        polite = ([root_member] if root_member else []) + first
        yield from self._polite(polite)

        # 3. Wait for the members to end, keeping the tree current.
        deadline = time.monotonic() + self.grace
        interval = RESCAN_FIRST
        next_scan = time.monotonic() + interval
        while True:
            before = len(self.live)
            self._collect()
            if len(self.live) < before:
                # Still dying: a rescan now would only slow the exits down;
                # forks of members that stay alive are caught once it stalls.
                next_scan = max(next_scan, time.monotonic() + RESCAN_FIRST)
            if not self._live():
                # Every known member has ended. Their orphans (if any) can now
                # only be found by kinship, which needs a group or session
                # leader still present: look once more if one is.
                if not self._leader_present():
                    break
                late = yield from self._rescan(late=True)
                if not late:
                    break
                yield from self._polite(late)
                continue
            now = time.monotonic()
            if now >= deadline:
                break
            if now >= next_scan:
                late = yield from self._rescan(late=True, kin=False)
                yield from self._polite(late)
                # Back off, and never spend more than about a fifth of the wait
                # scanning (a snapshot of a big machine takes milliseconds).
                interval = min(interval * 2, RESCAN_MAX)
                next_scan = time.monotonic() + max(interval, 4 * self.scan_cost)
                continue
            yield self._wait_spec(min(deadline, next_scan))

        # 4. Escalate: freeze, kill, confirm.
        if self._live():
            yield from self._freeze_and_kill()

        self._collect()
        if self.reap:
            self._reap_own()
        return self._report(t0, root)

    def _hangup_group(self, root_member):
        pgid = root_member.proc.pgid
        if root_member.status != "live":
            self.group_note = "root already gone"
        elif pgid != root_member.proc.pid:
            self.group_note = f"skipped: the root does not lead its group {pgid}"
        elif not self.guard.allows_group(pgid):
            self.group_note = f"skipped: group {pgid} holds the caller or an ancestor"
        elif self._outsiders_in_group(pgid, uncapped=self.truncated):
            self.group_note = f"skipped: group {pgid} holds processes outside the tree"
        else:
            self.group_ok = True
            target = root_member.target
            outcome = yield _Call(lambda: _signals.send_group(pgid, signal.SIGHUP, self.guard, target))
            self.group_note = f"SIGHUP to group {pgid}: {outcome}"

    def _kill_group(self):
        """Truncated tree: SIGKILL the root's group too, to reach members we could not hold.

        Only the group checked by _hangup_group, and only while the root still
        holds its pid (its pidfd says so), so the group id cannot name another.
        """
        root = self.root_member
        if not (self.truncated and self.group_ok and root is not None and root.target is not None):
            return
        outsiders = self._outsiders_in_group(root.proc.pid, uncapped=True)
        if outsiders:
            self.group_note += f"; no SIGKILL to group {root.proc.pid}: it holds processes outside the tree"
            return
        try:
            outcome = yield _Call(lambda: _signals.send_group(root.proc.pid, signal.SIGKILL, self.guard, root.target))
        except ValueError as exc:  # the guard says no (a protected process joined)
            outcome = str(exc)
        self.group_note += f"; SIGKILL to group {root.proc.pid} (truncated): {outcome}"

    def _outsiders_in_group(self, pgid, uncapped=False):
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
                snap, self.anchors, self.guard.protected, 1 << 62, self.owners, theirs=self.theirs
            )
            tree.update(p.identity for p in extra.new)
        return {
            q.pid
            for q in snap.values()
            if q.pgid == pgid and not q.is_zombie and q.identity not in tree and q.pid != pgid
        }

    def _freeze_and_kill(self):
        """SIGSTOP until the tree is closed (nothing new while all are stopped), then SIGKILL."""
        self.killing = True
        frozen = set()
        closed = False  # a rescan found nothing new while every member was stopped
        for _ in range(FREEZE_ROUNDS):
            for i, m in enumerate(self._live()):
                if m.proc.identity not in frozen:
                    self._signal(m, signal.SIGSTOP)
                    frozen.add(m.proc.identity)
                if i % BATCH == BATCH - 1:
                    yield _Wait(None, 0)
            # Wait (briefly) until each frozen member shows as stopped: only
            # then can a rescan be sure it forks no more.
            until = time.monotonic() + FREEZE_WAIT
            stopped = self._all_stopped()
            while not stopped and time.monotonic() < until:
                yield _Wait(None, 0.001)
                stopped = self._all_stopped()
            self._collect()
            if not (yield from self._rescan(late=True)):
                closed = stopped
                break
        for i, m in enumerate(self._live()):
            self._signal(m, signal.SIGKILL)
            if i % BATCH == BATCH - 1:
                yield _Wait(None, 0)
        yield from self._kill_group()
        until = time.monotonic() + KILL_CONFIRM
        while self._live() and time.monotonic() < until:
            self._collect()
            if self._live():
                yield self._wait_spec(until)
        if closed and not STOP_MAY_MISS_FORKS:
            return  # nothing could fork after that scan: there is nothing left to find
        # Not provably closed (a member never showed as stopped, the rounds ran
        # out, or the kernel may stop a process with a fork still completing):
        # whatever slipped in gets the same, until a rescan finds nothing new.
        for _ in range(FREEZE_ROUNDS):
            late = yield from self._rescan(late=True)
            if not late:
                break
            for m in late:
                self._signal(m, signal.SIGKILL)
            until = time.monotonic() + 0.2
            while self._live() and time.monotonic() < until:
                self._collect()
                if self._live():
                    yield self._wait_spec(until)

    def _all_stopped(self):
        for m in self._live():
            try:
                state = _binding.proc(m.proc.pid).state
            except (NoSuchProcess, AccessDenied):
                continue
            if state not in ("T", "t", "Z", "X", "D"):
                return False
        return True

    def abort(self):
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
        self.waiter = _exitwait.PollingWaiter()
        try:
            for _ in range(ABORT_ROUNDS):
                self._signal_quietly(self._live(), signal.SIGSTOP)
                try:
                    if not _run_inline(self._rescan(late=True)):
                        break
                except (Error, OSError, ValueError):
                    break  # kill what is known
            self._signal_quietly(self._live(), signal.SIGKILL)
        finally:
            self._close()

    def _signal_quietly(self, members, sig):
        for m in members:
            try:
                self._signal(m, sig)
            except (Error, OSError, ValueError):
                pass

    def _close(self):
        for m in self.members.values():
            if m.target is not None:
                m.target.close()
        if self.waiter is not None:
            self.waiter.close()

    def _report(self, t0, root):
        ms = list(self.members.values())

        def having(*statuses):
            return tuple(m.proc for m in ms if m.status in statuses)

        survivors = tuple(m.proc for m in ms if m.status in ("live", "denied") and self._alive(m))
        return TeardownReport(
            root=root,
            found=tuple(m.proc for m in ms),
            exited=having("exited"),
            killed=having("killed"),
            survivors=survivors,
            late=tuple(m.proc for m in ms if m.late),
            denied=having("denied"),
            truncated=self.truncated,
            elapsed=time.monotonic() - t0,
            mode="plain",
            extra={
                "group": self.group_note,
                "pidfds": self.use_pidfd,
                **({"spared": sorted(self.spared)} if self.spared else {}),
                **({"ambiguous": sorted(self.ambiguous)} if self.ambiguous else {}),
                **({"reaped": dict(self.reaped)} if self.reaped else {}),
            },
        )

    @staticmethod
    def _alive(m):
        if m.target is None:
            return True  # could not be checked: unknown is not dead
        if m.target.pidfd is not None:
            r, _, _ = select.select([m.target.pidfd], [], [], 0)
            return not r
        return not _exitwait._ended_by_reading(m.target)


# -- drivers -----------------------------------------------------------------


def _run_inline(gen):
    """Drive one of the engine's sub-generators to its result with blocking calls."""
    try:
        req = next(gen)
        while True:
            req = gen.send(req.fn() if isinstance(req, _Call) else None)
    except StopIteration as done:
        return done.value


def _block(req):
    if req.timeout <= 0:
        return
    if req.fd is None:
        time.sleep(req.timeout)
        return
    p = select.poll()
    p.register(req.fd, select.POLLIN)
    p.poll(req.timeout * 1000.0)


async def _wait_async(loop, req):
    if req.timeout <= 0:
        await asyncio.sleep(0)
        return
    if req.fd is None:
        await asyncio.sleep(req.timeout)
        return
    fut = loop.create_future()

    def wake():
        if not fut.done():
            fut.set_result(None)

    try:
        loop.add_reader(req.fd, wake)
    except NotImplementedError:  # a loop without add_reader: poll instead
        await asyncio.sleep(min(req.timeout, _exitwait.POLL_MAX))
        return
    try:
        await asyncio.wait_for(fut, req.timeout)
    except asyncio.TimeoutError:
        pass
    finally:
        loop.remove_reader(req.fd)


def terminate_tree(
    pid: int,
    *,
    grace: float = 2.0,
    include_root: bool = True,
    signal_group: bool = True,
    max_procs: int = 16384,
    reap: bool = False,
) -> TeardownReport:
    """End pid and every process it started, and nothing else; return a TeardownReport.

    Polite first (SIGHUP to the root's own group, SIGTERM + SIGCONT to every
    member), SIGKILL for whatever is left after `grace` seconds; returns as soon
    as the whole tree is gone. Raises TypeError/ValueError for bad arguments
    (pid 1, the caller, its ancestors) and NoSuchProcess for a pid that is not
    there, before anything is signalled.

    Exits are observed without reaping: members that are the caller's own
    children are left as zombies for their owners (Popen, multiprocessing,
    asyncio) to reap with their exit status. reap=True reaps them (by pidfd,
    that process only) and records their codes in report.extra["reaped"]: for
    callers that own no such objects.
    """
    engine = _Teardown(*_validated(pid, grace, include_root, signal_group, max_procs, reap))
    gen = engine.steps()
    try:
        req = next(gen)
        while True:
            if isinstance(req, _Call):
                try:
                    value = req.fn()
                except Exception as exc:
                    req = gen.throw(exc)
                    continue
                req = gen.send(value)
            else:
                _block(req)
                req = gen.send(None)
    except StopIteration as done:
        return done.value
    except BaseException:
        engine.abort()
        raise


async def terminate_tree_async(
    pid: int,
    *,
    grace: float = 2.0,
    include_root: bool = True,
    signal_group: bool = True,
    max_procs: int = 16384,
    reap: bool = False,
) -> TeardownReport:
    """terminate_tree for asyncio: the same engine, waiting without blocking the loop.

    Cancelling it skips the rest of the grace: what is left is SIGKILLed at
    once, then CancelledError propagates.
    """
    engine = _Teardown(*_validated(pid, grace, include_root, signal_group, max_procs, reap))
    loop = asyncio.get_running_loop()
    gen = engine.steps()
    try:
        req = next(gen)
        while True:
            if isinstance(req, _Call):
                try:
                    value = await loop.run_in_executor(None, req.fn)
                except Exception as exc:
                    req = gen.throw(exc)
                    continue
                req = gen.send(value)
            else:
                await _wait_async(loop, req)
                req = gen.send(None)
    except StopIteration as done:
        return done.value
    except BaseException:
        engine.abort()
        raise
