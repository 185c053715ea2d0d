"""The run's containment and the checks around each test, fixture and the session (see docs/pytest.md).

Who a leaked process belongs to, in this order: a helper (helpers.py) or an xdist worker belongs to nobody
and is never counted; a process a live object still holds (held.py) is checked again once nothing holds it;
a process born of a fixture's process (by the parent links while they last, by the fixture's tag in its
environment after any double fork: lineage.py) is the fixture's, checked at the fixture's teardown; the
rest is the test's, checked at its teardown. What a live object still holds at the session's end is
checked after pytest has exited, by the run's subreaper (late.py).

Must never: signal a process this run did not start (the members are the run's own descendants or carriers
of its tree id, each ended by identity), nor a helper, a held process or an xdist worker.
"""

from __future__ import annotations

import os
import signal
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import proctree
from proctree.pytest_plugin import ProcessLeakWarning

from . import handoff as _handoff
from . import held as _held
from . import helpers as _helpers
from . import late as _late
from . import lineage as _lineage
from .adoption import Adoption
from .describe import Identity, describe, identity, settled
from .settings import Settings, mode_for
from .watchdog import Watchdog


class Owner:
    """A fixture's processes: its description, and the identities it started (by setup, parent or tag)."""

    def __init__(self, desc: str) -> None:
        self.desc = desc
        self.ids: set[Identity] = set()
        self.finalized = False


