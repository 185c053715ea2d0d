"""The three containment modes behind one small interface: what a tree's members are, and how it is ended.

A Tree holds one of these (process-wrap's style: one object per mechanism),
typed as interfaces.Mode. Each is fed the facts it needs of its tree
(interfaces.ModeFacts: the keeper's pid and start time, the command's record,
the marker, the cgroup, what a forward already stopped), never the Tree, and
answers:

- ``members(facts)``: the live members beyond the keeper's descendants;
- ``teardown(facts, grace, stop, sig)``: end the tree while its keeper is ours;
- ``leftovers(facts, grace, sig)``: end what a killed keeper left, from outside;
- ``marked_outsiders(facts)`` and ``may_have_leftovers(facts)``: where members
  can be found that are neither in the keeper's line nor in a cgroup.

The keeper (our unreaped child) is never signalled here: every teardown spares
it, and the Tree reaps it.
"""

from __future__ import annotations

import os

from .. import _lazyimport
from .._errors import NoSuchProcess
from .._table import binding as _binding
from .._table.model import Proc
from . import cgroup as _cgroup
from .evidence import marker as _marker
from .sweep import _marked_roots, _merge_reports

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from .._teardown import engine as _teardown
    from .._teardown import many as _many
    from .._teardown import report as _report
    from .._teardown.report import TeardownReport
    from . import cgroupworld as _cgroupworld
    from .interfaces import Mode, ModeFacts
    from .stopflag import _Stop
else:  # ending a tree or a cgroup loads at its first use: a start never pays for it
    _cgroupworld = _lazyimport.LazyModule(".cgroupworld", __package__)
    _teardown = _lazyimport.LazyModule("proctree._teardown.engine", "")
    _many = _lazyimport.LazyModule("proctree._teardown.many", "")
    _report = _lazyimport.LazyModule("proctree._teardown.report", "")


def _stop_fd(stop: _Stop | None) -> int | None:
    return None if stop is None else stop.fd


def marked(facts: ModeFacts, keeper: int | None) -> list[Proc]:
    """The live processes carrying the tree's PROCTREE_TREE, as roots of their own trees.

    keeper: a live keeper whose members (its descendants and session) are left
    out, or None (it is gone: every marked process counts). Only processes
    that started after the keeper count (in the same clock tick: with a higher
    pid, as pids are handed out in order): an older one cannot be a member,
    whatever its environment says.
    """
    since = facts.keeper_start
    if since is None:
        since = facts.root.start_time if facts.root is not None else 0
    return _marked_roots(facts.tree_id, (since, facts.keeper_pid), keeper)


def _sweep_marked(facts: ModeFacts, grace: float, sig: int) -> TeardownReport:
    """End what carries the tree's marker, as trees of their own; once more at once for what forked meanwhile."""
    done = facts.stopped
    roots = marked(facts, None)
    first = _many.end_trees(roots, grace=grace, signal_group=False, signal=sig, already=done) if roots else []
    late = marked(facts, None)
    again = _many.end_trees(late, grace=0, signal_group=False, signal=sig, already=done) if late else []
    return _merge_reports(
        _report.TeardownReport(root=facts.root, mode=facts.mode), first, again, [p.pid for p in roots + late]
    )


class Subreaper:
    """The keeper is a child subreaper: every member stays in its line, however it forks."""

    name = "subreaper"

    def members(self, facts: ModeFacts) -> dict[int, Proc]:
        return {}

    def teardown(self, facts: ModeFacts, grace: float, stop: _Stop | None, sig: int) -> TeardownReport:
        """The teardown engine on what is below the keeper, driven in this thread (no thread or loop of its own:
        a fork storm that fills the pid space is when a teardown is needed); a stop skips the rest of the grace."""
        engine = _teardown.make_teardown(
            facts.keeper_pid, grace=grace, include_root=False, signal_group=False, signal=sig, already=facts.stopped
        )
        return _teardown.run_blocking(engine, _stop_fd(stop))

    def leftovers(self, facts: ModeFacts, grace: float, sig: int) -> TeardownReport:
        """The members were reparented (to init, or a subreaper above us): found by the tree's marker,
        as the reaper finds them. A member that scrubbed its environment is beyond reach."""
        return _sweep_marked(facts, grace, sig)

    def marked_outsiders(self, facts: ModeFacts) -> list[Proc]:
        return []

    def may_have_leftovers(self, facts: ModeFacts) -> bool:
        return False


