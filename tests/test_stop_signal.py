"""One polite stop signal, the caller's choice: a graceful drain is never cut by a second one.

A "second TERM forces" server (it drains for about half a second on its
first stop signal and exits 3 on a second, as Node's process.once('SIGTERM'),
gunicorn and uvicorn do) runs behind a shell wrapper, so the shell's exit
makes the keeper's "end what it left" sweep and the owner's teardown meet on
it: each path must leave it to drain. Through spawn() in every mode (pty
too), Tree.terminate and a forwarded signal; the counting server writes
every signal it gets to a log, which the tests read.
"""

import os
import signal
import sys

import pytest

import proctree
from support.spawnkit import ALL_MODES, alive, read_lines

# argv: LOG W SIGNAL-NAME. Reports "pid N" on fd W once its handler is in place.
SERVER = r"""
import os, signal, sys, time
log, w, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sig = getattr(signal, name)
got = []

def note(text):
    with open(log, "a") as f:
        f.write(text + "\n")

def on_stop(signum, frame):
    got.append(signum)
    note(signal.Signals(signum).name)
    if len(got) > 1:
        note("forced")
        os._exit(3)

signal.signal(sig, on_stop)
os.write(w, b"pid %d\n" % os.getpid())
os.close(w)
while not got:
    signal.pause()
end = time.monotonic() + 0.5
while time.monotonic() < end:
    time.sleep(0.01)
note("drained")
sys.exit(0)
"""


@pytest.fixture
def server(tmp_path):
    path = tmp_path / "server.py"
    path.write_text(SERVER)
    return str(path)


def shell_line(server, log, w, name="SIGTERM"):
    # `; true` keeps the shell as a wrapper (a lone command would be exec'ed in its place).
    return f"{sys.executable} {server} {log} {w} {name}; true"


def log_of(log):
    try:
        with open(log) as f:
            return f.read().split()
    except FileNotFoundError:
        return []


def start(trees, pipe, server, log, mode, name="SIGTERM", argv=None, **kw):
    r, w = pipe
    cmd = argv or ["sh", "-c", shell_line(server, log, w, name)]
    t = proctree.spawn(cmd, contain=mode, pass_fds=(w,), **kw)
    trees.append(t)
    os.close(w)
    pid = read_lines(r, 1)["pid"]
    return t, pid


@pytest.mark.parametrize("pty", [False, True], ids=["pipes", "pty"])
@pytest.mark.parametrize("mode", ALL_MODES)
def test_terminate_lets_a_shell_wrapped_server_drain(trees, pipe, server, tmp_path, mode, pty):
    log = str(tmp_path / "log")
    t, pid = start(trees, pipe, server, log, mode, pty=pty)
    rep = t.terminate(grace=10)
    assert log_of(log) == ["SIGTERM", "drained"], "the drain was cut (or the stop signal came twice)"
    assert rep.ok and not rep.killed, "a process that exits within the grace is never sent SIGKILL"
    assert rep.signals.get(pid) == "SIGTERM"
    assert rep.to_dict()["signals"][str(pid)] == "SIGTERM"
    assert not alive(pid)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_forwarded_stop_then_terminate_signals_once(trees, pipe, server, tmp_path, mode):
    """`proctree run`'s path: TERM forwarded to the command's group, the shell exits, then the teardown."""
    log = str(tmp_path / "log")
    t, pid = start(trees, pipe, server, log, mode, keep_orphans=True)
    t.send_signal(signal.SIGTERM)
    t.wait(timeout=10)  # the shell ended on the TERM; the server drains on
    rep = t.terminate(grace=10)
    assert log_of(log) == ["SIGTERM", "drained"]
    assert rep.ok and not rep.killed
    assert rep.signals.get(pid) == "SIGTERM"


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_forwarded_stop_then_the_keepers_own_sweep_signals_once(trees, pipe, server, tmp_path, mode):
    """The shell exits on a forwarded TERM; the keeper's "end what it left" sweep sends the server no second one."""
    log = str(tmp_path / "log")
    t, pid = start(trees, pipe, server, log, mode)
    t.send_signal(signal.SIGTERM)
    t.wait(timeout=10)
    t.join(timeout=10)  # the keeper's sweep has ended the tree
    assert log_of(log) == ["SIGTERM", "drained"]


@pytest.mark.parametrize("mode", ALL_MODES)
def test_stop_signal_sigint_reaches_a_sigint_only_server(trees, pipe, server, tmp_path, mode):
    log = str(tmp_path / "log")
    t, pid = start(trees, pipe, server, log, mode, name="SIGINT", stop_signal="INT")
    assert t.terminate_signal == signal.SIGINT
    rep = t.terminate(grace=10)
    assert log_of(log) == ["SIGINT", "drained"]
    assert rep.ok and not rep.killed and rep.signals.get(pid) == "SIGINT"


@pytest.mark.parametrize("mode", ALL_MODES)
def test_terminate_signal_argument_overrides_the_trees(trees, pipe, server, tmp_path, mode):
    log = str(tmp_path / "log")
    t, pid = start(trees, pipe, server, log, mode, name="SIGUSR1")
    rep = t.terminate(grace=10, signal=signal.SIGUSR1)
    assert log_of(log) == ["SIGUSR1", "drained"]
    assert rep.signals.get(pid) == "SIGUSR1"


@pytest.mark.parametrize("bad, exc", [("SIGKILL", ValueError), (9, ValueError), ("NOPE", ValueError), (1.5, TypeError)])
def test_a_bad_stop_signal_is_refused_before_anything_starts(bad, exc):
    with pytest.raises(exc):
        proctree.spawn(["true"], stop_signal=bad)


def test_terminate_refuses_a_bad_signal(trees):
    t = proctree.spawn(["sleep", "30"])
    trees.append(t)
    with pytest.raises(ValueError):
        t.terminate(signal="SIGSTOP")
    assert t.poll() is None


def test_terminate_tree_sends_no_hangup_by_default(tmp_path, pipe, server):
    """A server that handles only SIGTERM (SIGHUP would kill it at once) drains under terminate_tree."""
    log = str(tmp_path / "log")
    r, w = pipe
    import subprocess

    p = subprocess.Popen(["sh", "-c", shell_line(server, log, w)], pass_fds=(w,), start_new_session=True)
    try:
        os.close(w)
        pid = read_lines(r, 1)["pid"]
        rep = proctree.terminate_tree(p.pid, grace=10)
        assert log_of(log) == ["SIGTERM", "drained"]
        assert rep.ok and not rep.killed and rep.signals.get(pid) == "SIGTERM"
        assert "not hung up" in rep.extra["group"]
    finally:
        if p.poll() is None:
            proctree.terminate_tree(p.pid, grace=0)
        p.wait()
