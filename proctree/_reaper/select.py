"""Which processes are orphans: a pure decision over one Facts model (selectfacts.py), in named steps.

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

from collections.abc import Collection

from .._containment.evidence import marker as _marker
from .._containment.evidence.leftovers import LeftoverCgroup
from .._containment.evidence.marker import Marker
from .._table.model import Proc
from .model import Orphan, Skipped
from .selectfacts import (  # noqa: F401 (the facts' names, importable from here as before)
    _GONE_REASON,
    ALIVE,
    EXITED,
    GONE,
    INVALID,
    REUSED,
    UNKNOWN,
    Creds,
    Facts,
    ReceiptFact,
    Selection,
    _after,
    _children,
    can_signal,
    owner_state,
    subtree,
)


def select(
    facts: Facts,
    *,
    tag: str | None = None,
    within: Collection[int] | None = None,
) -> Selection:
    """Decide, on facts alone, which processes are orphans (see the module docstring)."""
    s = _Selector(facts, tag)
    s.protect_what_live_owners_hold()
    s.seed_from_cgroups()
    s.seed_from_markers()
    # Parent links are stronger evidence than a shared session: the descendants
    # of the cgroup and marker seeds are attributed before receipts and rules look.
    s.descend(list(s.seeds.values()))
    first = set(s.seeds)
    s.seed_from_receipts()
    if tag is None:
        s.seed_from_rules()
    s.descend([o for pid, o in s.seeds.items() if pid not in first])
    s.note_unusable_markers_below_orphans()
    return s.selection(within)


class _Selector:
    """One selection's state; each method is one step of select() (see the module docstring for the rules)."""

    def __init__(self, facts: Facts, tag: str | None) -> None:
        self.facts, self.tag = facts, tag
        self.procs = facts.procs
        self.kids = _children(self.procs)
        self.skipped: list[Skipped] = list(facts.skipped)
        self.warnings: list[str] = []
        self.guard = {0, 1, facts.me, *facts.ancestors}
        self.protected: set[int] = set()
        self.seeds: dict[int, Orphan] = {}
        self.unknown: set[int] = set()
        self.refused: set[int] = set()  # evidence pointed at them, credentials said no: never reached by descent either
        self.tops: dict[int, int] = {}  # carrier() memo: pid -> the top of its line of same-owner marker carriers
        self.dead_cgroups: list[LeftoverCgroup] = []
        self.stale: list[str] = []
        self.receipt_orphans: dict[str, set[int]] = {}

    def protect_what_live_owners_hold(self) -> None:
        """Step 1: everything a live owner holds, with its subtree, and the reaper's guard: never candidates."""
        facts, procs = self.facts, self.procs
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
                    p.pid
                    for p in procs.values()
                    if (p.sid == r.sid or p.pgid == r.pgid) and p.start_time >= r.keeper[1]
                )
        # The reaper's own subtree is its caller's business (its Popen children, their jobs).
        live_roots.add(facts.me)
        self.protected = set(subtree(self.kids, (p for p in live_roots if p in procs))) | self.guard

    def allowed(self, pid: int, authority: Creds | None, who: str) -> bool:
        """May evidence carried with authority reach pid? If not, pid is skipped with the reason."""
        if authority is None:
            return True  # synthetic facts that record no carrier
        target = self.facts.creds_of(pid)
        if target is None:
            self.skipped.append(Skipped(pid, f"its credentials cannot be read ({who}): never a candidate"))
        elif not can_signal(authority, target):
            self.skipped.append(
                Skipped(
                    pid,
                    f"runs as uid {target[0]}/{target[1]}/{target[2]} (real/effective/saved), which {who} "
                    f"(uid {authority[0]}/{authority[1]}/{authority[2]}) could not signal",
                )
            )
        else:
            return True
        self.refused.add(pid)
        self.unknown.add(pid)
        return False

    def seed(
        self,
        p: Proc,
        reason: str,
        owner: tuple[int, int | None],
        via: str,
        evidence: str,
        authority: Creds | None = None,
        who: str = "",
    ) -> None:
        """Take p as an orphan on its own evidence, unless protected, refused, or its parent link forbids it."""
        if p.pid in self.protected or p.pid in self.seeds or p.pid in self.refused:
            return
        why = self.gained(p.pid)
        if why is not None:
            self.skipped.append(Skipped(p.pid, why))
            self.refused.add(p.pid)
            self.unknown.add(p.pid)
            return
        if self.allowed(p.pid, authority, who):
            self.seeds[p.pid] = Orphan(p, reason, owner, via, evidence)

    def descend(self, roots: list[Orphan]) -> None:
        """An orphan's descendants come with it, unless protected, with unknown evidence of their own,
        or running with other credentials than their parent (a setuid program, sudo, a dropped privilege)."""
        facts, kids, seeds = self.facts, self.kids, self.seeds
        seen: set[int] = set()  # across roots: a root inside another's subtree was walked with it (linear, not n^2)
        for s in roots:
            stack = [(s.proc.pid, c) for c in kids.get(s.proc.pid, ())]
            while stack:
                parent, pid = stack.pop()
                if pid in seen or pid in self.protected or pid in self.unknown:
                    continue
                seen.add(pid)
                if pid not in seeds:
                    above, own = facts.creds_of(parent), facts.creds_of(pid)
                    if above is None or own is None or above != own:
                        self.unknown.add(pid)
                        self.skipped.append(
                            Skipped(pid, f"below orphan {s.proc.pid}, but runs with other (or unreadable) credentials")
                        )
                        continue
                    seeds[pid] = Orphan(
                        self.procs[pid],
                        s.reason,
                        s.owner,
                        f"ancestor {s.proc.pid}",
                        f"descends from {s.proc.pid}: {s.evidence}",
                    )
                stack.extend((pid, c) for c in kids.get(pid, ()))

    def carrier(self, pid: int, m: Marker) -> int:
        """The topmost process of the unbroken line of ancestors of pid that carry m's owner (memoized: a deep
        line costs its length once, not once per member)."""
        procs, tops = self.procs, self.tops
        line = [pid]
        top = pid
        while top not in tops:
            parent = procs[top].ppid
            pm = self.facts.markers.get(parent)
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

    def gained(self, pid: int) -> str | None:
        """Why pid's own parent link forbids taking it (the parent runs with credentials that could not signal
        it: a setuid-root program or a sudo job below a user's process), or None. Init and the reaper's
        guard are no such parent: an orphan's parent is init."""
        parent = self.procs[pid].ppid
        if parent <= 1 or parent not in self.procs or parent in self.guard:
            return None
        above, own = self.facts.creds_of(parent), self.facts.creds_of(pid)
        if above is None or own is None:
            return f"its parent {parent}'s credentials, or its own, cannot be read"
        if not can_signal(above, own):
            return (
                f"runs as uid {own[0]}/{own[1]}/{own[2]} (real/effective/saved), which its parent {parent} "
                f"(uid {above[0]}/{above[1]}/{above[2]}) could not signal: evidence never crosses that link"
            )
        return None

    def seed_from_cgroups(self) -> None:
        """Step 2a: the members of tree cgroups whose owner is gone (each cgroup kept in dead_cgroups)."""
        facts, tag = self.facts, self.tag
        for cg in facts.cgroups:
            in_dead_ns = cg.ns is not None and cg.ns[0] in facts.dead_namespaces and not cg.pids and not cg.hidden
            state = GONE if in_dead_ns else owner_state(facts, *cg.owner)
            if state not in _GONE_REASON:
                if state != ALIVE:
                    self.skipped.append(Skipped(None, f"cgroup {cg.path}: owner {cg.owner[0]} {state}"))
                continue
            if tag is not None and cg.tag != tag:
                continue
            if cg.hidden:
                self.skipped.append(
                    Skipped(None, f"cgroup {cg.path}: {cg.hidden} member(s) in a pid namespace not visible here")
                )
                continue
            self.dead_cgroups.append(cg)
            made_by = None if cg.uid is None else (cg.uid, cg.uid, cg.uid)
            for pid in cg.pids:
                p = self.procs.get(pid)
                if p is not None:
                    self.seed(
                        p,
                        "cgroup-owner-gone",
                        cg.owner,
                        f"cgroup {cg.path}",
                        f"in {cg.path}; owner {cg.owner[0]} gone",
                        made_by,
                        "the cgroup's maker",
                    )

    def seed_from_markers(self) -> None:
        """Step 2b: processes whose PROCTREE_OWNER names an owner that is gone, within its carrier's authority."""
        facts, tag = self.facts, self.tag
        for pid, m in facts.markers.items():
            p = self.procs.get(pid)
            if p is None or pid in self.protected:
                continue
            if not isinstance(m, Marker):
                self.unknown.add(pid)  # unreadable: never proof, and it stops an orphan's descent below
                if m == "malformed":
                    self.skipped.append(Skipped(pid, "malformed marker: never proof"))
                continue
            if tag is not None and m.tag != tag:
                self.unknown.add(pid)  # another tag's tree: not ours to judge in this sweep
                continue
            state = owner_state(facts, m.pid, m.start_time)
            if state in _GONE_REASON and m.start_time <= p.start_time:
                how = {EXITED: "is a zombie", REUSED: "now holds a later process", GONE: "does not exist"}[state]
                if m.uid is not None and not self.allowed(pid, (m.uid, m.uid, m.uid), "the marker's owner"):
                    continue
                top = self.carrier(pid, m)
                carried = facts.creds_of(top)
                if carried is None:
                    self.unknown.add(pid)
                    self.skipped.append(
                        Skipped(pid, f"marker {m}: the credentials of its carrier {top} cannot be read")
                    )
                    continue
                self.seed(
                    p,
                    _GONE_REASON[state],
                    (m.pid, m.start_time),
                    "marker",
                    f"PROCTREE_OWNER={m}: pid {m.pid} {how}",
                    carried,
                    "the marker's carrier" if top == pid else f"the marker's carrier {top}",
                )
            else:
                self.unknown.add(pid)
                why = "invalid owner" if state == INVALID or m.start_time > p.start_time else f"owner {state}"
                self.skipped.append(Skipped(pid, f"marker {m}: {why}"))

    def seed_from_receipts(self) -> None:
        """Step 3: the session and group members of receipts whose owner and keeper are both gone."""
        facts = self.facts
        by_sid: dict[int, list[Proc]] = {}
        by_pgid: dict[int, list[Proc]] = {}
        if facts.receipts:
            for p in self.procs.values():
                by_sid.setdefault(p.sid, []).append(p)
                by_pgid.setdefault(p.pgid, []).append(p)
        for r in facts.receipts:
            if self.tag is not None and r.tag != self.tag:
                continue
            o_state, k_state = owner_state(facts, *r.owner), owner_state(facts, *r.keeper)
            if o_state not in _GONE_REASON or k_state not in _GONE_REASON:
                if o_state != ALIVE and k_state != ALIVE:
                    self.skipped.append(Skipped(None, f"receipt {r.path}: owner {o_state}, keeper {k_state}"))
                continue
            took = self.receipt_orphans.setdefault(r.path, set())
            undecided = False
            writer = None if r.uid is None else (r.uid, r.uid, r.uid)
            # The keeper leads the tree's session and the command leads its group: an id
            # that is not theirs (a setsid that failed) is somebody else's session or group.
            ids = [("session", r.sid)] if r.sid == r.keeper[0] else []
            if r.command is not None and r.pgid == r.command:
                ids.append(("group", r.pgid))
            for kind, ident in ids:
                for p in (by_sid if kind == "session" else by_pgid).get(ident, ()):
                    verdict = self._receipt_member(r, kind, ident, p)
                    if verdict == "undecided":
                        undecided = True
                    if verdict != "member":
                        continue
                    took.add(p.pid)
                    self.seed(
                        p,
                        "receipt-owner-gone",
                        r.owner,
                        f"{kind} {ident}",
                        f"{kind} {ident} of receipt {r.path}; owner {r.owner[0]} and keeper {r.keeper[0]} gone",
                        writer,
                        "the receipt's writer",
                    )
            if not took and not undecided:
                self.stale.append(r.path)

    def _receipt_member(self, r: ReceiptFact, kind: str, ident: int, p: Proc) -> str:
        """Whether p, in the receipt's session or group, is one of its tree's: "member", "not" or "undecided"."""
        holder = self.procs.get(ident)
        reused_by = holder if holder is not None and (holder.pid, holder.start_time) != r.keeper else None
        # A zombie (the killed keeper itself, not yet reaped) has ended already: nothing to end, and no
        # reason to keep the receipt once the rest is ended.
        if p.is_zombie or not _after(p, r.keeper[1], reused_by):
            return "not"
        # A member runs as the receipt's writer: a process of another uid in a
        # session or group whose id was reused is not this tree's.
        own = self.facts.creds_of(p.pid)
        if r.uid is not None and (own is None or r.uid not in (own[0], own[1])):
            return "not"
        # Where the environment can be read it must carry the tree's id: a session or
        # group id reused by a leader that has since exited is not this tree's. One we
        # may not read ("denied") belongs to someone else; one we could not read whole
        # proves nothing either way.
        tid = self.facts.trees.get(p.pid)
        if isinstance(tid, bytes):
            if r.tree is not None and not _marker.carries_tree(tid, r.tree):
                return "not"
        elif tid in ("absent", "gone", "denied"):
            return "not"
        elif tid is not None:
            self.unknown.add(p.pid)
            self.skipped.append(Skipped(p.pid, f"in {kind} {ident} of receipt {r.path}, but its tree id is {tid}"))
            return "undecided"
        return "member"

    def seed_from_rules(self) -> None:
        """Step 4 (untagged sweeps only): a rule's helper whose declared spawner is gone."""
        procs = self.procs
        for pid, (rule, spawner) in self.facts.rule_hits.items():
            p = procs.get(pid)
            if p is None or pid in self.protected or pid in self.seeds:
                continue
            sp = procs.get(spawner)
            if sp is None and spawner in self.facts.gone:
                how = "does not exist"
            elif sp is not None and sp.start_time > p.start_time:
                how = "now holds a process started after the helper"
            elif sp is not None and sp.is_zombie:
                how = "is a zombie"
            else:
                continue
            self.seed(p, rule, (spawner, None), f"rule {rule}", f"{rule}: declared spawner pid {spawner} {how}")

    def note_unusable_markers_below_orphans(self) -> None:
        """Say why a child of an orphan with an unusable marker of its own was not taken with it."""
        markers = self.facts.markers
        for s in self.seeds.values():
            for pid in self.kids.get(s.proc.pid, ()):
                if (
                    pid in self.unknown
                    and pid in markers
                    and pid not in self.seeds
                    and not isinstance(markers[pid], Marker)
                ):
                    self.skipped.append(
                        Skipped(pid, f"below orphan {s.proc.pid}, but its own marker is {markers[pid]}")
                    )

    def selection(self, within: Collection[int] | None) -> Selection:
        """The Selection: the live orphans (within, when given), and the dead cgroups that can be ended whole."""
        result = [o for o in self.seeds.values() if not o.proc.is_zombie]
        skipped = self.skipped
        if within is not None:
            result = [o for o in result if o.proc.pid in within]
            skipped = [k for k in skipped if k.pid in within]
        chosen = {o.proc.pid for o in result}
        whole = [cg for cg in self.dead_cgroups if self._ends_whole(cg, chosen, within)]
        whole_paths = {cg.path for cg in whole}
        for cg in self.dead_cgroups:
            if cg.path != cg.parent and cg.path not in whole_paths and any(pid in chosen for pid in cg.pids):
                self.warnings.append(
                    f"cgroup {cg.path} holds processes that are not selected: its orphans end one by one"
                )
        result.sort(key=lambda o: o.proc.pid)
        return Selection(
            result, skipped, self.warnings, self.protected, self.dead_cgroups, whole, self.stale, self.receipt_orphans
        )

    def _ends_whole(self, cg: LeftoverCgroup, chosen: set[int], within: Collection[int] | None) -> bool:
        procs = self.procs
        if cg.path == cg.parent or cg.hidden:
            return False
        if self.facts.reaper_uid is not None and cg.uid not in (0, self.facts.reaper_uid):
            return False
        if within is None:
            return all(pid in chosen or pid not in procs or procs[pid].is_zombie for pid in cg.pids)
        # Scoped: only a cgroup holding something chosen, and nothing unseen (a process
        # missing from the snapshot was not checked against within).
        return any(pid in chosen for pid in cg.pids) and all(
            pid in chosen or (pid in procs and procs[pid].is_zombie) for pid in cg.pids
        )
