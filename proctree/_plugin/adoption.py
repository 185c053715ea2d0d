"""The run's members when pytest runs below the run's subreaper (handoff.py) rather than being one itself.

pytest's own descendants, as always, and the orphans the subreaper adopted:
its children other than the pytest below it, each with what it started,
that this pytest's containment is the innermost of (their PROCTREE_TREE
begins with its tree id). An orphan of an xdist worker, or of a tree
proctree contains itself (its own keeper ends it), or a watchdog, names
another first. One that scrubbed its environment is the run's, in the
pytest below the subreaper (a worker cannot tell it is its own). What
already ran below pytest when the run began, and what that starts, is never
a member.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import proctree

from .describe import Identity, identity

TREE_ENV = "PROCTREE_TREE"
# A process in the middle of an exec shows neither environment nor command line for a moment (the new
# image's are not laid out yet), as an exiting one does: it is read again, 1 ms apart and then up to 8 ms,
# for up to RECHECK_BUDGET seconds (a loaded machine's exec of `sleep` outlasted 47 ms). Only such a
# process costs the wait.
RECHECK_PAUSE, RECHECK_PAUSE_MAX, RECHECK_BUDGET = 0.001, 0.008, 0.25


def _read_settled(pid: int) -> tuple[dict[str, str] | None, list[str], bool]:
    """pid's environment and argv, read again while both are empty and it is not a zombie (an exec under way,
    or an exit), and whether it still reads so; (None, [], False) when it is gone or not ours to read."""
    pause, deadline = RECHECK_PAUSE, time.monotonic() + RECHECK_BUDGET
    while True:
        try:
            environment, argv = proctree.environ(pid), proctree.cmdline(pid)
            zombie = proctree.proc(pid).is_zombie
        except (proctree.Error, OSError):
            return None, [], False
        if environment or argv or zombie:
            return environment, argv, False
        if time.monotonic() >= deadline:
            return environment, argv, True
        time.sleep(pause)
        pause = min(pause * 2, RECHECK_PAUSE_MAX)


def _pipes_and_sockets(pid: int) -> set[str]:
    """The pipes and sockets pid holds open, as the kernel names them ("pipe:[N]", "socket:[N]"); empty when gone or
    not ours to read (Linux: the run's subreaper is Linux's)."""
    found: set[str] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(("pipe:", "socket:")):
            found.add(target)
    return found


@dataclass(frozen=True)
class Mark:
    """The members at one moment, by identity (as Containment.mark())."""

    identities: frozenset[Identity] = field(default_factory=frozenset)
    procs: tuple[proctree.Proc, ...] = field(default=(), compare=False)


class Adoption:
    def __init__(self, helper: int, tree_id: str, worker: bool) -> None:
        self.helper, self.tree_id, self.worker = helper, tree_id, worker
        self.me = os.getpid()
        # The environment this process started with, as the kernel shows it (os.environ's changes since,
        # the run's tree id among them, are not in it): what a fork of it shows until it execs.
        try:
            self.startup_environ: dict[str, str] | None = proctree.environ(self.me)
        except (proctree.Error, OSError):
            self.startup_environ = None
        self.run = self._run_below_helper()
        self.outside = {identity(p) for p in self._descendants(self.me)}

    def _run_below_helper(self) -> int:
        """The subreaper's child on this process's line of ancestors (the pytest it started)."""
        pid = self.me
        for _ in range(64):
            p = proctree.proc(pid)
            if p.ppid == self.helper:
                return pid
            pid = p.ppid
        return self.me

    @staticmethod
    def _descendants(pid: int) -> list[proctree.Proc]:
        try:
            return proctree.descendants(pid)
        except proctree.NoSuchProcess:
            return []

    def _ours(self, pid: int) -> bool:
        environment, argv, unsettled = _read_settled(pid)
        if environment is None:
            return False  # gone, or not ours to read
        value = environment.get(TREE_ENV)
        if self.startup_environ and environment == self.startup_environ:
            # A fork of this process that has not exec'd (yet): the kernel still shows the environment this
            # process started with, without the tree id it set since (a daemon between its double fork and
            # its exec, or a forked worker that never execs). Only what runs below the run's subreaper is
            # looked at here, so outside xdist nothing else can carry that very environment; xdist's workers
            # all start with one and the same, so a worker tells its own forks by their descriptors.
            return not self.worker or self._forked_here(pid)
        if not value:
            # No tree id: scrubbed (the run's, in the pytest below the subreaper), or exiting (its memory is
            # gone, its command line with it: a worker's or watchdog's last moment is nobody's leak), or an exec
            # slower than the re-reads: the run's, as a scrubbed one is (a leak check's settle lets an exiting
            # one go). A worker cannot tell any of these from another worker's.
            return not self.worker and (bool(argv) or unsettled)
        return value.split(":")[0] == self.tree_id

    def _forked_here(self, pid: int) -> bool:
        """pid (which shows this worker's startup environment) holds a pipe or socket that this worker holds and
        no sibling worker does (a fork keeps every descriptor until it closes it or execs), and none that only a
        sibling holds. A fork that closed them all is claimed by no worker: the controller's check finds it."""
        theirs = _pipes_and_sockets(pid)
        if not theirs:
            return False
        siblings: set[str] = set()
        try:
            for sibling in proctree.children(self.run if self.run != self.me else os.getppid()):
                if sibling.pid != self.me:
                    siblings |= _pipes_and_sockets(sibling.pid)
        except proctree.Error:
            return False
        mine = _pipes_and_sockets(self.me)
        return bool(theirs & (mine - siblings)) and not theirs & (siblings - mine)

    def members(self) -> list[proctree.Proc]:
        outside: set[int] = set()
        kept: list[proctree.Proc] = []
        for p in self._descendants(self.me):  # breadth-first: a parent comes before its children
            if identity(p) in self.outside or p.ppid in outside:
                outside.add(p.pid)
            else:
                kept.append(p)
        try:
            adopted = [q for q in proctree.children(self.helper) if q.pid != self.run and not q.is_zombie]
        except proctree.NoSuchProcess:
            adopted = []
        for q in adopted:
            if not self._ours(q.pid):
                continue
            kept.append(q)
            kept.extend(self._descendants(q.pid))
        return [p for p in kept if not p.is_zombie]

    def mark(self) -> Mark:
        members = self.members()
        return Mark(frozenset(identity(p) for p in members), tuple(members))
