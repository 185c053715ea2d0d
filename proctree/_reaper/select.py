"""Which processes are orphans: a pure decision over one Facts model.

The rules, each a test in tests/reaper/test_reaper_select.py:
- Evidence names an owner (pid, start time). The owner is gone only on
  positive proof: its pid holds a zombie of it ("owner-exited"), holds a
  process that started later ("owner-pid-reused"), or was confirmed absent
  after the snapshot. Anything else (unreadable, a start time that cannot
  be, pid 0 or 1) is "unknown" and proves nothing.
- A live owner protects its whole current subtree, every process carrying
  its marker, its cgroups' members and its receipts' sessions, and all that
  they started: none of it is ever a candidate, whatever its argv says.
- Never pid 0 or 1, the reaper itself or its ancestors.
- An orphan's unmarked descendants are attributed through it (via
  "ancestor <pid>"); a descendant whose own evidence is unknown, or that is
  protected, stops the descent.
- Receipts lead to their session and process group only when the owner AND
  the keeper are gone, and only to processes started after the keeper (and
  before any later process that took the session's or group's id).
- A rule's helper is an orphan when its declared spawner is gone (absent, or
  its pid holds a process started after the helper).
- Evidence never lends privilege: a candidate is taken only if the process
  that carried the evidence could have signalled it itself (the kernel's
  rule: root, or the sender's real or effective uid is the target's real or
  saved uid). A marker's carrier is the topmost process of the unbroken line
  of ancestors carrying the same owner; a marker that names its owner's uid
  bounds it too; a leftover cgroup's carrier is the uid that made it, a
  receipt's the uid that wrote it (and its session and group members must
  run as that uid). A process whose live parent (not init) could not have
  signalled it is never taken on its own evidence, whatever it carries (a
  user can give a setuid-root program a marker of its own); an orphan's
  descent stops at a change of credentials.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .._containment.evidence import marker as _marker
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


def select(
    facts: Facts,
    *,
    tag: str | None = None,
    within: Collection[int] | None = None,
) -> Selection:
    """Decide, on facts alone, which processes are orphans (see the module docstring)."""
    procs = facts.procs
    kids = _children(procs)
    skipped: list[Skipped] = []
    warnings: list[str] = []
    guard = {0, 1, facts.me, *facts.ancestors}

    # 1. Everything a live owner holds, with its subtree.
    live_roots: set[int] = set()
    for pid, m in facts.markers.items():
        if isinstance(m, Marker) and owner_state(facts, m.pid, m.start_time) == ALIVE:
            live_roots.update((pid, m.pid))
    for cg in facts.cgroups:
        if owner_state(facts, *cg.owner) == ALIVE:
            live_roots.add(cg.owner[0])
            live_roots.update(cg.pids)
    for r in facts.receipts:
        if owner_state(facts, *r.owner) == ALIVE or owner_state(facts, *r.keeper) == ALIVE:
            live_roots.update((r.owner[0], r.keeper[0]))
            live_roots.update(
                p.pid for p in procs.values() if (p.sid == r.sid or p.pgid == r.pgid) and p.start_time >= r.keeper[1]
            )
    # The reaper's own subtree is its caller's business (its Popen children, their jobs).
    live_roots.add(facts.me)
    protected = set(subtree(kids, (p for p in live_roots if p in procs)))
    protected |= guard

    # 2. Seeds: processes with their own evidence that the owner is gone.
    seeds: dict[int, Orphan] = {}
    unknown: set[int] = set()
    refused: set[int] = set()  # evidence pointed at them, credentials said no: never reached by descent either
    skipped.extend(facts.skipped)

    def allowed(pid: int, authority: Creds | None, who: str) -> bool:
        """May evidence carried with authority reach pid? If not, pid is skipped with the reason."""
        if authority is None:
            return True  # synthetic facts that record no carrier
        target = facts.creds_of(pid)
        if target is None:
            skipped.append(Skipped(pid, f"its credentials cannot be read ({who}): never a candidate"))
        elif not can_signal(authority, target):
            skipped.append(
                Skipped(
                    pid,
                    f"runs as uid {target[0]}/{target[1]}/{target[2]} (real/effective/saved), which {who} "
                    f"(uid {authority[0]}/{authority[1]}/{authority[2]}) could not signal",
                )
            )
        else:
            return True
        refused.add(pid)
        unknown.add(pid)
        return False

    def seed(
        p: Proc,
        reason: str,
        owner: tuple[int, int | None],
        via: str,
        evidence: str,
        authority: Creds | None = None,
        who: str = "",
    ) -> None:
        if p.pid in protected or p.pid in seeds or p.pid in refused:
            return
        why = gained(p.pid)
        if why is not None:
            skipped.append(Skipped(p.pid, why))
            refused.add(p.pid)
            unknown.add(p.pid)
            return
        if allowed(p.pid, authority, who):
            seeds[p.pid] = Orphan(p, reason, owner, via, evidence)

    def descend(roots: list[Orphan]) -> None:
        """An orphan's descendants come with it, unless protected, with unknown evidence of their own,
        or running with other credentials than their parent (a setuid program, sudo, a dropped privilege)."""
        seen: set[int] = set()  # across roots: a root inside another's subtree was walked with it (linear, not n^2)
        for s in roots:
            stack = [(s.proc.pid, c) for c in kids.get(s.proc.pid, ())]
            while stack:
                parent, pid = stack.pop()
                if pid in seen or pid in protected or pid in unknown:
                    continue
                seen.add(pid)
                if pid not in seeds:
                    above, own = facts.creds_of(parent), facts.creds_of(pid)
                    if above is None or own is None or above != own:
                        unknown.add(pid)
                        skipped.append(
                            Skipped(pid, f"below orphan {s.proc.pid}, but runs with other (or unreadable) credentials")
                        )
                        continue
                    seeds[pid] = Orphan(
                        procs[pid],
                        s.reason,
                        s.owner,
                        f"ancestor {s.proc.pid}",
                        f"descends from {s.proc.pid}: {s.evidence}",
                    )
                stack.extend((pid, c) for c in kids.get(pid, ()))

    tops: dict[int, int] = {}

    def carrier(pid: int, m: Marker) -> int:
        """The topmost process of the unbroken line of ancestors of pid that carry m's owner (memoized: a deep
        line costs its length once, not once per member)."""
        line = [pid]
        top = pid
        while top not in tops:
            parent = procs[top].ppid
            pm = facts.markers.get(parent)
            if parent in line or parent not in procs or not isinstance(pm, Marker):
                break
            if (pm.pid, pm.start_time) != (m.pid, m.start_time):
                break
            top = parent
            line.append(top)
        top = tops.get(top, top)
        for p in line:
            tops[p] = top
        return top

    def gained(pid: int) -> str | None:
        """Why pid's own parent link forbids taking it (the parent runs with credentials that could not signal
        it: a setuid-root program or a sudo job below a user's process), or None. Init and the reaper's
        guard are no such parent: an orphan's parent is init."""
        parent = procs[pid].ppid
        if parent <= 1 or parent not in procs or parent in guard:
            return None
        above, own = facts.creds_of(parent), facts.creds_of(pid)
        if above is None or own is None:
            return f"its parent {parent}'s credentials, or its own, cannot be read"
        if not can_signal(above, own):
            return (
                f"runs as uid {own[0]}/{own[1]}/{own[2]} (real/effective/saved), which its parent {parent} "
                f"(uid {above[0]}/{above[1]}/{above[2]}) could not signal: evidence never crosses that link"
            )
        return None

    dead_cgroups: list[LeftoverCgroup] = []
    for cg in facts.cgroups:
        in_dead_ns = cg.ns is not None and cg.ns[0] in facts.dead_namespaces and not cg.pids and not cg.hidden
        state = GONE if in_dead_ns else owner_state(facts, *cg.owner)
        if state not in _GONE_REASON:
            if state != ALIVE:
                skipped.append(Skipped(None, f"cgroup {cg.path}: owner {cg.owner[0]} {state}"))
            continue
        if tag is not None and cg.tag != tag:
            continue
        if cg.hidden:
            skipped.append(
                Skipped(None, f"cgroup {cg.path}: {cg.hidden} member(s) in a pid namespace not visible here")
            )
            continue
        dead_cgroups.append(cg)
        made_by = None if cg.uid is None else (cg.uid, cg.uid, cg.uid)
        for pid in cg.pids:
            p = procs.get(pid)
            if p is not None:
                seed(
                    p,
                    "cgroup-owner-gone",
                    cg.owner,
                    f"cgroup {cg.path}",
                    f"in {cg.path}; owner {cg.owner[0]} gone",
                    made_by,
                    "the cgroup's maker",
                )

    for pid, m in facts.markers.items():
        p = procs.get(pid)
        if p is None or pid in protected:
            continue
        if not isinstance(m, Marker):
            unknown.add(pid)  # unreadable: never proof, and it stops an orphan's descent below
            if m == "malformed":
                skipped.append(Skipped(pid, "malformed marker: never proof"))
            continue
        if tag is not None and m.tag != tag:
            unknown.add(pid)  # another tag's tree: not ours to judge in this sweep
            continue
        state = owner_state(facts, m.pid, m.start_time)
        if state in _GONE_REASON and m.start_time <= p.start_time:
            how = {EXITED: "is a zombie", REUSED: "now holds a later process", GONE: "does not exist"}[state]
            if m.uid is not None and not allowed(pid, (m.uid, m.uid, m.uid), "the marker's owner"):
                continue
            top = carrier(pid, m)
            carried = facts.creds_of(top)
            if carried is None:
                unknown.add(pid)
                skipped.append(Skipped(pid, f"marker {m}: the credentials of its carrier {top} cannot be read"))
                continue
            seed(
                p,
                _GONE_REASON[state],
                (m.pid, m.start_time),
                "marker",
                f"PROCTREE_OWNER={m}: pid {m.pid} {how}",
                carried,
                "the marker's carrier" if top == pid else f"the marker's carrier {top}",
            )
        else:
            unknown.add(pid)
            why = "invalid owner" if state == INVALID or m.start_time > p.start_time else f"owner {state}"
            skipped.append(Skipped(pid, f"marker {m}: {why}"))

    # Parent links are stronger evidence than a shared session: the descendants
    # of the cgroup and marker seeds are attributed before receipts and rules look.
    descend(list(seeds.values()))
    first = set(seeds)

    stale: list[str] = []
    receipt_orphans: dict[str, set[int]] = {}
    by_sid: dict[int, list[Proc]] = {}
    by_pgid: dict[int, list[Proc]] = {}
    if facts.receipts:
        for p in procs.values():
            by_sid.setdefault(p.sid, []).append(p)
            by_pgid.setdefault(p.pgid, []).append(p)
    for r in facts.receipts:
        if tag is not None and r.tag != tag:
            continue
        o_state, k_state = owner_state(facts, *r.owner), owner_state(facts, *r.keeper)
        if o_state not in _GONE_REASON or k_state not in _GONE_REASON:
            if o_state != ALIVE and k_state != ALIVE:
                skipped.append(Skipped(None, f"receipt {r.path}: owner {o_state}, keeper {k_state}"))
            continue
        keeper_start = r.keeper[1]
        took = receipt_orphans.setdefault(r.path, set())
        undecided = False
        writer = None if r.uid is None else (r.uid, r.uid, r.uid)
        # The keeper leads the tree's session and the command leads its group: an id
        # that is not theirs (a setsid that failed) is somebody else's session or group.
        ids = [("session", r.sid)] if r.sid == r.keeper[0] else []
        if r.command is not None and r.pgid == r.command:
            ids.append(("group", r.pgid))
        for kind, ident in ids:
            holder = procs.get(ident)
            reused_by = holder if holder is not None and (holder.pid, holder.start_time) != r.keeper else None
            for p in (by_sid if kind == "session" else by_pgid).get(ident, ()):
                # A zombie (the killed keeper itself, not yet reaped) has ended already: nothing to end, and no
                # reason to keep the receipt once the rest is ended.
                if p.is_zombie or not _after(p, keeper_start, reused_by):
                    continue
                # A member runs as the receipt's writer: a process of another uid in a
                # session or group whose id was reused is not this tree's.
                own = facts.creds_of(p.pid)
                if r.uid is not None and (own is None or r.uid not in (own[0], own[1])):
                    continue
                # Where the environment can be read it must carry the tree's id: a session or
                # group id reused by a leader that has since exited is not this tree's. One we
                # may not read ("denied") belongs to someone else; one we could not read whole
                # proves nothing either way.
                tid = facts.trees.get(p.pid)
                if isinstance(tid, bytes):
                    if r.tree is not None and not _marker.carries_tree(tid, r.tree):
                        continue
                elif tid in ("absent", "gone", "denied"):
                    continue
                elif tid is not None:
                    undecided = True
                    unknown.add(p.pid)
                    skipped.append(Skipped(p.pid, f"in {kind} {ident} of receipt {r.path}, but its tree id is {tid}"))
                    continue
                took.add(p.pid)
                seed(
                    p,
                    "receipt-owner-gone",
                    r.owner,
                    f"{kind} {ident}",
                    f"{kind} {ident} of receipt {r.path}; owner {r.owner[0]} and keeper {r.keeper[0]} gone",
                    writer,
                    "the receipt's writer",
                )
        if not took and not undecided:
            stale.append(r.path)

    if tag is None:
        for pid, (rule, spawner) in facts.rule_hits.items():
            p = procs.get(pid)
            if p is None or pid in protected or pid in seeds:
                continue
            sp = procs.get(spawner)
            if sp is None and spawner in facts.gone:
                how = "does not exist"
            elif sp is not None and sp.start_time > p.start_time:
                how = "now holds a process started after the helper"
            elif sp is not None and sp.is_zombie:
                how = "is a zombie"
            else:
                continue
            seed(p, rule, (spawner, None), f"rule {rule}", f"{rule}: declared spawner pid {spawner} {how}")

    descend([o for pid, o in seeds.items() if pid not in first])
    orphans = seeds

    for s in seeds.values():
        for pid in kids.get(s.proc.pid, ()):
            if (
                pid in unknown
                and pid in facts.markers
                and pid not in orphans
                and not isinstance(facts.markers[pid], Marker)
            ):
                skipped.append(Skipped(pid, f"below orphan {s.proc.pid}, but its own marker is {facts.markers[pid]}"))
    result = [o for o in orphans.values() if not o.proc.is_zombie]
    if within is not None:
        result = [o for o in result if o.proc.pid in within]
        skipped = [k for k in skipped if k.pid in within]
    chosen = {o.proc.pid for o in result}

    def ends_whole(cg: LeftoverCgroup) -> bool:
        if cg.path == cg.parent or cg.hidden:
            return False
        if facts.reaper_uid is not None and cg.uid not in (0, facts.reaper_uid):
            return False
        if within is None:
            return all(pid in chosen or pid not in procs or procs[pid].is_zombie for pid in cg.pids)
        # Scoped: only a cgroup holding something chosen, and nothing unseen (a process
        # missing from the snapshot was not checked against within).
        return any(pid in chosen for pid in cg.pids) and all(
            pid in chosen or (pid in procs and procs[pid].is_zombie) for pid in cg.pids
        )

    whole = [cg for cg in dead_cgroups if ends_whole(cg)]
    whole_paths = {cg.path for cg in whole}
    for cg in dead_cgroups:
        if cg.path != cg.parent and cg.path not in whole_paths and any(pid in chosen for pid in cg.pids):
            warnings.append(f"cgroup {cg.path} holds processes that are not selected: its orphans end one by one")
    result.sort(key=lambda o: o.proc.pid)
    return Selection(result, skipped, warnings, protected, dead_cgroups, whole, stale, receipt_orphans)
