"""The plugin leaves the process world a test sees as it is without it (issue 29's scenarios, continued).

The run's subreaper is a process of its own above the pytest that runs the
tests: a daemon a test leaves is not pytest's child to wait for, and it is
reaped as it dies; the watchdog is no child of pytest, and a test that kills
it ends nothing; Ctrl-C and a nested pytest behave as without the plugin.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from support.pluginrun import _entry_point_registered, clean_run, pids_in, run_inner, start_inner_until_ready
from support.spawnkit import alive, wait_gone
from support.treekit import _PROCTREE_HOME

LINUX = sys.platform.startswith("linux")
pytestmark = pytest.mark.skipif(not LINUX, reason="the subreaper and the tests' leaks are Linux's here")


WATCHDOG_KILLED = r"""
import os, signal, subprocess, time, pytest, proctree
HERE = os.path.dirname(os.path.abspath(__file__))

def watchdogs():
    # This pytest's watchdog: its own child, naming this pytest's pid; or, below the run's subreaper, the
    # subreaper's child, naming the subreaper (it waits for the subreaper's late check).
    watched = {str(os.getpid()), os.environ.get("PROCTREE_PYTEST_HELPER", "")}
    found = []
    for p in proctree.snapshot().procs():
        try:
            argv = proctree.cmdline(p.pid)
        except Exception:
            continue
        if "proctree._plugin.sentinel" in argv and argv[argv.index("proctree._plugin.sentinel") + 1] in watched:
            found.append(p.pid)
    return found

@pytest.fixture(scope="session")
def server():
    p = subprocess.Popen(["sleep", "300"])
    open(os.path.join(HERE, "server"), "w").write(str(p.pid))
    yield p
    p.terminate(); p.wait()

def test_kills_the_watchdog(server):
    found = watchdogs()
    assert found
    for pid in found:  # as a "kill every child of pytest" cleanup does
        os.kill(pid, signal.SIGKILL)

def test_after(server):
    assert server.poll() is None  # losing the watchdog ended nothing
    time.sleep(0.3)
    assert server.poll() is None

def test_later(server):
    assert server.poll() is None
    assert watchdogs()  # a new one was started (at the first test's end or setup after it was gone)
    if HANG:
        p = subprocess.Popen(["setsid", "sleep", "300"])
        open(os.path.join(HERE, "pids"), "w").write(str(p.pid))
        open(os.path.join(HERE, "ready"), "w").write("1")
        time.sleep(300)
"""


def test_a_killed_watchdog_ends_nothing_is_said_once_and_is_restarted(tmp_path):
    r = run_inner(tmp_path, {"test_w.py": "HANG = False\n" + WATCHDOG_KILLED}, "--proctree-leaks=fail")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert out.count("the watchdog was killed") == 1, out
    assert wait_gone(pids_in(tmp_path, "server"), 5)


def test_a_pytest_sigkilled_after_its_watchdog_was_lost_still_leaves_nothing(tmp_path):
    inner = start_inner_until_ready(tmp_path, "HANG = True\n" + WATCHDOG_KILLED)
    pids = pids_in(tmp_path, "pids") + pids_in(tmp_path, "server")
    assert len(pids) == 2 and all(alive(p) for p in pids)
    inner.kill()
    inner.wait()
    assert wait_gone(pids, 15), [p for p in pids if alive(p)]


DAEMON_PATTERNS = r"""
import os, signal, time

def daemon(seconds):
    # Double-forked and setsid, as plumbum's daemonize does: its pid comes back through a pipe.
    r, w = os.pipe()
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, b"%d" % os.getpid())
            time.sleep(seconds)
            os._exit(0)
        os._exit(0)
    os.close(w)
    os.waitpid(first, 0)
    pid = int(os.read(r, 32))
    os.close(r)
    return pid

