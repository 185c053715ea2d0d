"""Signals and the hand-off (proctree/_plugin/handoff.py, reaper.py): the pytest you started is a stand-in.

A signal a process sends to the pid of the pytest it started must do what it
does without the plugin, once, and the pytest that runs the tests dying of a
signal (SIGKILL too) must look the same to the parent. Each case runs a real
pytest with the plugin (handed off: its test records the subreaper's pid)
and, for comparison, with the plugin off, in a process group of its own so
that a stop is a job control stop and no signal reaches this pytest.
"""

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import proctree
from support.pluginrun import _entry_point_registered
from support.spawnkit import wait_gone
from support.treekit import _PROCTREE_HOME

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the hand-off is Linux's")

WAITS = """
    import os, subprocess, time
    HERE = os.path.dirname(os.path.abspath(__file__))

    def test_waits():
        p = subprocess.Popen(["sleep", "300"])
        open(os.path.join(HERE, "pids"), "w").write(str(p.pid))
        open(os.path.join(HERE, "helper"), "w").write(os.environ.get("PROCTREE_PYTEST_HELPER", ""))
        open(os.path.join(HERE, "ready"), "w").write(str(os.getpid()))
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(HERE, "release")) and time.monotonic() < deadline:
            time.sleep(0.05)
        p.kill()
        p.wait()
"""

FAULTHANDLER_CONFTEST = """
    import faulthandler, os, signal
    DUMPS = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "dumps"), "w")
    faulthandler.register(signal.SIGUSR1, file=DUMPS)
"""


def _start(tmp_path, plugin, conftest=None):
    """pytest on WAITS in a process group of its own, once its test runs; (the Popen, the test's pid)."""
    (tmp_path / "test_w.py").write_text(textwrap.dedent(WAITS))
    if conftest:
        (tmp_path / "conftest.py").write_text(textwrap.dedent(conftest))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--proctree-leaks", plugin]
    if not _entry_point_registered():
        argv[3:3] = ["-p", "proctree.pytest_plugin"]
    outer = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=_PROCTREE_HOME, PYTHONDONTWRITEBYTECODE="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # a group of its own (process_group= is 3.11's; setpgrp in the child on 3.10)
        **({"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}),
    )
    deadline = time.monotonic() + 60
    ready = tmp_path / "ready"
    while not (ready.exists() and ready.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists(), "the run's test never started"
    handed_off = (tmp_path / "helper").read_text() != ""
    assert handed_off == (plugin != "off")
    return outer, int(ready.read_text())


def _finish(outer, tmp_path):
    (tmp_path / "release").write_text("1")
    out, _ = outer.communicate(timeout=60)
    return outer.returncode, out


@pytest.fixture
def ends(request):
    """Ends what a case leaves: the started pytest (its group) and the test's sleep, by the pids it recorded."""
    started = []
    yield started
    for outer, tmp_path in started:
        (tmp_path / "release").write_text("1")
        if outer.poll() is None:
            os.killpg(outer.pid, signal.SIGKILL)
            outer.wait()
        if (tmp_path / "pids").exists():  # an interrupted run without the plugin leaves it
            pid = int((tmp_path / "pids").read_text())
            with contextlib.suppress(proctree.NoSuchProcess, ProcessLookupError):
                if proctree.cmdline(pid) == ["sleep", "300"]:
                    os.kill(pid, signal.SIGKILL)
            assert wait_gone([pid], 10)


@pytest.mark.parametrize("plugin", ["off", "fail"])
def test_sigint_sent_to_the_pid_interrupts_the_run(tmp_path, plugin, ends):
    outer, _ = _start(tmp_path, plugin)
    ends.append((outer, tmp_path))
    sent = time.monotonic()
    outer.send_signal(signal.SIGINT)
    out, _ = outer.communicate(timeout=30)
    assert outer.returncode == 2, out
    assert "test_w.py:12: KeyboardInterrupt" in out and "no tests ran in" in out, out  # as without the plugin
    assert time.monotonic() - sent < 10, out


@pytest.mark.parametrize("plugin", ["off", "fail"])
def test_usr1_to_the_pid_reaches_the_run_s_faulthandler_and_the_run_goes_on(tmp_path, plugin, ends):
    outer, _ = _start(tmp_path, plugin, FAULTHANDLER_CONFTEST)
    ends.append((outer, tmp_path))
    outer.send_signal(signal.SIGUSR1)
    time.sleep(1)
    assert outer.poll() is None
    rc, out = _finish(outer, tmp_path)
    assert rc == 0 and "1 passed" in out, out
    dumps = (tmp_path / "dumps").read_text()
    assert dumps.count("in test_waits") == 1, dumps  # faulthandler's traceback: the signal reached the run, once


def test_a_sigkilled_inner_pytest_kills_the_outer_with_sigkill(tmp_path, ends):
    outer, tests_pid = _start(tmp_path, "fail")
    ends.append((outer, tmp_path))
    assert tests_pid != outer.pid
    os.kill(tests_pid, signal.SIGKILL)
    out, _ = outer.communicate(timeout=30)
    assert outer.returncode == -signal.SIGKILL, out
    assert "Traceback" not in out, out
    assert wait_gone([int((tmp_path / "pids").read_text())], 10)


def test_a_stop_sent_to_the_pid_stops_the_job_and_a_continue_resumes_it(tmp_path, ends):
    outer, tests_pid = _start(tmp_path, "fail")
    ends.append((outer, tmp_path))
    outer.send_signal(signal.SIGTSTP)
    _, status = os.waitpid(outer.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status) and os.WSTOPSIG(status) == signal.SIGTSTP
    with open(f"/proc/{tests_pid}/stat") as f:
        assert f.read().rsplit(")", 1)[1].split()[0] == "T"  # the tests' pytest is stopped too
    outer.send_signal(signal.SIGCONT)
    rc, out = _finish(outer, tmp_path)
    assert rc == 0 and "1 passed" in out, out


# The parent a terminal gives a run: pty.fork makes pytest a session leader with the terminal as its own.
TERMINAL_DRIVER = r"""
import os, pty, sys, time
argv, here = sys.argv[1:], os.getcwd()
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
out = b""
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(here, "ready")) and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(0.3)
os.write(fd, b"\x03")
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.stdout.write("\nstatus %d\n" % os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("plugin", ["off", "fail"])
def test_ctrl_c_from_a_terminal_interrupts_the_run_once(tmp_path, plugin):
    # Ctrl-C is the kernel's SIGINT to the terminal's foreground group: the outer pytest and the subreaper get
    # it too and must not pass it on (a second SIGINT would interrupt pytest's summary).
    (tmp_path / "test_w.py").write_text(textwrap.dedent(WAITS))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--proctree-leaks", plugin]
    if not _entry_point_registered():
        argv[3:3] = ["-p", "proctree.pytest_plugin"]
    r = subprocess.run(
        [sys.executable, "-c", TERMINAL_DRIVER, *argv],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=_PROCTREE_HOME, PYTHONDONTWRITEBYTECODE="1"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout)  # the terminal's colours
    assert out.endswith("status 2\n"), out + r.stderr
    assert (tmp_path / "helper").read_text() != "" or plugin == "off"
    assert "test_w.py:12: KeyboardInterrupt" in out and "no tests ran" in out, out
    assert "Traceback" not in out, out
    pid = int((tmp_path / "pids").read_text())
    with contextlib.suppress(proctree.NoSuchProcess, ProcessLookupError):
        if proctree.cmdline(pid) == ["sleep", "300"]:  # without the plugin the interrupted test leaves it
            os.kill(pid, signal.SIGKILL)
    assert wait_gone([pid], 10)
