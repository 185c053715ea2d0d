"""The pytest plugin (proctree.pytest_plugin) on example suites that leak in every way.

Each case writes a small test suite, runs pytest on it in a subprocess (the
plugin makes that process a subreaper and marks its environment: never this
one), and checks that every leaked process was blamed on the right test or
fixture and ended, and that processes the inner run did not start were left
alone. The leaked processes report their pids through files, never guessed.
"""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import proctree
from support.pluginrun import (
    LEAKS,
    _entry_point_registered,
    leak_section,
    own_report,
    pids_in,
    run_inner,
    start_inner_until_ready,
)
from support.spawnkit import alive, wait_gone
from support.treekit import _PROCTREE_HOME

LINUX = sys.platform.startswith("linux")
pytestmark = pytest.mark.skipif(not LINUX, reason="the subreaper and the tests' leaks are Linux's here")


def test_every_kind_of_leak_is_blamed_on_its_test_and_ended(tmp_path, started_outside):
    r = run_inner(tmp_path, {"test_leaks.py": LEAKS}, "--proctree-leaks=fail")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    for test, name in [
        ("test_popen_server_not_waited", "popen.pids"),
        ("test_setsid_double_fork_daemon", "daemon.pids"),
        ("test_scrubbed_environment", "scrubbed.pids"),
        ("test_multiprocessing_child", "mp.pids"),
    ]:
        (pid,) = pids_in(tmp_path, name)
        assert f"ERROR at teardown of {test}" in out, out
        assert f"pid {pid} " in out and f"left by test test_leaks.py::{test}" in out, out
        assert wait_gone([pid], 5), f"{name}: {pid} still running"
    assert "test_clean" not in leak_section(out)
    # Each leaking test passed, then errored at its teardown (3.12+ may add fork-in-a-threaded-process warnings).
    assert re.search(r"\b5 passed, (\d+ warnings?, )?4 errors\b", out), out
    assert all(alive(p) for p in started_outside)


FORKED_DAEMONS = r"""
import os, time

HERE = os.path.dirname(os.path.abspath(__file__))

def daemon(execs):
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, b"%d" % os.getpid())
            if execs:
                os.execvp("sleep", ["sleep", "300"])
            time.sleep(300)  # a fork of pytest that never execs: the kernel shows pytest's first environment
            os._exit(0)
        os._exit(0)
    os.close(w)
    pid = int(os.read(r, 32))
    os.waitpid(middle, 0)
    with open(os.path.join(HERE, "daemons.pids"), "a") as f:
        f.write(f"{pid}\n")

def test_forked_daemon_that_never_execs():
    daemon(False)

def test_next():
    pass

def test_forked_daemon_that_execs():
    daemon(True)

def test_last():
    pass
"""


def test_a_double_forked_daemon_is_blamed_on_its_test_before_and_after_its_exec(tmp_path):
    # Until it execs, a fork of pytest shows the environment pytest started with, without the run's tree id
    # (set in os.environ since): below the run's subreaper it is still the run's, and the test's.
    r = run_inner(tmp_path, {"test_forked.py": FORKED_DAEMONS}, "--proctree-leaks=fail")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    never, execs = pids_in(tmp_path, "daemons.pids")
    section = leak_section(out)
    assert f"pid {never} " in section and "left by test test_forked.py::test_forked_daemon_that_never_execs" in section
    assert f"pid {execs} " in section and "left by test test_forked.py::test_forked_daemon_that_execs" in section
    assert "test_next" not in section and "test_last" not in section, out
    assert wait_gone([never, execs], 5)


@pytest.fixture
def started_outside():
    """A process this test starts outside the inner run: the plugin must never touch it."""
    p = subprocess.Popen(["sleep", "300"])
    yield [p.pid]
    p.kill()
    p.wait()


@pytest.mark.parametrize(("mode", "rc", "word"), [("warn", 0, "ProcessLeakWarning"), ("kill", 0, "1 passed")])
def test_warn_and_kill_modes_end_the_leak_without_failing(tmp_path, mode, rc, word):
    body = """
        import subprocess, os
        def test_leak():
            p = subprocess.Popen(["sleep", "300"])
            open(os.path.join(os.path.dirname(__file__), "pids"), "w").write(str(p.pid))
    """
    r = run_inner(tmp_path, {"test_one.py": body}, f"--proctree-leaks={mode}")
    out = r.stdout + r.stderr
    assert r.returncode == rc, out
    assert word in out
    assert "proctree: leaked processes" in out and "test_one.py::test_leak" in out
    assert wait_gone(pids_in(tmp_path, "pids"), 5)


