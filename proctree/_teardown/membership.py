"""Which processes belong to a tree, decided on one Snapshot: pure logic, no system calls.

The tree is the root plus everything reachable from it, in one snapshot, by
  - parent links: a child of a member (seen with the member's start time) is a member;
  - kinship: an ORPHAN in a session or process group whose id is the pid of a
    member seen holding that pid with its recorded start time in the same
    snapshot is a member. That catches a descendant whose parent died and
    which reparented away, as long as it kept its session or group. The kernel
    does not reuse a pid that still names a process, group or session, so the
    group or session was created by that very member: a zombie leader still
    proves it, even where its own row no longer says it leads (macOS reports a
    zombie's session as 0).
    An orphan is a process whose parent is pid 1, or a parent in another
    session (a subreaper or init outside the tree adopted it: nothing that
    started it shares its session any more). A process whose parent is alive
    in the same session belongs to that parent: a sibling job (`b` in `a | b`)
    or what a process outside the tree started is never taken by kinship.
Members are kept by identity (pid, start time) across snapshots, so a member
whose parent died is still a member.

What a protected process (the caller, its ancestors) started is never a
member, at any depth: when the walk meets a protected process inside the tree,
its subtree is recorded by identity ("theirs") and never taken, then or in a
later scan, even after it is orphaned; and an orphan
reached only through a group or session that holds a protected process,
started after that process, is ambiguous (the protected process may have
started it) and is not taken. An orphan found through a member's group that
no protected process shares is taken even when the caller shares the
session: only a deliberate setpgid moves a process into another's group.

Never: take a protected process as a member, or walk through one; never grow
past the cap.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from .._table.model import Proc, Snapshot


class Selection(NamedTuple):
    new: tuple[Proc, ...]  # members not known before, breadth-first
    spared: tuple[Proc, ...]  # protected processes the tree holds (never signalled)
    truncated: bool  # more members exist than the cap allowed
    theirs: dict[int, int]  # pid -> start time of what protected processes started (never members)
    ambiguous: tuple[Proc, ...] = ()  # orphans in a protected process's session: not taken
    # Live processes in the members' groups and sessions that are not members
    # only because their parent is alive: each may become an orphan (a member)
    # when that parent exits, without any fork. 0 means a later kinship scan
    # can only find something new after a fork or a new member.
    may_orphan: int = 0
    # Zombies in the members' groups and sessions. A snapshot lists the pids
    # first and reads each one after: a process that forked and died between
    # the two shows up dead while its child, born after the listing, is
    # missing. Only a scan that starts after a zombie was seen is sure to list
    # what it forked.
    dead_kin: tuple[tuple[int, int], ...] = ()


def _orphaned(q: Proc, snap) -> bool:
    """True if q was adopted: its parent is init, or a process in another session."""
    if q.ppid == 1:
        return True
    parent = snap.get(q.ppid)
    return parent is not None and parent.sid != q.sid


def _group_and_session_ids(snap) -> frozenset:
    """Every process group and session id in use in snap."""
    ids = set()
    for p in snap.values():
        ids.add(p.pgid)
        ids.add(p.sid)
    return frozenset(ids)


def _protected_homes(snap, protected) -> dict[tuple[str, int], int]:
    """("sid"|"pgid", id) -> the earliest start time of a protected process in that session or group."""
    out: dict[tuple[str, int], int] = {}
    for pid in protected:
        p = snap.get(pid) if pid > 0 else None
        if p is None:
            continue
        for key in (("sid", p.sid), ("pgid", p.pgid)):
            if key[1] > 0:
                out[key] = min(out.get(key, p.start_time), p.start_time)
    return out


def _unambiguous(q: Proc, kin_leaders, homes) -> bool:
    """True if q is reached through a group or session that no protected process
    shares from before q started (where one does, it may have started q)."""
    for kind, ident in (("pgid", q.pgid), ("sid", q.sid)):
        if ident not in kin_leaders:
            continue
        first = homes.get((kind, ident))
        if first is None or q.start_time < first:
            return True
    return False


def select(
    snap: Snapshot,
    anchors: Mapping[int, int],
    protected: Iterable[int],
    cap: int,
    owners: Iterable[int] | None = frozenset(),
    theirs: Mapping[int, int] | None = None,
    held: int | None = None,
) -> Selection:
    """New members found in snap.

    anchors:   {pid: start_time} of the root and every known member (gone ones too:
               a pid seen with another start time is someone else and is skipped)
    protected: pids never taken as members, nor walked through
    cap:       most identities ever held (anchors included)
    owners:    the caller and its ancestors, or None to follow parent links
               only (no pass over the whole table). An orphan they adopted (a
               subreaper caller, a caller that is pid 1) is taken like any
               other: fork keeps the session, so a child of theirs in another
               session was adopted, not started; one in their own session is
               not an orphan by the rule above.
    theirs:    {pid: start_time} already known to be started by a protected
               process: never taken
    held:      how many identities count against cap already (default: every
               anchor; the root is an anchor but no member with include_root=False)
    """
    protected = frozenset(protected)
    theirs_out: dict[int, int] = dict(theirs or {})
    new = []
    spared = []
    ambiguous = []
    seen = set()
    room = cap - (len(anchors) if held is None else held)
    truncated = False
    queue: deque = deque()
    kin_leaders = set()  # members whose pid names a group or session in snap
    for pid, start in anchors.items():
        p = snap.get(pid)
        if p is not None and p.start_time == start:
            seen.add(pid)
            queue.append(p)

    def record_theirs(p):
        # Everything below a protected process, now: it stays theirs by identity.
        stack = [p.pid]
        while stack:
            for c in snap.child_pids(stack.pop()):
                q = snap[c]
                if theirs_out.get(c) != q.start_time:
                    theirs_out[c] = q.start_time
                    stack.append(c)

    def is_theirs(p):
        return theirs_out.get(p.pid) == p.start_time

    def take(p):
        nonlocal room, truncated
        if p.pid in seen:
            return
        seen.add(p.pid)
        if p.pid in protected:
            spared.append(p)
            record_theirs(p)
            return
        if is_theirs(p):
            return
        if room <= 0:
            truncated = True
            return
        room -= 1
        new.append(p)
        queue.append(p)

    owner_set = frozenset(owners) if owners is not None else None
    homes = _protected_homes(snap, protected) if owners is not None else {}
    group_ids = _group_and_session_ids(snap) if owners is not None else frozenset()

    checked = 0  # how many leaders the last kinship pass knew
    not_orphaned: set = set()  # in the last kinship pass: kin, but a live parent holds them
    dead_kin: dict = {}  # pid -> start time of zombies in a kin group or session
    while True:
        while queue:  # parent links, breadth-first
            p = queue.popleft()
            if p.pid in group_ids:
                kin_leaders.add(p.pid)
            for c in snap.child_pids(p.pid):
                take(snap[c])
        if owner_set is None or len(kin_leaders) == checked:
            break
        checked = len(kin_leaders)
        not_orphaned = set()
        # Kinship: one pass over the table per round of new leaders.
        for q in snap.values():
            if q.pid in seen or not (q.pgid in kin_leaders or q.sid in kin_leaders):
                continue
            if q.is_zombie:
                dead_kin[q.pid] = q.start_time
                continue
            if not _orphaned(q, snap):
                if not is_theirs(q):
                    not_orphaned.add(q.pid)
                continue
            if q.pid not in protected and not _unambiguous(q, kin_leaders, homes):
                if not is_theirs(q):
                    ambiguous.append(q)
                seen.add(q.pid)
                continue
            take(q)
    taken = {p.pid for p in new}
    may_orphan = sum(1 for pid in not_orphaned if pid not in taken)
    return Selection(
        tuple(new), tuple(spared), truncated, theirs_out, tuple(ambiguous), may_orphan, tuple(dead_kin.items())
    )
