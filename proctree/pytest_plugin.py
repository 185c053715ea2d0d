"""proctree's pytest plugin: every process a test leaks is named, blamed on its test or fixture, and ended.

Shipped in the wheel and registered through the ``pytest11`` entry point, it
does nothing until enabled: ``--proctree-leaks=fail|warn|kill`` (or the ini
option ``proctree_leaks``), or a ``@pytest.mark.proctree(leaks=...)`` on a
test. Enabled, the pytest process contains itself (proctree.contain_self):
every process started from then on carries the run's marker, orphans come
back to pytest (a child subreaper, Linux), and a native watchdog ends them all
if pytest dies (SIGKILL, a timeout's os._exit, the OOM killer).

Around each test (setup, call, teardown) the plugin compares the members
before and after; what the test left running is reported with pid, name,
command line, age and the test's node id, ended, and the test fails (an error
at teardown), warns, or only has it ended. Processes a fixture starts are the
fixture's: they are checked when that fixture is finalized, at its scope's
end. At the start of a run, processes left by earlier runs that were killed
(their marker names a pytest that is gone) are ended and reported.

A layer-6 face, like the CLI: only the public API.

Must never: signal a process this run did not start (the members are the
run's own descendants or carriers of its tree id, each ended by identity).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import proctree
from proctree._errors import ProcessLeakWarning

MODES = ("fail", "warn", "kill", "off")
_KEY = pytest.StashKey["_Guard"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("proctree", "processes a test leaves behind (proctree)")
    group.addoption(
        "--proctree-leaks",
        choices=MODES,
        default=None,
        help="what to do with processes a test or fixture leaves running: fail the test, warn, "
        "only kill them, or off (the default; ini: proctree_leaks)",
    )
    parser.addini("proctree_leaks", "fail, warn, kill or off (the default)", default="off")
    parser.addini(
        "proctree_subreaper",
        "become a child subreaper so orphans come back to pytest (Linux; default true). false: members are "
        "found by their PROCTREE_TREE, a scan of every environment per test",
        type="bool",
        default=True,
    )
    parser.addini(
        "proctree_watchdog",
        "start a native keeper that ends everything the run started if pytest dies (default true)",
        type="bool",
        default=True,
    )
    parser.addini(
        "proctree_grace", "seconds a leaked process gets between SIGTERM and SIGKILL (default 1)", default="1"
    )
    parser.addini(
        "proctree_settle",
        "seconds a process still running after a test may take to exit on its own (one the test just killed) "
        "before it counts as leaked (default 1)",
        default="1",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "proctree(leaks='fail'|'warn'|'kill'|'off'): the leak check's mode for this test, over --proctree-leaks",
    )
    mode = config.getoption("proctree_leaks") or config.getini("proctree_leaks") or "off"
    if mode not in MODES:
        raise pytest.UsageError(f"proctree_leaks must be one of {', '.join(MODES)}, got {mode!r}")
    seconds = {}
    for name in ("proctree_grace", "proctree_settle"):
        try:
            seconds[name] = float(config.getini(name))
        except ValueError:
            raise pytest.UsageError(f"{name} must be a number of seconds, got {config.getini(name)!r}") from None
        if not 0 <= seconds[name] <= 3600:
            raise pytest.UsageError(f"{name} must be between 0 and 3600 seconds, got {seconds[name]}")
    guard = _Guard(
        config,
        mode,
        bool(config.getini("proctree_subreaper")),
        bool(config.getini("proctree_watchdog")),
        seconds["proctree_grace"],
        seconds["proctree_settle"],
    )
    config.stash[_KEY] = guard
    config.pluginmanager.register(guard, "proctree-leaks")


def _describe(p: proctree.Proc, who: str, now: float) -> str:
    try:
        argv = proctree.cmdline(p.pid)
    except (proctree.Error, OSError):
        argv = []
    line = " ".join(argv) if argv else f"[{p.name}]"
    if len(line) > 200:
        line = line[:197] + "..."
    age = _age(p, now)
    return f"pid {p.pid} ({p.name}), running {age}: {line!r}, left by {who}"


def _running(p: proctree.Proc) -> bool:
    """p is still the same process, and not a zombie."""
    try:
        now = proctree.proc(p.pid)
    except proctree.NoSuchProcess:
        return False
    return now.start_time == p.start_time and not now.is_zombie


def _age(p: proctree.Proc, now: float) -> str:
    try:
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        ticks = os.sysconf("SC_CLK_TCK")
        seconds = max(0.0, up - p.start_time / ticks)
    except (OSError, ValueError):
        return "?"
    return f"{seconds:.1f} s"


def _held_pids() -> set[int]:
    """Pids of live multiprocessing processes that something still holds beyond multiprocessing's registry of
    started children: a pool's workers (held by the pool a fixture keeps), started lazily by a test.

    A test's own Process that it dropped is held by that registry alone once its frame is gone.
    """
    import gc
    import sys
    import types

    mp = sys.modules.get("multiprocessing.process")
    if mp is None:
        return set()
    registry = getattr(mp, "_children", None)
    pids: list[int] = []
    objs: list[Any] = []
    started = list(getattr(mp, "_children", ()))
    for obj in started:
        popen = getattr(obj, "_popen", None)
        if popen is not None and getattr(popen, "returncode", 0) is None:
            pids.append(popen.pid)
            objs.append(obj)
    ignore = {id(registry), id(objs), id(started)}
    held = set()
    for i, pid in enumerate(pids):  # no (pid, obj) tuples: each would be one more referrer
        obj = objs[i]
        for r in gc.get_referrers(obj):
            if id(r) in ignore or isinstance(r, (types.FrameType, types.MethodType)):
                continue
            if isinstance(r, dict) and r is getattr(obj, "__dict__", None):
                continue
            held.add(pid)
            break
    return held


def _builtin_fixture(fixturedef: Any) -> bool:
    """pytest's own fixtures (tmp_path, monkeypatch, capsys, request, ...): they start no process."""
    module = getattr(getattr(fixturedef, "func", None), "__module__", "") or ""
    return module.startswith("_pytest.")


