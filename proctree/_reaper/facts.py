"""Read the evidence the selection needs from the system, once, into a Facts model.

The markers are found in C (one call for the whole table, no environment
copied into Python); command lines are read only for processes whose name a
rule wants; owners missing from the snapshot are confirmed gone with
kill(pid, 0) (no signal is sent) and anything else about them stays unknown.

Must never: signal anything; turn a failed read into "gone".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from .._containment import leftovers as _leftovers
from .._containment import marker as _marker
from .._containment import receipt as _receipt
from .._errors import AccessDenied, NoSuchProcess
from .._table import binding as _binding
from .._table.model import Proc
from .._teardown.signals import Guard
from .._validate import PID_MAX
from .rules import Rule
from .select import Facts, ReceiptFact


def _confirm_gone(pids: Iterable[int]) -> frozenset[int]:
    """The pids (> 1) that provably do not exist now: kill(pid, 0) says ESRCH. Sends no signal."""
    gone = set()
    for pid in pids:
        if not 1 < pid <= PID_MAX:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            gone.add(pid)
        except OSError:
            pass  # it exists (EPERM) or the answer is unknown: not proof
    return frozenset(gone)


def argv_of(pid: int) -> list[str] | None:
    """pid's argv decoded like file names, or None when it cannot be read."""
    try:
        block = _binding.cmdline_block(pid)
    except (NoSuchProcess, AccessDenied, OSError):
        return None
    if not block:
        return []
    return [os.fsdecode(a) for a in block.rstrip(b"\0").split(b"\0")]


def gather(*, marker: str, rules: Sequence[Rule], warnings: list[str]) -> tuple[Facts, dict[str, object]]:
    """(Facts of this moment, extras the reaper acts on: the Receipt objects by path)."""
    snap = _binding.snapshot()
    guard = Guard()
    procs: dict[int, Proc] = {p.pid: p for p in snap.procs()}
    # Kernel threads and zombies carry no environment.
    readable = [p.pid for p in procs.values() if not p.is_zombie and p.pid != 2 and p.ppid != 2]
    markers: dict[int, _marker.Marker | str] = {}
    counts: dict[str, int] = {}
    for pid, v in _binding.env_scan(marker, readable).items():
        if isinstance(v, bytes):
            m = _marker.parse_marker(v)
            markers[pid] = m if m is not None else "malformed"
            if m is None:
                counts["malformed"] = counts.get("malformed", 0) + 1
        elif v not in ("absent", "gone"):
            markers[pid] = v
            counts[v] = counts.get(v, 0) + 1
    for why, n in sorted(counts.items()):
        warnings.append(f"{n} process(es) with a {why} {marker}: never proof of anything")

    rule_hits: dict[int, tuple[str, int]] = {}
    wanting_by_name: dict[str, list[Rule]] = {}  # names repeat (thousands of one worker): ask each rule once per name
    for p in procs.values():
        if p.is_zombie:
            continue
        wanting = wanting_by_name.get(p.name)
        if wanting is None:
            wanting = wanting_by_name[p.name] = [r for r in rules if r.wants_name(p.name)]
        if not wanting:
            continue
        argv = argv_of(p.pid)
        if not argv:
            continue
        for rule in wanting:
            spawner = rule.match(argv)
            if spawner is not None:
                rule_hits[p.pid] = (rule.name, spawner)
                break

    cgroups, cg_warnings = _leftovers.find()
    warnings.extend(cg_warnings)

    receipts_by_path: dict[str, object] = {}
    receipts: list[ReceiptFact] = []
    found, problems = _receipt.read_all()
    for path, why in problems:
        warnings.append(f"receipt {path} ignored: {why}")
    for r in found:
        receipts_by_path[r.path] = r
        receipts.append(ReceiptFact(r.path, r.owner, r.keeper, r.sid, r.pgid, r.tag))

    named = {m.pid for m in markers.values() if isinstance(m, _marker.Marker)}
    named |= {cg.owner[0] for cg in cgroups}
    named |= {r.owner[0] for r in receipts} | {r.keeper[0] for r in receipts}
    named |= {s for _, s in rule_hits.values()}
    gone = _confirm_gone(pid for pid in named if pid not in procs)
    ancestors = frozenset(guard.protected - {0, 1, guard.me})
    facts = Facts(procs, markers, cgroups, receipts, rule_hits, gone, guard.me, ancestors)
    return facts, receipts_by_path
