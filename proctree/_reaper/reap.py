"""find_orphans and reap_orphans: gather the facts, select, then end what was selected.

Ending goes through the teardown engine (identity-checked TERM, then KILL
after the grace; late forks of an orphan caught by its rescans), every orphan
tree at once, with every other process of the snapshot in the engine's guard:
the engine can take nothing the selection did not choose, except what an
orphan forks during the teardown. A leftover cgroup whose processes are all
selected ends with cgroup.kill and is removed.

Must never: signal what the selection did not choose; raise after it has
started to signal (errors become warnings in the report).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Collection, Iterable, Sequence
from signal import SIGTERM

from .._containment.evidence import leftovers as _leftovers
from .._containment.evidence import marker as _marker
from .._containment.evidence import receipt as _receipt
from .._table.model import Proc
from .._teardown import engine as _engine
from .._teardown import many as _many
from .._teardown.ladder import Ladder
from .._teardown.report import TeardownReport
from .._validate import check_pid, check_seconds
from . import facts as _facts
from .model import Orphan, ReapReport, Skipped
from .rules import DEFAULT_RULES, Rule
from .select import Selection, select, subtree

MARKER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _check_selection_args(
    marker: object, tag: object, rules: object, within: object, protect: object
) -> tuple[str, str | None, tuple[Rule, ...], frozenset[int] | None, tuple[re.Pattern[str], ...]]:
    if not isinstance(marker, str):
        raise TypeError(f"marker must be a str, not {type(marker).__name__}")
    if not MARKER_RE.fullmatch(marker):
        raise ValueError(f"marker must be an environment variable name ([A-Za-z_][A-Za-z0-9_]{{0,63}}), got {marker!r}")
    checked_tag: str | None = _marker.check_tag(tag)
    if isinstance(rules, (str, bytes, Rule)) or not isinstance(rules, Iterable):
        raise TypeError("rules must be a sequence of proctree.Rule")
    rules = tuple(rules)
    for r in rules:
        if not isinstance(r, Rule):
            raise TypeError(f"rules must hold proctree.Rule objects, not {type(r).__name__}")
    pids: frozenset[int] | None = None
    if within is not None:
        if isinstance(within, (str, bytes, int)) or not isinstance(within, Iterable):
            raise TypeError("within must be None or a collection of pids")
        pids = frozenset(check_pid(p, "a pid in within") for p in within)
    if isinstance(protect, (str, bytes)) or not isinstance(protect, Iterable):
        raise TypeError("protect must be a sequence of regular expressions (str or re.Pattern)")
    patterns = []
    for p in protect:
        if isinstance(p, re.Pattern):
            if not isinstance(p.pattern, str):
                raise TypeError("protect patterns must be str patterns, not bytes")
            patterns.append(p)
        elif isinstance(p, str):
            try:
                patterns.append(re.compile(p))
            except re.error as exc:
                raise ValueError(f"protect pattern {p!r} is not a regular expression: {exc}") from exc
        else:
            raise TypeError(f"protect patterns must be str or re.Pattern, not {type(p).__name__}")
    return marker, checked_tag, rules, pids, tuple(patterns)


def _apply_protect(sel: Selection, patterns: Sequence[re.Pattern[str]]) -> None:
    """Drop candidates whose command line (or, unreadable, name) a protect pattern matches, with their subtrees.

    A leftover cgroup holding a dropped process is no longer ended whole.
    """
    if not patterns:
        return
    kids: dict[int, list[int]] = {}
    for o in sel.orphans:
        kids.setdefault(o.proc.ppid, []).append(o.proc.pid)
    dropped: set[int] = set()
    for o in sel.orphans:
        argv = _facts.argv_of(o.proc.pid)
        text = " ".join(argv) if argv else o.proc.name
        hit = next((p for p in patterns if p.search(text)), None)
        if hit is not None:
            for pid in subtree(kids, [o.proc.pid]):
                if pid not in dropped:
                    dropped.add(pid)
                    sel.skipped.append(
                        Skipped(
                            pid,
                            f"protected: matches {hit.pattern!r}"
                            if pid == o.proc.pid
                            else f"protected: below {o.proc.pid}",
                        )
                    )
    sel.orphans = [o for o in sel.orphans if o.proc.pid not in dropped]
    sel.protected |= dropped
    sel.whole_cgroups = [cg for cg in sel.whole_cgroups if not dropped.intersection(cg.pids)]


def _find(
    marker: str,
    tag: str | None,
    rules: tuple[Rule, ...],
    within: frozenset[int] | None,
    patterns: tuple[re.Pattern[str], ...],
    seen_before: set[int] | None = None,
) -> tuple[Selection, dict[str, object], set[int]]:
    """Gather, select, apply protect= ; (the selection, receipts by path, the pids of this read).

    seen_before: in a scoped sweep's later passes, the pids of its first read:
    a process that did not exist then joins the scope (an orphan's late fork).
    """
    warnings: list[str] = []
    facts, receipts = _facts.gather(marker=marker, rules=rules, warnings=warnings)
    if within is not None and seen_before is not None:
        within = within | frozenset(pid for pid in facts.procs if pid not in seen_before)
    sel = select(facts, tag=tag, within=within)
    sel.warnings[:0] = warnings
    _apply_protect(sel, patterns)
    return sel, receipts, set(facts.procs)


def find_orphans(
    *,
    marker: str = _marker.ENV,
    tag: str | None = None,
    rules: Sequence[Rule] = DEFAULT_RULES,
    within: Collection[int] | None = None,
    protect: Sequence[str | re.Pattern[str]] = (),
) -> list[Orphan]:
    """The processes whose owner is provably gone, with the evidence; no signal is sent.

    marker: the environment variable that names an owner (PROCTREE_OWNER);
    tag: only trees spawned with this tag; rules: argv rules for helpers that
    scrub their environment (DEFAULT_RULES); within: only these pids may be
    candidates (the evidence is still read machine-wide); protect: regular
    expressions searched in a candidate's command line: a match is never a
    candidate, nor anything below it.
    """
    args = _check_selection_args(marker, tag, rules, within, protect)
    sel, _, _ = _find(*args)
    return list(sel.orphans)


def reap_orphans(
    *,
    dry_run: bool = False,
    grace: float = 2.0,
    marker: str = _marker.ENV,
    tag: str | None = None,
    rules: Sequence[Rule] = DEFAULT_RULES,
    within: Collection[int] | None = None,
    protect: Sequence[str | re.Pattern[str]] = (),
) -> ReapReport:
    """Select as find_orphans does, then end the orphans (TERM, then KILL after grace) and report.

    Leftover proctree cgroups whose owner is gone are ended with cgroup.kill
    when all they hold was selected, and removed once empty; receipts of trees
    that are entirely gone are removed. dry_run: select and report, nothing more.
    """
    if not isinstance(dry_run, bool):
        raise TypeError(f"dry_run must be a bool, not {type(dry_run).__name__}")
    grace = check_seconds(grace, "grace")
    args = _check_selection_args(marker, tag, rules, within, protect)
    t0 = time.monotonic()
    sel, receipts, seen = _find(*args)
    scoped = args[3] is not None  # within: cgroups and receipts may hold more than the scope
    if dry_run:
        return ReapReport(
            candidates=tuple(sel.orphans),
            skipped=tuple(sel.skipped),
            warnings=tuple(sel.warnings),
            cgroups_removed=tuple(
                cg.path for cg in sel.dead_cgroups if _removable(cg, sel, scoped) and _may_remove(cg.path)
            ),
            receipts_removed=() if scoped else tuple(sorted(p for p in sel.stale_receipts if p in receipts)),
            dry_run=True,
            elapsed=time.monotonic() - t0,
        )
    warnings = list(sel.warnings)
    candidates = list(sel.orphans)
    skipped = list(sel.skipped)
    handled = {o.proc.identity for o in sel.orphans}
    first_seen = seen
    reports = _end_selection(sel, seen, grace, warnings)
    cgroups_removed = _remove_cgroups(sel, reports, scoped)
    receipts_removed = _remove_receipts(sel, receipts, reports, scoped)
    late: list[Proc] = []
    # What an orphan forked while it was being ended carries its evidence too:
    # select again (in a scoped sweep, new processes join the scope) until a pass
    # finds nothing new; what the last pass could not end is a survivor.
    passes = 0
    while sel.orphans:
        if passes == MAX_PASSES:
            warnings.append(f"orphans kept appearing after {MAX_PASSES} passes")
            break
        passes += 1
        again, receipts, seen = _find(*args, seen_before=first_seen)
        new = [o for o in again.orphans if o.proc.identity not in handled]
        if scoped:
            # A process new since the first read joins the scope only as a late fork of
            # what was taken: its evidence names the same dead owner. Another owner's
            # orphans, started meanwhile elsewhere, stay out of a scoped sweep.
            owners = {o.owner for o in candidates}
            new = [o for o in new if o.owner in owners]
        if not new:
            break
        again.orphans = new
        again.whole_cgroups = []  # late ones end one by one, by identity
        handled |= {o.proc.identity for o in new}
        late += [o.proc for o in new]
        candidates += new
        reports += _end_selection(again, seen, grace, warnings)
    ended_late = late + [p for r in reports for p in r.late]
    return ReapReport(
        candidates=tuple(candidates),
        exited=tuple(p for r in reports for p in r.exited),
        killed=tuple(p for r in reports for p in r.killed),
        survivors=tuple(p for r in reports for p in r.survivors),
        late=tuple(ended_late),
        skipped=tuple(skipped),
        warnings=tuple(warnings),
        cgroups_removed=tuple(cgroups_removed),
        receipts_removed=tuple(receipts_removed),
        elapsed=time.monotonic() - t0,
        teardowns=tuple(reports),
    )


MAX_PASSES = 5
MAX_PROCS = 16384  # each orphan tree's bound on members, as terminate_tree's default


def _end_selection(sel: Selection, seen: set[int], grace: float, warnings: list[str]) -> list[TeardownReport]:
    """End what sel chose: whole leftover cgroups by cgroup.kill, every other orphan tree through the engine.

    All at once, within one grace, driven in this thread by the engine's
    blocking driver: no thread and no event loop, so it works with the pid
    space full. One teardown's failure becomes a warning, not an exception.
    Interrupted (Ctrl-C), what is left is SIGKILLed at once: the driver aborts
    every teardown still running.
    """
    whole = sel.whole_cgroups
    in_whole = {pid for cg in whole for pid in cg.pids}
    chosen = {o.proc.pid: o.proc for o in sel.orphans}
    roots = [p for pid, p in chosen.items() if pid not in in_whole and p.ppid not in chosen]
    cgroups: list[Ladder] = [_leftovers.teardown(cg.path, grace) for cg in whole]
    try:
        trees: list[Ladder] = list(
            _many.make_engines(
                roots,
                grace,
                protect=seen - set(chosen),
                signal_group=True,
                max_procs=MAX_PROCS,
                signal=SIGTERM,
                hangup=False,
                already=None,
            )
        )
    except Exception as exc:  # a root the engine refuses outright: the cgroups still end
        warnings.append(f"teardown failed: {exc!r}")
        roots, trees = [], []
    results = _engine.run_blocking_many([*cgroups, *trees], capture=(Exception,))
    reports: list[TeardownReport] = []
    for i, result in enumerate(results):
        try:
            if i >= len(cgroups):
                result = _many.report_of(roots[i - len(cgroups)], result)
            elif not isinstance(result, TeardownReport):
                raise result
        except Exception as exc:
            warnings.append(f"teardown failed: {exc!r}")
            continue
        reports.append(result)
    return reports


def _removable(cg: _leftovers.LeftoverCgroup, sel: Selection, scoped: bool) -> bool:
    # A scoped sweep removes only what it emptied itself.
    return cg in sel.whole_cgroups or (cg.path == cg.parent and not scoped)


def _may_remove(path: str) -> bool:
    """Whether this process's rights let it remove the directory at path (rmdir: write and search on its parent),
    so that a dry run lists only what the real run would do."""
    return os.access(os.path.dirname(path), os.W_OK | os.X_OK)


def _remove_cgroups(sel: Selection, reports: list[TeardownReport], scoped: bool) -> list[str]:
    return [cg.path for cg in sel.dead_cgroups if _removable(cg, sel, scoped) and _leftovers.remove(cg)]


def _remove_receipts(
    sel: Selection, receipts: dict[str, object], reports: list[TeardownReport], scoped: bool
) -> list[str]:
    left = {p.pid for r in reports for p in r.survivors}
    chosen = {o.proc.pid for o in sel.orphans}
    done = {path for path, pids in sel.receipt_orphans.items() if pids and pids <= chosen and not pids & left}
    removed = []
    for path in sorted((set() if scoped else set(sel.stale_receipts)) | done):
        if path in receipts:
            _receipt.remove(path)
            removed.append(path)
    return removed
