"""Live subtree walks: children() and descendants() without scanning the whole table.

The kernel's per-thread children lists are fast but can skip an entry when a
child they already returned leaves the list mid-read. The core
(csrc/core/walk.c) reads every listed child back and accepts a list only
if each one is still there with the same parent, reading it again a few times;
when the tree keeps changing it says so, and we fall back to a full scan,
which is slower but cannot skip.

Guarantee: every process that stayed a descendant of pid, through parent links
that did not change, for the whole call is in the answer.
"""

from __future__ import annotations

from collections.abc import Callable

from .._errors import NoSuchProcess
from . import binding as _binding
from .model import Proc, Snapshot


def _live_walk(
    pid: int, walk: Callable[[object], list[Proc]], scan: Callable[[Snapshot, int], list[Proc]]
) -> list[Proc]:
    _, row = _binding.proc_row(pid)  # NoSuchProcess for a pid that is not there
    try:
        return walk(row)
    except _binding.Incomplete:
        return scan(_binding.snapshot(), pid)
    except NoSuchProcess:
        raise NoSuchProcess(pid) from None


def children(pid: int) -> list[Proc]:
    """Direct children of pid (validated), as Procs."""
    return _live_walk(pid, _binding.verified_children_of, lambda snap, p: snap.children(p))


def descendants(pid: int) -> list[Proc]:
    """Every process below pid (validated), breadth-first, pid excluded."""
    return _live_walk(pid, _binding.descendants_of, lambda snap, p: snap.descendants(p))