def _stdlib_helpers() -> set[int]:
    """multiprocessing's per-interpreter helpers (the resource tracker, the forkserver) and proctree.Popen's
    holding tree: they live as long as pytest does, whichever test first needed them."""
    import sys

    out = set()
    rt = sys.modules.get("multiprocessing.resource_tracker")
    pid = getattr(getattr(rt, "_resource_tracker", None), "_pid", None)
    if isinstance(pid, int):
        out.add(pid)
    fs = sys.modules.get("multiprocessing.forkserver")
    pid = getattr(getattr(fs, "_forkserver", None), "_forkserver_pid", None)
    if isinstance(pid, int):
        out.add(pid)
    # proctree.Popen's holding tree (one keeper per process, started by the first Popen): looked up, not
    # imported, as multiprocessing's helpers are; its commands are checked like any other process.
    hold = sys.modules.get("proctree._containment.popenhold")
    held = getattr(hold, "held_pids", None)
    if callable(held):
        out.update(held())
    return out


class _Guard:
    """The run's containment, the marks around each test, and who started what."""

    def __init__(
        self, config: pytest.Config, mode: str, subreaper: bool, watchdog: bool, grace: float, settle: float
    ) -> None:
        self.config, self.mode, self.grace, self.settle = config, mode, grace, settle
        self.subreaper, self.watchdog = subreaper, watchdog
        self.box: Any = None
        self.owns_box = False
        self.worker = hasattr(config, "workerinput")
        self.item: str = ""  # the test being run (fixtures are set up for it)
        self.marks: dict[str, Any] = {}
        # fixture key -> (description, identities it started)
        self.fixtures: dict[tuple[str, str, int], tuple[str, set[tuple[int, int]]]] = {}
        self.finalized: list[tuple[str, set[tuple[int, int]]]] = []  # fixtures finalized in this teardown phase
        self.held: dict[tuple[int, int], str] = {}  # leaked but still held by a live object: who started it
        self.exempt: set[tuple[int, int]] = set()  # started by tests whose check is off
        self.leakers: list[tuple[str, list[str]]] = []
        self.earlier: list[str] = []
        self.failed_at_end = False
        self.last_mark: Any = None  # the members after the last fixture setup of the test being set up

    # -- the containment ------------------------------------------------------------------

    def _ensure(self) -> Any:
        if self.box is None:
            # An in-process inner run (pytester) shares the outer run's containment, and leaves it open.
            self.box = proctree.Containment.current()
            if self.box is None:
                self.box = proctree.contain_self(
                    subreaper=self.subreaper, watchdog=self.watchdog, tag="pytest", grace=self.grace
                )
                self.owns_box = True
        return self.box

    def _mode_for(self, item: pytest.Item) -> str:
        m = item.get_closest_marker("proctree")
        if m is not None:
            mode = m.kwargs.get("leaks", m.args[0] if m.args else self.mode)
            if mode not in MODES:
                raise pytest.UsageError(f"{item.nodeid}: proctree(leaks=...) must be one of {', '.join(MODES)}")
            return str(mode)
        return self.mode

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.mode == "off":
            return
        if not self.worker:
            self._end_earlier_runs()
        self._ensure()
        self._on_termination()

    def _on_termination(self) -> None:
        """A SIGTERM or SIGHUP (a CI job cancelled, a terminal closed) that would end pytest at once ends what
        the run started first, those that scrubbed every marker included (the watchdog finds them only by it)."""
        import signal

        if not self.owns_box:
            return

        def stop(signum: int, frame: Any) -> None:
            try:
                self.box.close()
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
            now = time.time()
            said = {
                o.proc.pid: _describe(o.proc, f"an earlier run (pytest pid {o.owner[0]}, gone)", now) for o in found
            }
            report = proctree.reap_orphans(tag="pytest", grace=self.grace, within=set(said))
        except (proctree.Error, OSError) as exc:
            self.earlier.append(f"could not look for processes left by earlier runs: {exc}")
            return
        self.earlier.extend(said[o.proc.pid] for o in report.candidates if o.proc.pid in said)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Iterator[None]:
        if self.box is not None and self.owns_box:
            now = time.time()
            left = [
                p
                for p in self.box.members()
                if (p.pid, p.start_time) not in self.exempt and p.pid not in _stdlib_helpers()
            ]
            if left:
                lines = [
                    _describe(p, self.held.get((p.pid, p.start_time), "the run (still running at its end)"), now)
                    for p in left
                ]
                self.leakers.append(("the session's end", lines))
                if self.mode == "fail" and session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
                    self.failed_at_end = True
            self.box.close()
        yield

    # -- fixtures: what their setup starts is theirs --------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
        box = self.box
        if box is None or _builtin_fixture(fixturedef):
            yield
            return
        # The members after the previous setup (or the test's mark) are the members before this one:
        # nothing else runs in between, so one reading per fixture, not two.
        before = self.last_mark if self.last_mark is not None else box.mark()
        outcome: Any = yield
        after = box.mark()
        self.last_mark = after
        new = [p for p in box.members_of(after) if (p.pid, p.start_time) not in before.identities]
        if new:
            key = (fixturedef.argname, fixturedef.scope, id(fixturedef))
            where = f", set up for {self.item}" if self.item else ""
            desc = f"fixture {fixturedef.argname!r} (scope {fixturedef.scope}{where})"
            entry = self.fixtures.setdefault(key, (desc, set()))
            entry[1].update((p.pid, p.start_time) for p in new)
            if outcome.excinfo is not None:  # its setup failed: no finalizer will run, judge it with this test
                self.finalized.append(self.fixtures.pop(key))

    def pytest_fixture_post_finalizer(self, fixturedef: Any, request: pytest.FixtureRequest) -> None:
        # Checked once the whole teardown phase is over: another fixture finalized in the same
        # phase (one this fixture used to start them) may be the one that ends them.
        got = self.fixtures.pop((fixturedef.argname, fixturedef.scope, id(fixturedef)), None)
        if got is not None:
            self.finalized.append(got)

    def _fixture_leaks(self) -> list[str]:
        """The processes of fixtures finalized in this teardown that still run, ended; their descriptions."""
        out: list[str] = []
        finalized, self.finalized = self.finalized, []
        if self.box is None or not finalized:
            return out
        members = self.box.members()
        now = time.time()
        for desc, ids in finalized:
            alive = self._settled([p for p in members if (p.pid, p.start_time) in ids])
            if alive:
                out.extend(_describe(p, desc, now) for p in alive)
                self.box.end(alive, grace=self.grace)
        return out

    # -- tests ------------------------------------------------------------------------------

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        self.item = item.nodeid
        if self._mode_for(item) != "off" or self.box is not None:
            self.marks[item.nodeid] = self.last_mark = self._ensure().mark()
        yield
        self.last_mark = None

    def _fixture_owned(self, members: list[proctree.Proc]) -> set[tuple[int, int]]:
        """Identities of fixtures' processes (live, or finalized in this teardown) and everything they started."""
        owned: set[tuple[int, int]] = set()
        for _, ids in [*self.fixtures.values(), *self.finalized]:
            owned |= ids
        if not owned:
            return owned
        by_pid = {p.pid: p for p in members}
        for p in members:
            chain: list[tuple[int, int]] = []
            q: proctree.Proc | None = p
            hops = 0
            while q is not None and hops < 64:
                if (q.pid, q.start_time) in owned:
                    owned.update(chain)
                    break
                chain.append((q.pid, q.start_time))
                q, hops = by_pid.get(q.ppid), hops + 1
        return owned

    def _settled(self, leaks: list[proctree.Proc]) -> list[proctree.Proc]:
        """Those of leaks still running after up to settle seconds (a process the test just killed is exiting)."""
        deadline = time.monotonic() + self.settle
        while leaks:
            leaks = [p for p in leaks if _running(p)]  # a zombie has exited: its owner reaps it
            if not leaks or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        return leaks

    def _released(self) -> list[str]:
        """Processes held by a live object when their test ended, that nothing holds any more and still run."""
        if not self.held:
            return []
        members = {(p.pid, p.start_time): p for p in self.box.members()}
        for ident in [i for i in self.held if i not in members]:
            del self.held[ident]  # gone on its own
        if not self.held:
            return []
        still = _held_pids()
        loose = [members[i] for i in self.held if i[0] not in still]
        if not loose:
            return []
        now = time.time()
        out = [_describe(p, self.held.pop((p.pid, p.start_time)), now) for p in loose]
        self.box.end(loose, grace=self.grace)
        return out

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
        outcome: Any = yield
        if call.when != "teardown":
            return
        mark = self.marks.pop(item.nodeid, None)
        found: list[str] = []
        mode = self._mode_for(item)
        if mark is not None and self.box is not None:
            members = self.box.members()
            owned = self._fixture_owned(members)
            new = [
                p for p in self.box.leaks_since(mark, exclude=owned, members=members) if p.pid not in _stdlib_helpers()
            ]
            if mode == "off":
                self.exempt.update((p.pid, p.start_time) for p in new)
            else:
                leaks = self._settled(new)
                if leaks:
                    held = _held_pids()
                    for p in leaks:
                        if p.pid in held:
                            self.held[(p.pid, p.start_time)] = f"test {item.nodeid} (kept by a live object after it)"
                    leaks = [p for p in leaks if p.pid not in held]
                if leaks:
                    now = time.time()
                    found.extend(_describe(p, f"test {item.nodeid}", now) for p in leaks)
                    self.box.end(leaks, grace=self.grace)
                else:
                    self.box.reap_adopted()
            found.extend(self._released())
        found.extend(self._fixture_leaks())
        if not found or mode == "off":
            return
        report = outcome.get_result()
        text = "proctree: processes left running, now ended:\n" + "\n".join(f"  {line}" for line in found)
        report.user_properties.append(("proctree_leaks", text))
        if mode == "warn":
            try:
                warnings.warn(ProcessLeakWarning(text), stacklevel=1)
                return
            except ProcessLeakWarning:
                pass  # warnings are errors here (-W error, filterwarnings): then the leak fails the test
        if mode in ("fail", "warn"):
            report.outcome = "failed"
            report.longrepr = text

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == "proctree_leaks":
                self.leakers.append((report.nodeid, str(value).splitlines()[1:]))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.worker or not (self.leakers or self.earlier):
            return
        tr = terminalreporter
        tr.write_sep("=", "proctree: leaked processes")
        for line in self.earlier:
            tr.write_line(f"ended, {line}")
        for nodeid, lines in self.leakers:
            tr.write_line(f"{nodeid}: {len(lines)} process(es)")
            for line in lines:
                tr.write_line(f"    {line.strip()}")
        if self.failed_at_end:
            tr.write_line("the run failed: processes were still running at its end (--proctree-leaks=fail)")


@pytest.fixture
def proctree_spawn(request: pytest.FixtureRequest) -> Iterator[Callable[..., proctree.Tree]]:
    """spawn(args, **kwargs) -> a contained proctree.Tree, ended (with what it started) at the test's teardown."""
    made: list[proctree.Tree] = []

    def spawn(args: Any, **kwargs: Any) -> proctree.Tree:
        tree = proctree.spawn(args, **kwargs)
        made.append(tree)
        return tree

    yield spawn
    for tree in made:
        try:
            tree.terminate()
        finally:
            for f in (tree.stdin, tree.stdout, tree.stderr):
                if f is not None:
                    f.close()
