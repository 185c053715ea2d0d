"""Which processes belong to a tree, decided on one Snapshot: pure logic, no system calls.

The tree is the root plus everything reachable from it, in one snapshot, by
  - parent links: a child of a member (seen with the member's start time) is a member;
  - kinship: a process in a session or process group led by a member (the
    leader seen alive with its recorded start time in the same snapshot) is a
    member. That catches a descendant whose parent died and which reparented
    away, as long as it kept its session or group. The kernel does not reuse a
    pid that still names a process, group or session, so a live leader with the
    recorded start time proves the group is the tree's.
Members are kept by identity (pid, start time) across snapshots, so a member
whose parent died is still a member.

Never: take a protected process (the caller, its ancestors, pid 0/1) as a
member, or walk through one (its children are its own business); never grow
past the cap.
"""
from collections import deque
from typing import NamedTuple, Tuple

from ._model import Proc


class Selection(NamedTuple):
    new: Tuple[Proc, ...]  # members not known before, breadth-first
    spared: Tuple[Proc, ...]  # protected processes the tree holds (never signalled)
    truncated: bool  # more members exist than the cap allowed


def select(snap, anchors, protected, cap, owners=frozenset()):
    """New members found in snap.

    anchors:   {pid: start_time} of the root and every known member (gone ones too:
               a pid seen with another start time is someone else and is skipped)
    protected: pids never taken as members
    cap:       most identities ever held (anchors included)
    owners:    pids whose children are never taken by kinship (the caller and
               its ancestors: what they start is theirs, not the tree's);
               None follows parent links only (no pass over the whole table)
    """
    new = []
    spared = []
    seen = set()
    room = cap - len(anchors)
    truncated = False
    queue = deque()
    for pid, start in anchors.items():
        p = snap.get(pid)
        if p is not None and p.start_time == start:
            seen.add(pid)
            queue.append(p)

    def take(p):
        nonlocal room, truncated
        if p.pid in seen:
            return
        seen.add(p.pid)
        if p.pid in protected:
            spared.append(p)
            return
        if room <= 0:
            truncated = True
            return
        room -= 1
        new.append(p)
        queue.append(p)

    leaders = set()
    checked = 0  # how many leaders the last kinship pass knew
    while True:
        while queue:  # parent links, breadth-first
            p = queue.popleft()
            if p.pid == p.pgid or p.pid == p.sid:
                leaders.add(p.pid)
            for c in snap.child_pids(p.pid):
                take(snap[c])
        if owners is None or len(leaders) == checked:
            break
        checked = len(leaders)
        # Kinship: one pass over the table per round of new leaders.
        for q in snap.values():
            if (
                q.pid not in seen
                and (q.pgid in leaders or q.sid in leaders)
                and not q.is_zombie
                and q.ppid not in owners
            ):
                take(q)
    return Selection(tuple(new), tuple(spared), truncated)