class Session(Subreaper):
    """The keeper leads a session: members that double-fork out of its line are found by session id or marker."""

    name = "session"

    def members(self, facts: ModeFacts) -> dict[int, Proc]:
        """A double-forker that kept the session is found by sid, one that left it by the marker (with its line)."""
        out: dict[int, Proc] = {}
        if not facts.keeper_is_ours():
            return out
        snap = _binding.snapshot()
        for p in snap.values():
            if p.sid == facts.keeper_pid and p.pid != facts.keeper_pid:
                out.setdefault(p.pid, p)
        for root in self.marked_outsiders(facts):
            out.setdefault(root.pid, root)
            if root.pid in snap:
                for p in snap.descendants(root.pid):
                    out.setdefault(p.pid, p)
        return out

    def teardown(self, facts: ModeFacts, grace: float, stop: _Stop | None, sig: int) -> TeardownReport:
        """The engine below the keeper together with the daemons that carry the tree's marker, at once (one
        grace), then a last look for late daemons; all in this thread."""
        protect = {facts.keeper_pid}
        daemons = self.marked_outsiders(facts)
        main_engine = _teardown.make_teardown(
            facts.keeper_pid, grace=grace, include_root=False, signal_group=False, signal=sig, already=facts.stopped
        )
        engines = [
            main_engine,
            *_many.make_engines(daemons, grace, protect, False, 16384, sig, False, facts.stopped),
        ]
        results = _teardown.run_blocking_many(engines, _stop_fd(stop), capture=(NoSuchProcess, ValueError))
        main = results[0]
        if isinstance(main, Exception):
            raise main
        first = [_many.report_of(r, res) for r, res in zip(daemons, results[1:], strict=True)]
        # A daemon forked (and marked) while the teardown ran: once more, at once.
        late = self.marked_outsiders(facts)
        again = (
            _many.end_trees(late, grace=0, protect=protect, signal_group=False, signal=sig, already=facts.stopped)
            if late
            else []
        )
        return _merge_reports(main, first, again, [p.pid for p in daemons + late])

    def marked_outsiders(self, facts: ModeFacts) -> list[Proc]:
        """Processes carrying the tree's PROCTREE_TREE that are not (yet) the keeper's members, as roots of
        their own trees (one whose ancestor is marked too is left to that ancestor's teardown)."""
        if facts.keeper_start is None or not facts.keeper_is_ours():
            return []
        return marked(facts, facts.keeper_pid)

    def may_have_leftovers(self, facts: ModeFacts) -> bool:
        """With keep_orphans: something of the tree may still run after the keeper ended."""
        if not facts.keep_orphans or facts.keeper_start is None:
            return False
        since = facts.keeper_start
        snap = _binding.snapshot()
        if any(p.sid == facts.keeper_pid and p.start_time >= since and not p.is_zombie for p in snap.values()):
            return True
        recent = [p.pid for p in snap.values() if p.start_time >= since and p.pid != os.getpid()]
        return any(_marker.carries_tree(v, facts.tree_id) for v in _binding.env_scan(_marker.TREE_ENV, recent).values())


class Cgroup(Subreaper):
    """The tree has a cgroup of its own, which nothing leaves without privilege; it ends with cgroup.kill."""

    name = "cgroup"

    def members(self, facts: ModeFacts) -> dict[int, Proc]:
        out: dict[int, Proc] = {}
        assert facts.cgroup is not None
        for pid in _cgroup.pids(facts.cgroup):
            try:
                out[pid] = _binding.proc(pid)
            except (NoSuchProcess, OSError):
                continue
        return out

    def teardown(self, facts: ModeFacts, grace: float, stop: _Stop | None, sig: int) -> TeardownReport:
        """The cgroup's members ended by cgroupworld.terminate (the keeper, outside it, spared); a stop skips the
        rest of the grace. Also when the keeper is no longer ours: the cgroup is."""
        assert facts.cgroup is not None
        return _cgroupworld.terminate(
            facts.cgroup,
            grace,
            spare={facts.keeper_pid},
            stop_fd=_stop_fd(stop),
            stop_signal=sig,
            already=facts.stopped,
        )

    def leftovers(self, facts: ModeFacts, grace: float, sig: int) -> TeardownReport:
        assert facts.cgroup is not None
        return _cgroupworld.terminate(facts.cgroup, grace, stop_signal=sig, already=facts.stopped)


MODES: dict[str, Mode] = {"cgroup": Cgroup(), "subreaper": Subreaper(), "session": Session()}
