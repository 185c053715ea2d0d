"""Under xdist, a fork that never execs is blamed on the worker that made it, never on another worker's test.

Such a fork (a double-forked daemon before its exec, a forked helper that never execs) shows the environment its
worker started with, and every xdist worker starts with one and the same: each worker tells its own by the pipes
and sockets the fork still holds. Here one worker's test leaves a double-forked daemon that never execs, while a
test on the other worker ends and is checked: the daemon is the first test's leak alone.
"""

import sys

import pytest

from support.pluginrun import leak_section, pids_in, run_inner
from support.spawnkit import wait_gone

LINUX = sys.platform.startswith("linux")
pytestmark = pytest.mark.skipif(not LINUX, reason="the run's subreaper and its adoption are Linux's")

DAEMON = r"""
import os, pathlib, time

HERE = pathlib.Path(__file__).parent

def test_daemon_that_never_execs():
    (HERE / "workers").open("a").write(os.environ["PYTEST_XDIST_WORKER"] + "\n")
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, b"%d" % os.getpid())
            time.sleep(300)  # never execs: it shows its worker's startup environment as long as it lives
            os._exit(0)
        os._exit(0)
    os.close(w)
    pid = int(os.read(r, 32))
    os.wait()
    with open(HERE / "daemon.pids", "a") as f:
        f.write(f"{pid}\n")
    deadline = time.monotonic() + 60
    while not (HERE / "other.done").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
"""

OTHER = r"""
import os, pathlib, time

HERE = pathlib.Path(__file__).parent

def test_1_ends_while_the_daemon_lives():
    (HERE / "workers").open("a").write(os.environ["PYTEST_XDIST_WORKER"] + "\n")
    deadline = time.monotonic() + 60
    while not (HERE / "daemon.pids").exists() and time.monotonic() < deadline:
        time.sleep(0.02)

def test_2_after_that_tests_check():
    (HERE / "other.done").write_text("")
"""


def test_a_fork_that_never_execs_is_its_own_workers_leak_not_another_workers(tmp_path):
    pytest.importorskip("xdist")
    files = {"test_a_daemon.py": DAEMON, "test_b_other.py": OTHER}
    r = run_inner(tmp_path, files, "--proctree-leaks=fail", "-n", "2", "--dist", "loadfile")
    out = r.stdout + r.stderr
    workers = (tmp_path / "workers").read_text().split()
    if len(set(workers)) != 2:
        pytest.skip(f"xdist ran both files on one worker ({workers}): nothing to tell apart")
    (daemon,) = pids_in(tmp_path, "daemon.pids")
    assert r.returncode == 1, out
    summary = leak_section(out)
    assert f"pid {daemon} " in summary and "left by test test_a_daemon.py::test_daemon_that_never_execs" in summary, out
    assert "test_b_other.py" not in summary, out
    assert summary.count(", left by ") == 1, out
    assert wait_gone([daemon], 5)