def test_off_by_default_and_a_marker_opts_one_test_in(tmp_path):
    body = """
        import subprocess, os, pytest
        HERE = os.path.dirname(__file__)
        def test_unchecked():
            p = subprocess.Popen(["sleep", "300"])
            open(os.path.join(HERE, "unchecked"), "w").write(str(p.pid))
        @pytest.mark.proctree(leaks="fail")
        def test_checked():
            p = subprocess.Popen(["sleep", "300"])
            open(os.path.join(HERE, "checked"), "w").write(str(p.pid))
    """
    r = run_inner(tmp_path, {"test_opt.py": body})
    out = r.stdout + r.stderr
    (unchecked,), (checked,) = pids_in(tmp_path, "unchecked"), pids_in(tmp_path, "checked")
    try:
        assert r.returncode == 1, out
        assert (
            "ERROR at teardown of test_checked" in out and "test_unchecked" not in out.split("short test summary")[-1]
        )
        assert wait_gone([checked], 5)
    finally:
        if alive(unchecked):
            proctree.terminate_tree(unchecked, grace=0)


FIXTURES = r"""
import os, subprocess, pytest
HERE = os.path.dirname(os.path.abspath(__file__))

@pytest.fixture(scope="module")
def server():
    p = subprocess.Popen(["sleep", "300"])
    open(os.path.join(HERE, "server"), "w").write(str(p.pid))
    yield p  # never stopped: the fixture leaks it

@pytest.fixture
def tidy():
    p = subprocess.Popen(["sleep", "300"])
    yield p
    p.kill(); p.wait()

def test_uses_server(server, tidy):
    assert server.poll() is None

def test_uses_server_again(server):
    assert server.poll() is None
"""


def test_a_fixtures_processes_are_the_fixtures_and_checked_at_its_scopes_end(tmp_path):
    r = run_inner(tmp_path, {"test_fx.py": FIXTURES}, "--proctree-leaks=fail")
    out = r.stdout + r.stderr
    (server,) = pids_in(tmp_path, "server")
    assert "ERROR at teardown of test_uses_server_again" in out, out
    assert "ERROR at teardown of test_uses_server " not in out and "ERROR at teardown of test_uses_server\n" not in out
    assert f"pid {server} " in out and "left by fixture 'server' (scope module" in out, out
    assert wait_gone([server], 5)


def test_proctree_spawn_fixture_ends_its_tree(tmp_path):
    body = """
        import os
        def test_spawned(proctree_spawn):
            t = proctree_spawn(["sh", "-c", "sleep 300 & sleep 300"])
            open(os.path.join(os.path.dirname(__file__), "pids"), "w").write(" ".join(str(p.pid) for p in t.members()))
    """
    r = run_inner(tmp_path, {"test_sp.py": body}, "--proctree-leaks=fail")
    assert r.returncode == 0, r.stdout + r.stderr
    assert wait_gone(pids_in(tmp_path, "pids"), 5)


KILLED = r"""
import os, subprocess, time
HERE = os.path.dirname(os.path.abspath(__file__))
def test_hangs():
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, b"%d" % os.getpid())
            os.execvp("sleep", ["sleep", "300"])
        os._exit(0)
    os.wait()
    open(os.path.join(HERE, "pids"), "w").write(os.read(r, 32).decode())
    p = subprocess.Popen(["sleep", "300"])
    open(os.path.join(HERE, "pids"), "a").write(f" {p.pid}")
    open(os.path.join(HERE, "ready"), "w").write("1")
    time.sleep(300)
"""


def test_a_test_killed_by_pytest_timeout_leaves_nothing(tmp_path):
    r = run_inner(
        tmp_path, {"test_k.py": KILLED}, "--proctree-leaks=fail", "--timeout=3", "--timeout-method=thread", timeout=60
    )
    assert "Timeout" in r.stdout + r.stderr
    pids = pids_in(tmp_path, "pids")
    assert len(pids) == 2
    assert wait_gone(pids, 10), [p for p in pids if alive(p)]


