"""Live subtree walks: children() and descendants() without scanning the whole table.

The kernel's per-thread children lists are fast but can skip an entry when a
child they already returned leaves the list mid-read. We re-read every listed
child (we need its record anyway) and accept a list only if each one is still
there with the same parent; otherwise we read the list again, and after a few
tries fall back to a full scan, which is slower but cannot skip.

Guarantee: every process that stayed a descendant of pid, through parent links
that did not change, for the whole call is in the answer.
"""
from collections import deque

from . import _binding
from ._errors import NoSuchProcess

ATTEMPTS = 3


def _verified_children(parent_row):
    """Direct children of the process in parent_row as (Proc, row) pairs, or None
    if no consistent read was had. Each child's row is the read that verified it,
    and stands in for the first read of its own children (pt_children_of)."""
    parent_pid = parent_row.pid
    for _ in range(ATTEMPTS):
        try:
            pids = _binding.child_pids_of(parent_row)
        except _binding.Incomplete:
            continue
        kids = []
        for pid in pids:
            try:
                p, row = _binding.proc_row(pid)
            except NoSuchProcess:
                break
            if p.ppid != parent_pid:
                break
            kids.append((p, row))
        else:
            return kids
    return None


def children(pid):
    """Direct children of pid (validated), as Procs."""
    _, row = _binding.proc_row(pid)  # NoSuchProcess for a pid that is not there
    try:
        kids = _verified_children(row)
    except NoSuchProcess:
        raise NoSuchProcess(pid) from None
    if kids is None:
        return _binding.snapshot().children(pid)
    return [p for p, _ in kids]


def descendants(pid):
    """Every process below pid (validated), breadth-first, pid excluded."""
    _, root_row = _binding.proc_row(pid)
    out = []
    seen = {pid}
    queue = deque([root_row])
    first = True
    while queue:
        parent_row = queue.popleft()
        try:
            kids = _verified_children(parent_row)
        except NoSuchProcess:
            if first:
                raise NoSuchProcess(pid) from None
            kids = []  # it exited during the walk: its children left the subtree
        first = False
        if kids is None:
            return _binding.snapshot().descendants(pid)
        for p, row in kids:
            if p.pid not in seen:
                seen.add(p.pid)
                out.append(p)
                queue.append(row)
    return out
