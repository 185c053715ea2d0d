"""Owner-side teardown of contained trees: what a Tree does with its cgroup, its command and a failed spawn.

Built only on the teardown layer's primitives (identity-checked signals,
event-driven exit waits, the engine) and on cgroup.py; it never imports the
keeper, which has its own copy of these policies for its side of the tree.
One pidfd decision (signals.pidfds_available(), which honours
PROCTREE_NO_PIDFD) governs every signal sent from here.

This module must never signal a process it did not verify as a member: a
cgroup member is one read from the tree's own cgroup, held by pidfd (or
re-checked by start time) before each signal; the keeper's descendants are
left to the engine, which walks from the keeper while it is our unreaped
child. The Guard (pid 0, 1, the caller and its ancestors) is applied to all.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Generator, Iterable, Mapping
from typing import Any

from .._errors import AccessDenied, NoSuchProcess
from .._table import binding as _binding
from .._table.model import Proc
from .._teardown import engine as _engine
from .._teardown import exitwait as _exitwait
from .._teardown import signals as _signals
from .._teardown.report import TeardownReport
from .._teardown.requests import Request, _Wait
from . import cgroup as _cgroup

# Late joiners are looked for this often while waiting (quickly at first).
RESCAN_FIRST = 0.002
RESCAN_MAX = 0.05
# How long SIGKILLed members may take to go before they count as survivors.
KILL_PATIENCE = 2.0


class _Member:
    __slots__ = ("proc", "target", "late", "ended", "killed", "denied")

    def __init__(self, proc: Proc, target: _signals.Target | None, late: bool) -> None:
        self.proc = proc
        self.target = target
        self.late = late
        self.ended = False
        self.killed = False
        self.denied = target is None  # its identity could not be checked: we may not signal it


class _CgroupTeardown:
    """One teardown of a cgroup's members: the stop signal to each by identity, once, wait for exits, then kill the cgroup."""

    def __init__(
        self,
        path: str,
        grace: float,
        spare: Iterable[int],
        stop_signal: int = signal.SIGTERM,
        already: Mapping[tuple[int, int], int] | None = None,
    ) -> None:
        self.path = os.path.normpath(path)
        self.grace = grace
        self.hurried = False  # the rest of the grace is skipped (a driver's stop fd)
        self.closed = False
        self.spare = frozenset(spare)
        self.stop_signal = stop_signal
        self.already = dict(already or {})  # identity -> a stop signal another path sent it: no second one
        self.signals: dict[int, int] = {}  # pid -> the stop signal the member got
        self.use_pidfd = _signals.pidfds_available()
        self.guard = _signals.Guard()
        self.waiter = _exitwait.make_waiter(self.use_pidfd)
        self.members: dict[tuple[int, int], _Member] = {}
        self.by_pid: dict[int, _Member] = {}  # the latest member seen under each pid
        self.by_target: dict[int, _Member] = {}

    def admit(self, late: bool, polite: bool = True) -> None:
        """Take in every member not yet known, and (polite) send it SIGTERM + SIGCONT.

        Every new member is read, then held (pidfd, or its start time), then
        confirmed by a second read of cgroup.procs made while it is held: a pid
        listed there names a member, or a process that ended since (a signal
        then reaches nothing). All are read before any is signalled: a TERM can
        end the command, and the keeper then ends the rest at once, so a member
        read after the first send might be missing from the report.
        """
        held = []
        for pid in _cgroup.pids(self.path):
            known = self.by_pid.get(pid)
            if known is not None and not known.ended:
                continue  # held and alive: its pid cannot name another process yet
            if pid in self.spare or not self.guard.allows(pid):
                continue
            try:
                target = _signals.hold(pid, self.guard, self.use_pidfd)
            except (NoSuchProcess, AccessDenied, OSError):
                continue  # unreadable: nothing to record it by (cgroup.kill still ends it)
            if target is None:
                self._admit_ended(pid, late)
                continue
            if (target.proc.pid, target.proc.start_time) in self.members:
                target.close()
                continue
            held.append((target.proc, target))
        listed = set(_cgroup.pids(self.path)) if held else set()
        for proc, target in held:
            if proc.pid not in listed:
                target.close()
                if self._ended_since(proc):
                    # Exiting (the keeper may be ending the tree too): it was a member when
                    # listed, and it is gone now.
                    m = self._add(_Member(proc, None, late))
                    m.denied, m.ended = False, True
                continue  # else its pid was reused by a process outside the tree since the first read
            m = self._add(_Member(proc, target, late))
            self.by_target[id(target)] = m
            if polite:
                self._polite(m)
            elif not self.waiter.watch(target):
                m.ended = True

    def _admit_ended(self, pid: int, late: bool) -> None:
        """A listed pid that exited before it could be held: a member all the same, if its zombie is still there."""
        try:
            proc = _binding.proc(pid)
        except (NoSuchProcess, AccessDenied, OSError):
            return
        if proc.is_zombie and (proc.pid, proc.start_time) not in self.members:
            m = self._add(_Member(proc, None, late))
            m.denied, m.ended = False, True

    def _add(self, m: _Member) -> _Member:
        self.members[(m.proc.pid, m.proc.start_time)] = m
        self.by_pid[m.proc.pid] = m
        return m

    @staticmethod
    def _ended_since(proc: Proc) -> bool:
        """proc (as read) is gone or a zombie now: it ended, rather than its pid being reused."""
        try:
            now = _binding.proc(proc.pid)
        except NoSuchProcess:
            return True
        except (AccessDenied, OSError):
            return False
        return now.start_time == proc.start_time and now.is_zombie

    def _polite(self, m: _Member) -> None:
        assert m.target is not None
        earlier = self.already.get((m.proc.pid, m.proc.start_time))
        if earlier is not None:
            self.signals[m.proc.pid] = earlier  # draining already: a second stop signal is "force quit" to many
        else:
            outcome = _signals.send(m.target, self.stop_signal, self.guard)
            if outcome == _signals.DENIED:
                m.denied = True
                return
            if outcome == _signals.SENT:
                self.signals[m.proc.pid] = self.stop_signal
            _signals.send(m.target, signal.SIGCONT, self.guard)
        if not self.waiter.watch(m.target):
            m.ended = True

    def live(self) -> list[_Member]:
        return [m for m in self.members.values() if not m.ended]

    def collect(self) -> None:
        for t in self.waiter.ready():
            m = self.by_target.get(id(t))
            if m is not None:
                m.ended = True

    def _wait(self, timeout: float) -> _Wait:
        """What to wait for: a member's end (the waiter's fd) or timeout, polled sooner where the waiter needs it."""
        interval = self.waiter.poll_interval()
        if interval is not None:
            timeout = min(timeout, interval)
        return _Wait(self.waiter.fileno(), max(0.0, timeout))

    def steps(self) -> Generator[Request, Any, TeardownReport]:
        """The teardown as the machine's requests (for engine.run_blocking / run_blocking_many).

        The stop signal + SIGCONT to each member by identity, once, late joiners
        too; wait (event-driven) up to the grace for them to exit, or less once
        hurried; then the kill. With no grace, straight to the kill (the members
        are read first, for the report): a TERM an instant before would only cost time.
        """
        t0 = time.monotonic()
        try:
            self.admit(late=False, polite=self.grace > 0)
            deadline = t0 + self.grace
            pause = RESCAN_FIRST
            while True:
                self.collect()
                if not self.live():
                    break
                left = deadline - time.monotonic()
                if left <= 0 or self.hurried:
                    break
                yield self._wait(min(left, pause))
                if self.hurried:
                    break
                pause = min(pause * 2, RESCAN_MAX)
                self.collect()
                self.admit(late=True)
            yield from self._kill()
            self.collect()
            return self.report(t0)
        finally:
            self.close()

    def hurry(self) -> None:
        """Skip the rest of the grace: the kill comes at the next wake-up."""
        self.hurried = True

    def abort(self) -> None:
        """Interrupted: SIGKILL what is left at once (cgroup.kill and each member), without waiting for exits."""
        if self.closed:
            return
        try:
            self.collect()
            self._kill_round(cgroup_killed=False)
        except (OSError, ValueError):
            pass  # the cgroup went away meanwhile: nothing is left to kill
        finally:
            self.close()

    def _kill_round(self, cgroup_killed: bool) -> bool | None:
        """One round of the kill: None when nothing is left, else whether cgroup.kill has been written.

        Each member is sent its SIGKILL once; after that the rounds only wait
        for the exits. A round kills again only for a late joiner (cgroup.kill
        reaches every process in the cgroup when it is written, and the
        kernel kills a child forked meanwhile at birth) or when cgroup.kill
        itself failed: re-sending to the dying members would cost a write and
        a signal per member on every wake-up while 100 processes exit.
        """
        self.admit(late=True, polite=False)  # a late joiner now: killed with the rest
        live = [m for m in self.live() if m.target is not None or not m.denied]
        if not live:
            return None
        unsent = [m for m in live if not m.killed]
        # Whatever is still alive now ends by this kill, whichever of the
        # two sends reaches it first (cgroup.kill can leave the per-member
        # send nothing but a reaped pid).
        for m in unsent:
            m.killed = True
        if unsent or not cgroup_killed:
            try:
                _cgroup.kill(self.path, use_pidfd=self.use_pidfd)
                cgroup_killed = True
            except (OSError, ValueError):
                pass  # the members are still killed one by one below, and cgroup.kill tried again
        for m in unsent:
            if m.target is None:
                continue
            if _signals.send(m.target, signal.SIGKILL, self.guard) == _signals.DENIED:
                m.denied = True
        return cgroup_killed

    def _kill(self) -> Generator[Request, Any, None]:
        """SIGKILL what is left (cgroup.kill, or the freeze-kill fallback, and each member by identity), then
        wait up to KILL_PATIENCE for the exits."""
        deadline = time.monotonic() + KILL_PATIENCE
        cgroup_killed = False
        while True:
            self.collect()
            killed = self._kill_round(cgroup_killed)
            if killed is None:
                return
            cgroup_killed = killed
            left = deadline - time.monotonic()
            if left <= 0:
                return
            yield self._wait(min(left, 0.02))

    def report(self, t0: float) -> TeardownReport:
        ms = list(self.members.values())

        def procs(pick) -> tuple[Proc, ...]:
            return tuple(m.proc for m in ms if pick(m))

        return TeardownReport(
            root=None,
            found=procs(lambda m: True),
            exited=procs(lambda m: m.ended and not m.killed),
            killed=procs(lambda m: m.killed),
            survivors=procs(lambda m: not m.ended),
            late=procs(lambda m: m.late),
            denied=procs(lambda m: m.denied),
            elapsed=time.monotonic() - t0,
            mode="cgroup",
            signals={pid: _signal_name(sig) for pid, sig in self.signals.items()},
        )

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.waiter.close()
        for m in self.members.values():
            if m.target is not None:
                m.target.close()


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"SIG{sig}"