def gone_within(pid, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False

def test_waits_for_a_daemon_to_go_with_kill_0():
    assert gone_within(daemon(0.3), 5)

def test_a_daemon_is_not_our_child_to_wait_for():
    pid = daemon(300)
    try:
        try:
            os.waitpid(pid, os.WNOHANG)
            raise AssertionError("waitpid succeeded on a process that is not our child")
        except ChildProcessError:
            pass
    finally:
        os.kill(pid, signal.SIGKILL)
    assert gone_within(pid, 5)
"""


def test_a_daemon_a_test_waits_for_behaves_as_without_the_plugin_without_the_subreaper(tmp_path):
    # plumbum's test_closed_filehandles and test_local_daemon, as docs/pytest.md tells such suites to run.
    clean_run(
        run_inner(tmp_path, {"test_d.py": DAEMON_PATTERNS}, "--proctree-leaks=fail", "-o", "proctree_subreaper=false")
    )


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_daemon_a_test_waits_for_behaves_as_without_the_plugin_with_the_subreaper(tmp_path, xdist):
    # The subreaper is a process of its own above the pytest that runs the tests (handoff.py).
    if xdist:
        pytest.importorskip("xdist")
    clean_run(run_inner(tmp_path, {"test_d.py": DAEMON_PATTERNS}, "--proctree-leaks=fail", *xdist, timeout=60))


def test_the_pytest_that_runs_the_tests_is_no_subreaper_and_runs_below_one(tmp_path):
    body = """
        import os, proctree
        def test_where():
            assert "PROCTREE_PYTEST_HELPER" in os.environ
            helper = int(os.environ["PROCTREE_PYTEST_HELPER"])
            assert proctree.proc(os.getpid()).ppid == helper
            import ctypes
            flag = ctypes.c_int(0)
            assert ctypes.CDLL(None).prctl(37, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value == 0
    """
    clean_run(run_inner(tmp_path, {"test_h.py": body}, "--proctree-leaks=fail"))


def test_ctrl_c_reaches_the_pytest_that_runs_the_tests_and_the_run_ends_as_interrupted(tmp_path):
    body = """
        import os, subprocess, time
        HERE = os.path.dirname(os.path.abspath(__file__))
        def test_hangs():
            p = subprocess.Popen(["sleep", "300"])
            open(os.path.join(HERE, "pids"), "w").write(str(p.pid))
            open(os.path.join(HERE, "ready"), "w").write("1")
            time.sleep(300)
    """
    (tmp_path / "test_i.py").write_text(textwrap.dedent(body))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--proctree-leaks=fail"]
    if not _entry_point_registered():
        argv[3:3] = ["-p", "proctree.pytest_plugin"]
    env = dict(os.environ, PYTHONPATH=_PROCTREE_HOME)
    inner = subprocess.Popen(  # its own process group, as a terminal's foreground job
        argv,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(inner.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
        out, _ = inner.communicate(timeout=60)
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait()
    assert inner.returncode == 2 and "KeyboardInterrupt" in out, out
    assert wait_gone(pids_in(tmp_path, "pids"), 10)


NESTED_OUTER = r"""
import os, signal, subprocess, sys, time, pytest
HERE = os.path.dirname(os.path.abspath(__file__))

@pytest.fixture(scope="module")
def daemon():
    # An orphan of this run (double-forked): the run's subreaper adopts it.
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, b"%d" % os.getpid())
            os.execvp("sleep", ["sleep", "300"])
        os._exit(0)
    os.wait()
    os.close(w)
    pid = int(os.read(r, 32))
    yield pid
    os.kill(pid, signal.SIGKILL)

def test_runs_a_nested_pytest(daemon):
    nested = os.path.join(HERE, "nested")
    os.makedirs(nested, exist_ok=True)
    with open(os.path.join(nested, "test_n.py"), "w") as f:
        f.write("def test_ok():\n    pass\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--proctree-leaks=fail", nested],
                       capture_output=True, text=True, cwd=nested, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "leaked" not in r.stdout
"""


def test_a_pytest_a_test_starts_counts_nothing_of_the_run_around_it(tmp_path):
    clean_run(run_inner(tmp_path, {"test_outer.py": NESTED_OUTER}, "--proctree-leaks=fail"))


def test_pytest_has_no_child_of_the_plugins_a_test_could_see(tmp_path):
    body = """
        import os, subprocess, proctree
        def test_counts_its_children():
            p = subprocess.Popen(["sleep", "30"])
            try:
                assert [c.pid for c in proctree.children(os.getpid())] == [p.pid]
            finally:
                p.kill(); p.wait()
        def test_waits_for_any_child():
            p = subprocess.Popen(["true"])
            pids = set()
            while True:
                try:
                    pids.add(os.waitpid(-1, 0)[0])
                except ChildProcessError:
                    break
            assert pids == {p.pid}
            p.returncode = 0
    """
    clean_run(run_inner(tmp_path, {"test_c.py": body}, "--proctree-leaks=fail"))
