"""Read the evidence the selection needs from the system, once, into a Facts model.

The markers are found in C (one call for the whole table, no environment
copied into Python); command lines are read only for processes whose name a
rule wants; owners missing from the snapshot are confirmed gone with
kill(pid, 0) (no signal is sent) and anything else about them stays unknown.

Must never: signal anything; turn a failed read into "gone".
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from .._containment.evidence import leftovers as _leftovers
from .._containment.evidence import marker as _marker
from .._containment.evidence import receipt as _receipt
from .._errors import AccessDenied, NoSuchProcess
from .._table import binding as _binding
from .._table import credentials as _credentials
from .._table import namespaces as _namespaces
from .._table.model import Proc
from .._teardown.signals import Guard
from .._validate import PID_MAX
from .model import Skipped
from .rules import Rule
from .select import Facts, ReceiptFact

_LINUX = sys.platform.startswith("linux")


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


def _pid_max() -> int:
    """The system's largest pid (Linux /proc/sys/kernel/pid_max); PID_MAX where it cannot be read."""
    if not _LINUX:
        return PID_MAX
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return min(int(f.read()), PID_MAX)
    except (OSError, ValueError):
        return PID_MAX


def _foreign(pids: Iterable[int], mine: _namespaces.Namespaces | None) -> bool:
    """True when any of pids lives in other pid or time namespaces than the reaper, or its namespaces cannot be read
    while it exists (not provably ours)."""
    if not _LINUX:
        return False  # no pid or time namespaces elsewhere
    for pid in pids:
        ns = _namespaces.of(pid)
        if ns is None:
            if os.path.exists(f"/proc/{pid}"):
                return True
            continue
        if ns != mine:
            return True
    return False


def _unplaced(
    owner_ns: tuple[int, int] | None, carriers: Iterable[int], mine: _namespaces.Namespaces | None
) -> str | None:
    """Why evidence naming an owner in owner_ns (None: not recorded) and carried by carriers is no proof here, or None.

    Proof needs the owner's namespaces to be the reaper's and each carrier's.
    Evidence that does not record them (older versions) is placed only when
    the reaper runs in the initial namespaces: no pid namespace is above it,
    so a carrier in its namespaces had an owner in them too.
    """
    if mine is None:
        return "the reaper's own namespaces cannot be read"
    if owner_ns is None:
        if not _namespaces.is_initial(mine):
            return "it does not record its owner's namespaces, and this reaper is not in the initial ones"
    elif _LINUX and tuple(owner_ns) != tuple(mine):
        return "its owner lives in another pid or time namespace"
    if _foreign(carriers, mine):
        return "it is carried in another pid or time namespace"
    return None


def gather(*, marker: str, rules: Sequence[Rule], warnings: list[str]) -> tuple[Facts, dict[str, object]]:
    """(Facts of this moment, extras the reaper acts on: the Receipt objects by path)."""
    mine = _namespaces.of("self")
    if _LINUX and not _namespaces.is_initial(mine):
        warnings.append(
            "this reaper runs in a nested pid or time namespace: it cannot see every owner, so evidence "
            "naming an owner outside its namespaces, older markers and rule spawners prove nothing here"
        )
    snap = _binding.snapshot()
    guard = Guard()
    procs: dict[int, Proc] = {p.pid: p for p in snap.procs()}
    skipped: list[Skipped] = []
    markers = _markers(marker, procs, mine, skipped, warnings)
    rule_hits = _rule_hits(rules, procs, mine, skipped)
    cgroups, dead_ns = _cgroups(procs, mine, skipped, warnings)
    receipts, receipts_by_path = _receipts(mine, skipped, warnings)
    # The tree id of every process a receipt could lead to, to corroborate it.
    ids = {r.sid for r in receipts} | {r.pgid for r in receipts}
    near = [p.pid for p in procs.values() if (p.sid in ids or p.pgid in ids) and not p.is_zombie]
    trees: dict[int, bytes | str] = dict(_binding.env_scan(_marker.TREE_ENV, near)) if near else {}

    named = {m.pid for m in markers.values() if isinstance(m, _marker.Marker)}
    named |= {cg.owner[0] for cg in cgroups}
    named |= {r.owner[0] for r in receipts} | {r.keeper[0] for r in receipts}
    named |= {s for _, s in rule_hits.values()}
    pid_max = _pid_max()
    gone = _confirm_gone(pid for pid in named if pid not in procs and pid <= pid_max)
    ancestors = frozenset(guard.protected - {0, 1, guard.me})
    facts = Facts(
        procs,
        markers,
        cgroups,
        receipts,
        rule_hits,
        gone,
        guard.me,
        ancestors,
        trees,
        pid_max,
        _credentials.Lazy(procs),
        tuple(skipped),
        os.geteuid(),
        dead_ns,
    )
    return facts, receipts_by_path


