"""The facts the reaper's selection decides on, and the rules it reads them by (select.py decides).

ReceiptFact, Facts and Selection, the kernel's rule on who may signal whom,
and an owner's state from its (pid, start time): pure data and pure
functions over it, table-tested in tests/reaper/test_reaper_select.py.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .._containment.evidence.leftovers import LeftoverCgroup
from .._containment.evidence.marker import Marker
from .._table.model import Proc
from .._validate import PID_MAX
from .model import Orphan, Skipped


@dataclass(frozen=True)
class ReceiptFact:
    """What the reaper uses of a receipt (proctree._containment.evidence.receipt.Receipt)."""

    path: str
    owner: tuple[int, int]
    keeper: tuple[int, int]
    sid: int
    pgid: int
    tag: str | None
    command: int | None = None  # the command's pid (its process group's id), if recorded
    tree: str | None = None  # the PROCTREE_TREE value its members carry
    uid: int | None = None  # who wrote it (the file's owner); None: not recorded (synthetic facts)


Creds = tuple[int, int, int]  # (real, effective, saved) uid


def can_signal(sender: Creds, target: Creds) -> bool:
    """The kernel's kill(2) permission rule on uids: root, or sender's real or effective uid is target's real or saved."""
    s_real, s_eff, _ = sender
    t_real, _, t_saved = target
    return s_eff == 0 or s_real in (t_real, t_saved) or s_eff in (t_real, t_saved)


@dataclass(frozen=True)
class Facts:
    """Everything the selection looks at, read once.

    markers: pid -> its PROCTREE_OWNER Marker, or why it is unusable
             ("denied", "unreadable", "malformed", "too-long"); a pid with
             no marker is simply absent.
    rule_hits: pid -> (rule name, the spawner pid its argv declares).
    gone: pids confirmed not to exist after the snapshot was taken.
    trees: pid -> its PROCTREE_TREE value, or why it is unknown ("absent",
           "denied", ...), for the processes a receipt could lead to.
    pid_max: the largest pid this system assigns; a larger one is no owner.
    creds: pid -> (real, effective, saved) uid; a pid missing from it has
           unknown credentials (never a candidate). None: every process's
           three uids are its Proc.uid (synthetic facts).
    skipped: evidence the gathering already judged not proof here (another
             namespace, a legacy value it cannot place), reported as is.
    reaper_uid: a dead cgroup made by another uid than the reaper's (or root)
                is never ended whole by cgroup.kill, which would reach what
                joins it later regardless of credentials: its orphans end one
                by one, each by identity.
    """

    procs: Mapping[int, Proc]
    markers: Mapping[int, Marker | str] = field(default_factory=dict)
    cgroups: Sequence[LeftoverCgroup] = ()
    receipts: Sequence[ReceiptFact] = ()
    rule_hits: Mapping[int, tuple[str, int]] = field(default_factory=dict)
    gone: frozenset[int] = frozenset()
    me: int = 0
    ancestors: frozenset[int] = frozenset()
    trees: Mapping[int, bytes | str] = field(default_factory=dict)
    pid_max: int = PID_MAX
    creds: Mapping[int, Creds] | None = None
    skipped: Sequence[Skipped] = ()
    reaper_uid: int | None = None  # the reaper's effective uid; None: not recorded (synthetic facts)
    # Pid namespaces (inodes) no process lives in any more: an empty cgroup its owner made there is the
    # owner's leftover, though the owner's numbers are another namespace's.
    dead_namespaces: frozenset[int] = frozenset()

    def creds_of(self, pid: int) -> Creds | None:
        if self.creds is None:
            p = self.procs.get(pid)
            return None if p is None else (p.uid, p.uid, p.uid)
        return self.creds.get(pid)


@dataclass
class Selection:
    orphans: list[Orphan]
    skipped: list[Skipped]
    warnings: list[str]
    protected: set[int]  # never candidates (and their subtrees)
    dead_cgroups: list[LeftoverCgroup]  # tree cgroups (or empty parents) whose owner is gone
    whole_cgroups: list[LeftoverCgroup]  # dead tree cgroups all of whose live processes are orphans
    stale_receipts: list[str]  # receipts whose owner and keeper are gone and that lead to nothing
    receipt_orphans: dict[str, set[int]]  # receipt path -> the orphans it led to


ALIVE, EXITED, REUSED, GONE, UNKNOWN, INVALID = "alive", "exited", "reused", "gone", "unknown", "invalid"
_GONE_REASON = {EXITED: "owner-exited", REUSED: "owner-pid-reused", GONE: "owner-exited"}


def owner_state(facts: Facts, pid: int, start: int | None) -> str:
    """alive, exited (a zombie of it), reused, gone (confirmed absent), unknown, or invalid (pid <= 1)."""
    if pid <= 1 or pid > facts.pid_max:
        return INVALID
    p = facts.procs.get(pid)
    if p is None:
        return GONE if pid in facts.gone else UNKNOWN
    if start is None:
        return EXITED if p.is_zombie else ALIVE
    if p.start_time == start:
        return EXITED if p.is_zombie else ALIVE
    if p.start_time > start:
        return REUSED
    return UNKNOWN  # an older process at the owner's pid: the evidence is wrong, not the owner gone


def _children(procs: Mapping[int, Proc]) -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for p in procs.values():
        if p.ppid != p.pid:
            kids.setdefault(p.ppid, []).append(p.pid)
    return kids


def subtree(kids: Mapping[int, list[int]], roots: Iterable[int], stop: Collection[int] = ()) -> list[int]:
    """roots and everything below them by parent links, not entering stop; terminates on cycles."""
    out: list[int] = []
    seen: set[int] = set()
    stack = [r for r in roots]
    while stack:
        pid = stack.pop()
        if pid in seen or pid in stop:
            continue
        seen.add(pid)
        out.append(pid)
        stack.extend(kids.get(pid, ()))
    return out


def _after(p: Proc, start: int, reused_by: Proc | None) -> bool:
    """p started after the keeper, and before a later process that took the id (if any)."""
    if p.start_time < start:
        return False
    return reused_by is None or p.start_time < reused_by.start_time
