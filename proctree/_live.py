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


def _verified_children(parent_pid):
    """Direct children of parent_pid as Procs, or None if no consistent read was had."""
    for _ in range(ATTEMPTS):
        try:
            pids = _binding.child_pids(parent_pid)
        except _binding.Incomplete:
            continue
        kids = []
        for pid in pids:
            try:
                p = _binding.proc(pid)
            except NoSuchProcess:
                break
            if p.ppid != parent_pid:
                break
            kids.append(p)
        else:
            return kids
    return None


def children(pid):
    """Direct children of pid (validated), as Procs."""
    _binding.proc(pid)  # NoSuchProcess for a pid that is not there
    try:
        kids = _verified_children(pid)
    except NoSuchProcess:
        raise NoSuchProcess(pid) from None
    if kids is None:
        return _binding.snapshot().children(pid)
    return kids


def descendants(pid):
    """Every process below pid (validated), breadth-first, pid excluded."""
    _binding.proc(pid)
    out = []
    seen = {pid}
    queue = deque([pid])
    first = True
    while queue:
        parent = queue.popleft()
        try:
            kids = _verified_children(parent)
        except NoSuchProcess:
            if first:
                raise NoSuchProcess(pid) from None
            kids = []  # it exited during the walk: its children left the subtree
        first = False
        if kids is None:
            return _binding.snapshot().descendants(pid)
        for k in kids:
            if k.pid not in seen:
                seen.add(k.pid)
                out.append(k)
                queue.append(k.pid)
    return out