def _markers(
    marker: str,
    procs: dict[int, Proc],
    mine: _namespaces.Namespaces | None,
    skipped: list[Skipped],
    warnings: list[str],
) -> dict[int, _marker.Marker | str]:
    """Each live process's owner marker, parsed, or why it proves nothing ("malformed", "other-namespace", ...)."""
    readable = [p.pid for p in procs.values() if not p.is_zombie]  # a zombie carries no environment
    markers: dict[int, _marker.Marker | str] = {}
    counts: dict[str, int] = {}

    def unknown(pid: int, why: str) -> None:
        markers[pid] = why
        counts[why] = counts.get(why, 0) + 1

    # One owner's members all carry one value: each distinct value is parsed once (parse_marker is pure).
    parsed: dict[bytes, Any] = {}
    for pid, v in _binding.env_scan(marker, readable).items():
        if isinstance(v, bytes):
            if v in parsed:
                m = parsed[v]
            else:
                m = parsed[v] = _marker.parse_marker(v)
            if m is None:
                unknown(pid, "malformed")
                continue
            owner = procs.get(m.pid)
            if owner is not None and owner.start_time == m.start_time and (m.legacy or (m.pidns, m.timens) == mine):
                markers[pid] = m  # a live owner of ours: it only protects, wherever its member runs
                continue
            why = _unplaced(None if m.legacy else (m.pidns, m.timens), [pid], mine)
            if why is not None:
                # Its owner's pid and start time are another namespace's numbers (or may be).
                unknown(pid, "other-namespace")
                skipped.append(Skipped(pid, f"marker {m}: not proof here: {why}"))
            else:
                markers[pid] = m
        elif v not in ("absent", "gone"):
            unknown(pid, v)
    for why, n in sorted(counts.items()):
        warnings.append(f"{n} process(es) with a {why} {marker}: never proof of anything")
    return markers


def _rule_hits(
    rules: Sequence[Rule], procs: dict[int, Proc], mine: _namespaces.Namespaces | None, skipped: list[Skipped]
) -> dict[int, tuple[str, int]]:
    """pid -> (rule name, spawner pid) for each process a rule matched (and whose spawner pid means one here)."""
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
                # A spawner pid says nothing of its namespace: placed only as a legacy value is.
                why = _unplaced(None, [p.pid], mine)
                if why is not None:
                    skipped.append(
                        Skipped(p.pid, f"rule {rule.name}: its spawner pid {spawner} is not proof here: {why}")
                    )
                else:
                    rule_hits[p.pid] = (rule.name, spawner)
                break
    return rule_hits


def _cgroups(
    procs: dict[int, Proc], mine: _namespaces.Namespaces | None, skipped: list[Skipped], warnings: list[str]
) -> tuple[list[_leftovers.LeftoverCgroup], frozenset[int]]:
    """(proctree's cgroups that are evidence here, the dead pid namespaces among their owners')."""
    cgroups: list[_leftovers.LeftoverCgroup] = []
    found_cgroups, cg_warnings = _leftovers.find()
    warnings.extend(cg_warnings)
    foreign: list[tuple[_leftovers.LeftoverCgroup, str]] = []  # empty, made in another pid namespace
    for cg in found_cgroups:
        owner = procs.get(cg.owner[0])
        if owner is not None and owner.start_time == cg.owner[1] and not owner.is_zombie and cg.ns in (None, mine):
            cgroups.append(cg)  # its owner, as we see it, is alive: it protects the cgroup
            continue
        why = _unplaced(cg.ns, cg.pids, mine)
        if why is not None and cg.ns is not None and not cg.pids and not cg.hidden and _namespaces.is_initial(mine):
            foreign.append((cg, why))
        elif why is not None:
            skipped.append(Skipped(None, f"cgroup {cg.path}: not proof here: {why}"))
        else:
            cgroups.append(cg)
    # An empty cgroup whose owner's pid namespace is dead (a container's PID 1 killed with its namespace): its
    # owner is provably gone, though its numbers are not ours.
    dead_ns = _namespaces.dead_pid_namespaces({cg.ns[0] for cg, _ in foreign if cg.ns}, procs)
    for cg, why in foreign:
        if cg.ns is not None and cg.ns[0] in dead_ns:
            cgroups.append(cg)
        else:
            skipped.append(Skipped(None, f"cgroup {cg.path}: not proof here: {why}"))
    return cgroups, dead_ns


def _receipts(
    mine: _namespaces.Namespaces | None, skipped: list[Skipped], warnings: list[str]
) -> tuple[list[ReceiptFact], dict[str, object]]:
    """(The receipts written in this reaper's namespaces, as facts; the Receipt objects by path)."""
    receipts_by_path: dict[str, object] = {}
    receipts: list[ReceiptFact] = []
    found, problems = _receipt.read_all()
    for path, why in problems:
        warnings.append(f"receipt {path} ignored: {why}")
    for r in found:
        if mine is None or (r.pidns, r.timens) != mine:
            skipped.append(
                Skipped(None, f"receipt {r.path}: written in other (or unrecorded) namespaces: not proof here")
            )
            continue
        receipts_by_path[r.path] = r
        receipts.append(
            ReceiptFact(
                r.path,
                r.owner,
                r.keeper,
                r.sid,
                r.pgid,
                r.tag,
                None if r.command is None else r.command[0],
                r.tree,
                r.uid,
            )
        )
    return receipts, receipts_by_path