def cgroup_teardown(
    path: str,
    grace: float,
    *,
    spare: Iterable[int] = (),
    stop_signal: int = signal.SIGTERM,
    already: Mapping[tuple[int, int], int] | None = None,
) -> _CgroupTeardown:
    """A not yet started teardown of the tree cgroup at path, for engine.run_blocking_many to drive beside others.

    Its report: root None, mode "cgroup". spare: pids never signalled one by
    one (the keeper); already: (pid, start time) -> a stop signal another
    path sent that member (it gets no second one).
    """
    return _CgroupTeardown(path, grace, spare, stop_signal, already)


def end_cgroup(
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
    and kill where the kernel lacks it, and SIGKILL each member left. spare:
    pids never signalled one by one (the keeper). stop_fd: once readable, the
    rest of the grace is skipped. Runs in the calling thread and starts none.
    """
    run = cgroup_teardown(path, grace, spare=spare, stop_signal=stop_signal, already=already)
    return _engine.run_blocking(run, stop_fd)


def signal_member(proc: Proc, sig: int, guard: _signals.Guard | None = None) -> str:
    """Send sig to the process proc records, if it is still that process: signals.SENT, GONE or DENIED.

    ValueError if the guard (default: a fresh one for this process) forbids it.
    """
    guard = _signals.Guard() if guard is None else guard
    try:
        target = _signals.open_target(proc, guard, _signals.pidfds_available())
    except AccessDenied:
        return _signals.DENIED
    if target is None:
        return _signals.GONE
    try:
        return _signals.send(target, sig, guard)
    finally:
        target.close()


def kill_below_keeper(keeper_pid: int, *, cgroup: str | None, session: bool) -> None:
    """SIGKILL everything a stopped keeper started: its descendants, its cgroup, and (session mode) its session.

    keeper_pid must be our unreaped child (so its pid, and the session it
    leads, are still its own); the keeper itself is left to the caller.
    """
    try:
        _engine.terminate_tree(keeper_pid, grace=0, include_root=False, signal_group=False)
    except (NoSuchProcess, ValueError):
        pass  # gone already: what it held went to init, and the cgroup/session sweeps below still apply
    if session:
        _kill_session(keeper_pid)
    if cgroup is not None:
        end_cgroup(cgroup, 0)


def _kill_session(sid: int, rounds: int = 10) -> None:
    """SIGKILL the members of session sid (its leader excluded), re-reading until none is left (bounded)."""
    guard = _signals.Guard()
    for _ in range(rounds):
        members = [p for p in _binding.snapshot().values() if p.sid == sid and p.pid != sid and not p.is_zombie]
        if not members:
            return
        for p in members:
            try:
                signal_member(p, signal.SIGKILL, guard)
            except ValueError:
                pass  # protected (the caller's own session is never ours to end)
        time.sleep(0.005)
