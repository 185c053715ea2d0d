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
from dataclasses import dataclass, field

import proctree

from .describe import Identity, identity

TREE_ENV = "PROCTREE_TREE"


@dataclass(frozen=True)
class Mark:
    """The members at one moment, by identity (as Containment.mark())."""

    identities: frozenset[Identity] = field(default_factory=frozenset)
    procs: tuple[proctree.Proc, ...] = field(default=(), compare=False)


class Adoption:
    def __init__(self, helper: int, tree_id: str, worker: bool) -> None:
        self.helper, self.tree_id, self.worker = helper, tree_id, worker
        self.me = os.getpid()
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
        try:
            value = proctree.environ(pid).get(TREE_ENV)
        except (proctree.Error, OSError):
            return False
        if not value:
            # No tree id: scrubbed (the run's, in the pytest below the subreaper), or exiting (its memory is
            # gone, its command line with it: a worker's or watchdog's last moment is nobody's leak).
            try:
                exiting = not proctree.cmdline(pid)
            except (proctree.Error, OSError):
                exiting = True
            return not self.worker and not exiting
        return value.split(":")[0] == self.tree_id

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