class Guard:
    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config, self.settings, self.mode = config, settings, settings.mode
        self.box: Any = None
        self.owns_box = False
        self.worker = hasattr(config, "workerinput")
        self.item = ""  # the test being run (fixtures are set up for it)
        self.marks: dict[str, Any] = {}
        self.last_mark: Any = None  # the members after the last fixture setup of the test being set up
        self.fixtures: dict[tuple[str, str, int], Owner] = {}  # live fixtures that started something
        self.tags: dict[str, Owner] = {}  # a fixture's tag in the environment -> its owner (kept after its end)
        self.finalized: list[Owner] = []  # fixtures finalized in this teardown phase
        self.held: dict[Identity, tuple[str, Any]] = {}  # held by a live object: (who started it, still-held check)
        self.exempt: set[Identity] = set()  # started by tests whose check is off
        self.gateways: set[Identity] = set()  # xdist's workers, started by this controller
        self.leakers: list[tuple[str, list[str]]] = []
        self.earlier: list[str] = []
        self.failed_at_end = False
        self.watchdog: Watchdog | None = None
        self.adoption: Adoption | None = None  # pytest runs below the run's subreaper (handoff.py)
        self.late: list[_late.Entry] = []  # held at the session's end: checked after pytest exits (late.py)

    # -- the containment ------------------------------------------------------------------

    def ensure(self) -> Any:
        if self.box is None:
            # An in-process inner run (pytester) shares the outer run's containment, and leaves it open.
            self.box = proctree.Containment.current()
            if self.box is None:
                s = self.settings
                # The watchdog is the plugin's own (watchdog.py): losing it must end nothing. Below the run's
                # subreaper (handoff.py) pytest is none itself: the members are read through the Adoption.
                helper = _handoff.helper_pid(self.worker) if s.subreaper else None
                self.box = proctree.contain_self(
                    subreaper=s.subreaper and helper is None, watchdog=False, tag="pytest", grace=s.grace
                )
                if helper is not None:
                    self.adoption = Adoption(helper, self.box.tree_id, self.worker)
                self.owns_box = True
                if s.watchdog:
                    # Below the subreaper, the controller's watchdog waits for it: it checks what was held at
                    # the session's end after pytest exits (late.py). A worker's watches the worker.
                    watched = helper if helper is not None and not self.worker else None
                    self.watchdog = Watchdog(
                        self.box.tree_id, s.grace, detached=self.adoption is not None, watched=watched
                    )
        return self.box

    def _members(self) -> list[proctree.Proc]:
        return self.adoption.members() if self.adoption is not None else self.box.members()

    def _mark(self) -> Any:
        return self.adoption.mark() if self.adoption is not None else self.box.mark()

    def _close(self, spare: set[Identity] | None = None) -> None:
        """End every member but spare (held at the session's end: late.py) and what they started, and the
        watchdog (it carries the run's tree id: the box would find it among the carriers), stopped on its own."""
        spare = (spare or set()) | (self.watchdog.idents if self.watchdog is not None else set())
        if self.adoption is not None:  # what scrubbed its markers: the box finds members by them alone here
            members = self._members()
            kept = _helpers.with_descendants(spare, members)
            self.box.end([p for p in members if identity(p) not in kept])
        self.box.close(spare=spare)

    def _late_path(self) -> str | None:
        """The file the run's subreaper reads after pytest exits (late.py), when this pytest runs below it; a
        pytest a test starts inherits the variable, not the subreaper."""
        return _late.path() if self.adoption is not None and not self.worker else None

    def _defers(self) -> bool:
        """True when what is held at the session's end is checked after pytest exits (late.py): below the
        run's subreaper, which a worker's controller hands its list to."""
        return self.adoption is not None and (self.worker or self._late_path() is not None)

    def _skipped(self, members: list[proctree.Proc]) -> set[Identity]:
        own = self.gateways | (self.watchdog.idents if self.watchdog is not None else set())
        return _helpers.not_counted(members, own)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.mode == "off":
            return
        if not self.worker:
            self._end_earlier_runs()
        self.ensure()
        self._on_termination()

    def _on_termination(self) -> None:
        """A SIGTERM or SIGHUP (a CI job cancelled, a terminal closed) that would end pytest at once ends what
        the run started first, those that scrubbed every marker included (the watchdog finds them only by it)."""
        if not self.owns_box:
            return

        def stop(signum: int, frame: Any) -> None:
            try:
                self._close()
            finally:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                if signal.getsignal(sig) == signal.SIG_DFL:
                    signal.signal(sig, stop)
            except (ValueError, OSError):  # not the main thread, or no such signal here
                pass

    def _end_earlier_runs(self) -> None:
        """End what earlier runs that were killed left: their marker names a pytest that is gone."""
        try:
            found = proctree.find_orphans(tag="pytest")
            if not found:
                return
            said = {o.proc.pid: describe(o.proc, f"an earlier run (pytest pid {o.owner[0]}, gone)") for o in found}
            report = proctree.reap_orphans(tag="pytest", grace=self.settings.grace, within=set(said))
        except (proctree.Error, OSError) as exc:
            self.earlier.append(f"could not look for processes left by earlier runs: {exc}")
            return
        self.earlier.extend(said[o.proc.pid] for o in report.candidates if o.proc.pid in said)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Iterator[None]:
        if self.failed_at_end and session.exitstatus == pytest.ExitCode.OK:  # a worker's end (xdist)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.box is not None and self.owns_box:
            members = self._members()
            skip = self._skipped(members) | self.exempt
            left = [p for p in members if identity(p) not in skip]
            left = settled(left, self.settings.settle) if left else []  # one exiting as the run ends is no leak
            if left:
                left = self._defer_held(left, members)
            if left:
                lines = [describe(p, self.held.get(identity(p), (_AT_END, None))[0]) for p in left]
                self.box.end(left, grace=self.settings.grace)
                self._at_end(session, lines)
            if self.worker and self.late:  # the controller lists them for the late check
                self.config.workeroutput["proctree_late"] = [list(e) for e in self.late]  # type: ignore[attr-defined]
        yield
        if self.box is not None and self.owns_box:
            # After every other plugin's end (xdist has stopped its workers by now): the helpers and the rest.
            where = self._late_path()
            late = self.late if where is not None else []
            spared = self.late if self.worker or where is not None else []
            if late and where is not None and not _late.write(where, late, self.settings):
                late = spared = []  # not written: nothing would check them, so they end with the rest, unlisted
            try:
                self._close(spare={(pid, start) for pid, start, _ in spared})
            finally:
                # A worker's held processes carry the controller's tree id too: its watchdog covers them. The
                # controller's, with a late check to come, stays: it ends everything once the subreaper exits.
                if self.watchdog is not None and not late:
                    self.watchdog.stop()

    def _defer_held(self, left: list[proctree.Proc], members: list[proctree.Proc]) -> list[proctree.Proc]:
        """left less what a live object still holds, when that is checked after pytest exits (late.py): those
        are remembered in self.late, with the test or fixture that left them, and spared."""
        if not self._defers():
            return left
        earlier = {i: who for i, (who, _) in self.held.items()}
        unheld = self._not_held(left, members, _AT_END)
        loose = {identity(p) for p in unheld}
        # The report comes after pytest's summary, without its headings: an xdist worker says which it was.
        worker = getattr(self.config, "workerinput", {}).get("workerid") if self.worker else None
        for p in left:
            if identity(p) not in loose:
                who = earlier.get(identity(p), f"{_AT_END}{f' on {worker}' if worker else ''} (kept by a live object)")
                self.late.append(_late.entry(p, describe(p, who)))
        return unheld

    def _at_end(self, session: pytest.Session, lines: list[str]) -> None:
        self.leakers.append(("the session's end", lines))
        if self.worker:  # the controller lists them (pytest_testnodedown)
            self.config.workeroutput["proctree_leaks"] = lines  # type: ignore[attr-defined]
        if self.mode == "fail" and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            self.failed_at_end = True

    # -- pytest-xdist's controller ----------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_newgateway(self, gateway: Any) -> None:
        ident = _helpers.gateway_identity(gateway)
        if ident is not None:
            self.gateways.add(ident)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        output = getattr(node, "workeroutput", None) or {}
        self.late.extend(_late.from_worker(output.get("proctree_late")))
        lines = output.get("proctree_leaks")
        if lines:
            who = getattr(getattr(node, "gateway", None), "id", "a worker")
            self.leakers.append((f"the session's end on {who}", [str(x) for x in lines]))
            if self.mode == "fail":
                self.failed_at_end = True

    # -- fixtures: what their setup starts is theirs --------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
        box = self.box
        if box is None or _builtin_fixture(fixturedef):
            yield
            return
        key = (fixturedef.argname, fixturedef.scope, id(fixturedef))
        where = f", set up for {self.item}" if self.item else ""
        owner = Owner(f"fixture {fixturedef.argname!r} (scope {fixturedef.scope}{where})")
        tag = f"{os.getpid()}.{len(self.tags) + 1}"
        # The members after the previous setup (or the test's mark) are the members before this one:
        # nothing else runs in between, so one reading per fixture, not two.
        before = self.last_mark if self.last_mark is not None else self._mark()
        with _lineage.tagged(tag):
            outcome: Any = yield
        after = self._mark()
        self.last_mark = after
        members = list(after.procs)
        skip = self._skipped(members)
        new = [p for p in members if identity(p) not in before.identities and identity(p) not in skip]
        owner.ids.update(identity(p) for p in new)
        self.tags[tag] = owner
        self.fixtures[key] = owner
        if outcome.excinfo is not None:  # its setup failed: no finalizer will run, judge it with this test
            self._finalize(key)

    def pytest_fixture_post_finalizer(self, fixturedef: Any, request: pytest.FixtureRequest) -> None:
        # Checked once the whole teardown phase is over: another fixture finalized in the same
        # phase (one this fixture used to start them) may be the one that ends them.
        self._finalize((fixturedef.argname, fixturedef.scope, id(fixturedef)))

    def _finalize(self, key: tuple[str, str, int]) -> None:
        owner = self.fixtures.pop(key, None)
        if owner is not None:
            owner.finalized = True
            self.finalized.append(owner)

    def _fixture_leaks(self, members: list[proctree.Proc], item: pytest.Item) -> list[tuple[str, list[str]]]:
        """The processes of fixtures finalized in this teardown that still run, ended: (fixture, lines) each."""
        finalized, self.finalized = self.finalized, []
        out: list[tuple[str, list[str]]] = []
        for owner in finalized:
            mine = [p for p in members if identity(p) in owner.ids and identity(p) not in self.held]
            alive = settled(mine, self.settings.settle) if mine else []
            # A live object may still hold what the fixture made (a session fixture's group keeps the gateways
            # a function fixture handed out): checked again once released, as a test's are.
            # pytest's own references to the fixture's value (the item's funcargs, until its protocol ends) hold
            # nothing.
            alive = self._not_held(alive, members, owner.desc, ignore=[getattr(item, "funcargs", None)])
            if alive:
                out.append((owner.desc, [describe(p, owner.desc) for p in alive]))
                self.box.end(alive, grace=self.settings.grace)
        return out

    def _claim_for_fixtures(self, members: list[proctree.Proc]) -> set[Identity]:
        """Identities of fixtures' processes, and of everything they started: by the members' parent links."""
        owners = [*self.fixtures.values(), *self.finalized]
        for owner in owners:
            owner.ids = _helpers.with_descendants(owner.ids, members)
        owned: set[Identity] = set()
        for owner in owners:
            owned |= owner.ids
        return owned

    def _claim_by_tag(self, procs: list[proctree.Proc]) -> tuple[list[proctree.Proc], list[tuple[str, str]]]:
        """procs less those a fixture's process started (its tag in their environment): those join the
        fixture, checked at its teardown; those of a fixture already gone are its leaks now ((who, line))."""
        if not self.tags:
            return procs, []
        rest, late = [], []
        for p in procs:
            owner = self.tags.get(_lineage.tag_of(p.pid) or "")
            if owner is None:
                rest.append(p)
            elif owner.finalized and owner not in self.finalized:
                late.append((owner.desc, describe(p, f"{owner.desc}, after its teardown")))
            else:
                owner.ids.add(identity(p))
        return rest, late

    # -- tests ------------------------------------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        self.item = item.nodeid
        _lineage.clear_stale()
        if mode_for(item, self.mode) != "off" or self.box is not None:
            self.ensure()
            self.marks[item.nodeid] = self.last_mark = self._mark()
            if self.watchdog is not None:
                self.watchdog.check(f"the setup of {item.nodeid}")
        yield
        self.last_mark = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
        outcome: Any = yield
        if call.when != "teardown":
            return
        mark = self.marks.pop(item.nodeid, None)
        mode = mode_for(item, self.mode)
        found: list[tuple[str, list[str]]] = []
        if mark is not None and self.box is not None:
            found = self._check(item, mark, mode)
        if not found or mode == "off":
            return
        lines = [line for _, group in found for line in group]
        report = outcome.get_result()
        text = "proctree: processes left running, now ended:\n" + "\n".join(f"  {line}" for line in lines)
        report.user_properties.append(("proctree_leaks", [(who, group) for who, group in found]))
        if mode == "warn":
            try:
                warnings.warn(ProcessLeakWarning(text), stacklevel=1)
                return
            except ProcessLeakWarning:
                pass  # warnings are errors here (-W error, filterwarnings): then the leak fails the test
        if mode in ("fail", "warn"):
            report.outcome = "failed"
            report.longrepr = text

    def _check(self, item: pytest.Item, mark: Any, mode: str) -> list[tuple[str, list[str]]]:
        """What the test (and the fixtures finalized at its teardown) left running, ended: (owner, lines) each."""
        box = self.box
        if self.watchdog is not None:
            self.watchdog.check(f"the end of {item.nodeid}")
        members = self._members()
        skip = self._skipped(members)
        owned = self._claim_for_fixtures(members)
        new = sorted((p for p in members if identity(p) not in mark.identities | owned | skip), key=lambda p: p.pid)
        found: list[tuple[str, list[str]]] = []
        if mode == "off":
            self.exempt.update(identity(p) for p in new)
        elif new:
            new, late = self._claim_by_tag(new)
            for who, line in late:
                found.append((who, [line]))
            leaks = self._not_held(settled(new, self.settings.settle), members, f"test {item.nodeid}")
            if leaks:
                leaks = self._with_late_children(leaks, mark, owned | skip)
                found.append((item.nodeid, [describe(p, f"test {item.nodeid}") for p in leaks]))
                box.end(leaks, grace=self.settings.grace)
        found.extend(self._released())
        found.extend(self._fixture_leaks(members, item))
        if not found:
            box.reap_adopted()
        return found

    def _with_late_children(self, leaks: list[proctree.Proc], mark: Any, skip: set[Identity]) -> list[proctree.Proc]:
        """leaks and what they started meanwhile (a shell's command forked during the settle), read afresh: every
        mode lists the same processes, whatever was born between the two reads."""
        members = self._members()
        ids = _helpers.with_descendants({identity(p) for p in leaks}, members)
        late = [
            p
            for p in members
            if identity(p) in ids
            and identity(p) not in mark.identities
            and identity(p) not in skip
            and identity(p) not in self.held
        ]
        known = {identity(p) for p in leaks}
        return leaks + [p for p in late if identity(p) not in known]

    def _not_held(
        self, leaks: list[proctree.Proc], members: list[proctree.Proc], who: str, ignore: list[Any] | None = None
    ) -> list[proctree.Proc]:
        """leaks less those a live object still holds (and what they started): remembered, checked later.
        ignore: containers whose references hold nothing (pytest's own, for a fixture's value)."""
        if not leaks:
            return leaks
        holders = _held.holders([c for c in ignore or () if c is not None])
        if not holders:
            return leaks
        roots = {identity(p) for p in members if p.pid in holders}
        held = _helpers.with_descendants(roots, members)
        by_root = {identity(p): holders[p.pid] for p in members if p.pid in holders}
        for p in leaks:
            if identity(p) in held:
                check = by_root.get(identity(p)) or _any_of(list(by_root.values()))
                self.held[identity(p)] = (f"{who} (kept by a live object after it)", check)
        return [p for p in leaks if identity(p) not in held]

    def _released(self) -> list[tuple[str, list[str]]]:
        """Processes held by a live object when their test ended, that nothing holds any more and still run."""
        if not self.held:
            return []
        members = {identity(p): p for p in self._members()}
        for ident in [i for i in self.held if i not in members]:
            del self.held[ident]  # gone on its own
        loose = [members[i] for i, (_, still) in self.held.items() if not still()]
        loose = settled(loose, self.settings.settle) if loose else []
        if not loose:
            return []
        out = [(self.held[identity(p)][0], [describe(p, self.held.pop(identity(p))[0])]) for p in loose]
        self.box.end(loose, grace=self.settings.grace)
        return out

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == "proctree_leaks":
                found: Any = value  # [(who, lines)]: a test's node id, or the fixture or holder blamed
                self.leakers.extend((str(who), [str(x) for x in lines]) for who, lines in found)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        lost = self.watchdog.lost if self.watchdog is not None else []
        if lost:
            terminalreporter.write_line(
                f"proctree: the watchdog was killed (found gone at {lost[0]}"
                f"{f' and {len(lost) - 1} more time(s)' if len(lost) > 1 else ''}); nothing was ended for it, "
                "and a new one was started each time",
                yellow=True,
            )
        if self.worker or not (self.leakers or self.earlier):
            return
        tr = terminalreporter
        tr.write_sep("=", "proctree: leaked processes")
        for line in self.earlier:
            tr.write_line(f"ended, {line}")
        for who, lines in self.leakers:
            tr.write_line(f"{who}: {len(lines)} process(es)")
            for line in lines:
                tr.write_line(f"    {line.strip()}")
        if self.failed_at_end:
            tr.write_line("the run failed: processes were still running at its end (--proctree-leaks=fail)")


_AT_END = "the run (still running at its end)"


def _any_of(checks: list[Any]) -> Any:
    """A descendant of several held processes is held while any of them is."""

    def still() -> bool:
        return any(c() for c in checks)

    return still


def _builtin_fixture(fixturedef: Any) -> bool:
    """pytest's own fixtures (tmp_path, monkeypatch, capsys, request, ...): they start no process."""
    module = getattr(getattr(fixturedef, "func", None), "__module__", "") or ""
    return module.startswith("_pytest.")