def test_a_sigkilled_pytest_leaves_nothing_and_the_next_run_reports_what_an_unwatched_one_left(tmp_path):
    inner = start_inner_until_ready(tmp_path, KILLED)
    pids = pids_in(tmp_path, "pids")
    inner.kill()  # SIGKILL: no teardown, no atexit
    inner.wait()
    assert wait_gone(pids, 10), [p for p in pids if alive(p)]


def test_leftovers_of_an_earlier_run_whose_watchdog_died_too_are_ended_at_the_next_start(tmp_path):
    inner = start_inner_until_ready(tmp_path, KILLED)
    pids = pids_in(tmp_path, "pids")
    # As if the machine's OOM killer took pytest and its watchdog at once: stop pytest, kill the keeper, kill pytest.
    below = proctree.descendants(inner.pid)
    keepers = [p.pid for p in below if "proctree._plugin.sentinel" in proctree.cmdline(p.pid)]
    assert keepers
    # Every pytest of the run stops first (below the run's subreaper the one that runs the tests is a grandchild):
    # a running one would start a new watchdog once it saw its own killed, and that one would end the leftovers.
    for pid in [inner.pid, *(p.pid for p in below if "pytest" in " ".join(proctree.cmdline(p.pid)))]:
        os.kill(pid, signal.SIGSTOP)
    for k in keepers:
        os.kill(k, signal.SIGKILL)
    inner.kill()
    inner.wait()
    try:
        time.sleep(0.3)
        assert any(alive(p) for p in pids)  # nothing watched them any more
        (tmp_path / "test_k.py").unlink()
        (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
        r = run_inner(tmp_path, {}, "--proctree-leaks=fail")
        out = r.stdout + r.stderr
        assert r.returncode == 0, out
        # This run ends them as it starts, unless another test's inner run (xdist) started first and did.
        assert "an earlier run" in out or not any(alive(p) for p in pids), out
        assert wait_gone(pids, 10)
    finally:
        for p in pids:
            if alive(p):
                proctree.terminate_tree(p, grace=0)


def test_xdist_workers_each_check_their_own_tests(tmp_path):
    pytest.importorskip("xdist")
    r = run_inner(tmp_path, {"test_leaks.py": LEAKS}, "--proctree-leaks=fail", "-n", "2")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "proctree: leaked processes" in out
    for name in ("popen.pids", "daemon.pids", "scrubbed.pids", "mp.pids"):
        (pid,) = pids_in(tmp_path, name)
        assert wait_gone([pid], 5)
    assert out.count("left by test test_leaks.py::") >= 4


def test_a_process_started_before_the_run_is_never_a_member(tmp_path):
    # A CI script's `helper & exec pytest`: the helper is pytest's child, but the run did not start it.
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--proctree-leaks=fail"]
    if not _entry_point_registered():
        argv[3:3] = ["-p", "proctree.pytest_plugin"]
    script = 'sleep 300 >/dev/null 2>&1 & echo $! > before.pid; exec "$@"'
    env = dict(os.environ, PYTHONPATH=_PROCTREE_HOME)
    r = subprocess.run(["sh", "-c", script, "sh", *argv], cwd=tmp_path, capture_output=True, text=True, env=env)
    (before,) = pids_in(tmp_path, "before.pid")
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        assert alive(before)
        assert "leaked" not in own_report(r.stdout)
    finally:
        proctree.terminate_tree(before, grace=0)


STDLIB = r"""
import concurrent.futures, multiprocessing, os, pytest
from multiprocessing import shared_memory

def _square(x):
    return x * x

@pytest.fixture(scope="module")
def pool():
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork")) as ex:
        yield ex  # its workers start lazily, in the first test that submits

def test_pool_first(pool):
    assert pool.submit(_square, 3).result() == 9

def test_pool_again(pool):
    assert pool.submit(_square, 4).result() == 16

def test_spawn_joined():
    p = multiprocessing.get_context("spawn").Process(target=_square, args=(2,))
    p.start(); p.join()
    assert p.exitcode == 0

def test_forkserver_joined():
    p = multiprocessing.get_context("forkserver").Process(target=_square, args=(2,))
    p.start(); p.join()

def test_shared_memory():
    m = shared_memory.SharedMemory(create=True, size=16)
    m.close(); m.unlink()

@pytest.fixture(scope="module")
def forked():
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    yield
    assert os.waitpid(pid, 0)[1] >> 8 == 7  # its status is the fixture's: never reaped by the plugin

def test_forked_one(forked):
    pass

def test_forked_two(forked):
    pass
"""


def test_correct_multiprocessing_and_fork_code_is_never_blamed(tmp_path):
    r = run_inner(tmp_path, {"test_std.py": STDLIB}, "--proctree-leaks=fail")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "leaked" not in own_report(out) and "left running" not in out


def test_a_module_fixture_used_by_one_test_is_blamed_as_the_fixture(tmp_path):
    body = """
        import os, subprocess, pytest
        @pytest.fixture(scope="module")
        def server():
            p = subprocess.Popen(["sleep", "300"])
            open(os.path.join(os.path.dirname(__file__), "server"), "w").write(str(p.pid))
            yield p
        def test_uses_server(server):
            pass
    """
    r = run_inner(tmp_path, {"test_one.py": body}, "--proctree-leaks=fail")
    out = r.stdout + r.stderr
    assert "left by fixture 'server' (scope module, set up for test_one.py::test_uses_server)" in out, out
    assert wait_gone(pids_in(tmp_path, "server"), 5)


def test_warn_mode_with_warnings_as_errors_fails_the_test_instead(tmp_path):
    body = """
        import subprocess, os
        def test_leak():
            p = subprocess.Popen(["sleep", "300"])
            open(os.path.join(os.path.dirname(__file__), "pids"), "w").write(str(p.pid))
        def test_after():
            pass
    """
    r = run_inner(tmp_path, {"test_w.py": body}, "--proctree-leaks=warn", "-W", "error::UserWarning")
    out = r.stdout + r.stderr
    assert "INTERNALERROR" not in out, out
    assert "ERROR at teardown of test_leak" in out and "2 passed" in out
    assert wait_gone(pids_in(tmp_path, "pids"), 5)


def test_a_process_started_at_collection_fails_the_run_and_off_tests_are_not_checked(tmp_path):
    body = """
        import os, subprocess, pytest
        HERE = os.path.dirname(os.path.abspath(__file__))
        AT_IMPORT = subprocess.Popen(["sleep", "300"])
        open(os.path.join(HERE, "import"), "w").write(str(AT_IMPORT.pid))
        @pytest.mark.proctree(leaks="off")
        def test_off():
            p = subprocess.Popen(["sleep", "300"])
            open(os.path.join(HERE, "off"), "w").write(str(p.pid))
    """
    r = run_inner(tmp_path, {"test_c.py": body}, "--proctree-leaks=fail")
    out = r.stdout + r.stderr
    (at_import,), (off,) = pids_in(tmp_path, "import"), pids_in(tmp_path, "off")
    try:
        assert r.returncode == 1, out
        assert f"pid {at_import} " in out and "the session's end" in out
        assert wait_gone([at_import], 5)
        assert f"pid {off} " not in out  # its test's check is off: never reported (the run's end still ends it)
    finally:
        if alive(off):
            proctree.terminate_tree(off, grace=0)


def test_contain_self_closed_in_a_fork_child_touches_nothing_of_the_parent():
    script = r"""
import os, subprocess, sys, proctree
box = proctree.contain_self(watchdog=False)
sib = subprocess.Popen(["sleep", "300"])
pid = os.fork()
if pid == 0:
    assert box.members() == []
    box.close()
    os._exit(0)
os.waitpid(pid, 0)
print(sib.poll())
assert [p.pid for p in box.members()] == [sib.pid]
box.close()
"""
    r = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=_PROCTREE_HOME),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "None"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_terminated_pytest_ends_even_what_scrubbed_every_marker(tmp_path, sig):
    body = r"""
        import os, subprocess, time
        HERE = os.path.dirname(os.path.abspath(__file__))
        def test_hangs():
            p = subprocess.Popen(["sleep", "300"], env={})
            open(os.path.join(HERE, "pids"), "w").write(str(p.pid))
            open(os.path.join(HERE, "ready"), "w").write("1")
            time.sleep(300)
    """
    inner = start_inner_until_ready(tmp_path, textwrap.dedent(body))
    pids = pids_in(tmp_path, "pids")
    inner.send_signal(sig)
    assert inner.wait(timeout=30) == -sig
    assert wait_gone(pids, 10)
