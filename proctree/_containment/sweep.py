"""Ending what carries a tree's marker once its keeper is gone, and merging the reports of such sweeps."""

from __future__ import annotations

import os
import time

from .. import _lazyimport
from .._table import binding as _binding
from .._table.model import Proc
from . import spare as _spare
from .evidence import marker as _marker

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from .._teardown import many as _many
    from .._teardown import report as _report
    from .._teardown.report import TeardownReport
else:  # teardown loads at its first use: a start never pays for it
    _many = _lazyimport.LazyModule("proctree._teardown.many", "")
    _report = _lazyimport.LazyModule("proctree._teardown.report", "")

KTHREADD = 2  # Linux: the parent of every kernel thread, whose environment is always empty
RECHECK_PAUSE = 0.001  # seconds, doubled each time up to RECHECK_PAUSE_MAX: a loaded machine's exec is slow
RECHECK_PAUSE_MAX = 0.008
RECHECKS = 8  # about 47 ms at most, and only for a process that keeps reading as having no environment


def reread_absent(found: dict[int, bytes | str], unsure: list[int]) -> None:
    """Read PROCTREE_TREE again, into found, for the pids of unsure (each read as "absent").

    A process in the middle of an exec shows an empty environment for a
    moment (the new image's is not laid out yet), which reads as "absent": a
    marked process that was exec'ing would slip through. Each is read again,
    1 ms apart and then longer, up to RECHECKS times (about 47 ms), until it
    reads otherwise (the keeper's members.c does the same). Kernel threads
    are the caller's to leave out.
    """
    pause = RECHECK_PAUSE
    for _ in range(RECHECKS):
        if not unsure:
            return
        time.sleep(pause)
        pause = min(pause * 2, RECHECK_PAUSE_MAX)
        again = _binding.env_scan(_marker.TREE_ENV, unsure)
        found.update(again)
        unsure = [pid for pid in unsure if again.get(pid) == "absent"]


def _marked_roots(tree_id: str, after: tuple[int, int], keeper: int | None) -> list[Proc]:
    """The live processes whose PROCTREE_TREE names tree_id, as roots of their own trees (a marked
    process below another marked one is left to that one's teardown).

    after: (start time, pid) of the keeper: only processes started after it
    count (in its clock tick: with a higher pid, as pids are handed out in
    order). keeper: a live keeper whose members (descendants, session) are
    left out, or None. The caller is never among them.
    """
    me = os.getpid()
    snap = _binding.snapshot()
    members = set()
    if keeper is not None:
        members.add(keeper)
        if keeper in snap:
            members.update(snap.descendant_pids(keeper))
    candidates = {
        p.pid: p
        for p in snap.values()
        if (p.start_time, p.pid) > after
        and p.pid not in members
        and (keeper is None or p.sid != keeper)
        and p.pid not in (me, 0, 1)
        and not p.is_zombie
    }
    found = _binding.env_scan(_marker.TREE_ENV, sorted(candidates))
    reread_absent(found, [pid for pid, p in candidates.items() if found.get(pid) == "absent" and p.ppid != KTHREADD])
    marked = {pid: p for pid, p in candidates.items() if _marker.carries_tree(found.get(pid), tree_id)}

    def under_another(p: Proc) -> bool:
        seen = set()
        q = p
        while q.ppid in snap and q.ppid not in seen and q.ppid > 1:
            seen.add(q.ppid)
            if q.ppid in marked:
                return True
            q = snap[q.ppid]
        return False

    return sorted((p for p in marked.values() if not under_another(p)), key=lambda p: p.pid)


def _kill_marked(tree_id: str, after: tuple[int, int]) -> list[TeardownReport]:
    """SIGKILL, as trees of their own, what carries tree_id and started after the (dead) keeper: twice, for late forks."""
    reports: list[TeardownReport] = []
    for _ in range(2):
        roots = _spare.retrying(lambda: _marked_roots(tree_id, after, None))
        if not roots:
            break
        reports += _many.end_trees(roots, grace=0, signal_group=False)
    return reports


def _merge_reports(
    main: TeardownReport, daemons: list[TeardownReport], late: list[TeardownReport], roots: list[int]
) -> TeardownReport:
    """One TeardownReport of the keeper's tree (main) and the marked daemons' trees, deduplicated by identity.

    late: the reports of daemons found only after the kill phase (all their
    members count as late); roots: the daemons' pids, kept in extra["marked"].
    """
    others = daemons + late

    def union(name: str, more: tuple[Proc, ...] = ()) -> tuple[Proc, ...]:
        seen: dict[tuple[int, int], Proc] = {}
        for r in (main, *others):
            for p in getattr(r, name):
                seen.setdefault(p.identity, p)
        for p in more:
            seen.setdefault(p.identity, p)
        return tuple(seen.values())

    return _report.replace(
        main,
        found=union("found"),
        exited=union("exited"),
        killed=union("killed"),
        survivors=union("survivors"),
        late=union("late", tuple(p for r in late for p in r.found)),
        denied=union("denied"),
        truncated=main.truncated or any(r.truncated for r in others),
        signals={k: v for r in (*reversed(others), main) for k, v in r.signals.items()},
        extra={**main.extra, **({"marked": sorted(set(roots))} if roots else {})},
    )
