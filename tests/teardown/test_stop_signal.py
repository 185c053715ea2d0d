"""One polite stop signal, the caller's choice: a graceful drain is never cut by a second one.

A "second TERM forces" server (support/stopkit.py) runs behind a shell
wrapper, so the shell's exit makes the keeper's "end what it left" sweep and
the owner's teardown meet on it: each path must leave it to drain. Through
spawn() in every mode (pty too), Tree.terminate, a forwarded signal and
terminate_tree; the server writes every signal it gets to a log, which the
tests read.
"""

import asyncio
import signal
import subprocess
import time

import pytest

import proctree
from proctree._teardown import many as _many
from support.spawnkit import ALL_MODES, alive
from support.stopkit import events, shell_line, wait_ready, write_server


@pytest.fixture
def server(tmp_path):
    return write_server(tmp_path)


def start(trees, server, log, mode, name="SIGTERM", argv=None, **kw):
    cmd = argv or ["sh", "-c", shell_line(server, log, name)]
    t = proctree.spawn(cmd, contain=mode, **kw)
    trees.append(t)
    return t, wait_ready(log)


@pytest.mark.parametrize("pty", [False, True], ids=["pipes", "pty"])
@pytest.mark.parametrize("mode", ALL_MODES)
def test_terminate_lets_a_shell_wrapped_server_drain(trees, server, tmp_path, mode, pty):
    log = str(tmp_path / "log")
    t, pid = start(trees, server, log, mode, pty=pty)
    rep = t.terminate(grace=10)
    assert events(log) == ["SIGTERM", "drained"], "the drain was cut (or the stop signal came twice)"
    assert rep.ok and not rep.killed, "a process that exits within the grace is never sent SIGKILL"
    assert rep.signals.get(pid) == "SIGTERM"
    assert rep.to_dict()["signals"][str(pid)] == "SIGTERM"
    assert not alive(pid)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_forwarded_stop_then_terminate_signals_once(trees, server, tmp_path, mode):
    """`proctree run`'s path: TERM forwarded to the command's group, the shell exits, then the teardown."""
    log = str(tmp_path / "log")
    t, pid = start(trees, server, log, mode, keep_orphans=True)
    t.send_signal(signal.SIGTERM)
    t.wait(timeout=10)  # the shell ended on the TERM; the server drains on
    rep = t.terminate(grace=10)
    assert events(log) == ["SIGTERM", "drained"]
    assert rep.ok and not rep.killed
    assert rep.signals.get(pid) == "SIGTERM"


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_forwarded_stop_then_the_keepers_own_sweep_signals_once(trees, server, tmp_path, mode):
    """The shell exits on a forwarded TERM; the keeper's "end what it left" sweep sends the server no second one."""
    log = str(tmp_path / "log")
    t, pid = start(trees, server, log, mode)
    t.send_signal(signal.SIGTERM)
    t.wait(timeout=10)
    t.join(timeout=10)  # the keeper's sweep has ended the tree
    assert events(log) == ["SIGTERM", "drained"]


@pytest.mark.parametrize("mode", ALL_MODES)
def test_stop_signal_sigint_reaches_a_sigint_only_server(trees, server, tmp_path, mode):
    log = str(tmp_path / "log")
    t, pid = start(trees, server, log, mode, name="SIGINT", stop_signal="INT")
    assert t.terminate_signal == signal.SIGINT
    rep = t.terminate(grace=10)
    assert events(log) == ["SIGINT", "drained"]
    assert rep.ok and not rep.killed and rep.signals.get(pid) == "SIGINT"


@pytest.mark.parametrize("mode", ALL_MODES)
def test_terminate_signal_argument_overrides_the_trees(trees, server, tmp_path, mode):
    log = str(tmp_path / "log")
    t, pid = start(trees, server, log, mode, name="SIGUSR1")
    rep = t.terminate(grace=10, signal=signal.SIGUSR1)
    assert events(log) == ["SIGUSR1", "drained"]
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


def test_terminate_tree_sends_no_hangup_by_default(tmp_path, server):
    """A server that handles only SIGTERM (SIGHUP would kill it at once) drains under terminate_tree."""
    log = str(tmp_path / "log")
    p = subprocess.Popen(["sh", "-c", shell_line(server, log)], start_new_session=True)
    try:
        pid = wait_ready(log)
        rep = proctree.terminate_tree(p.pid, grace=10)
        assert events(log) == ["SIGTERM", "drained"]
        assert rep.ok and not rep.killed and rep.signals.get(pid) == "SIGTERM"
        assert "not hung up" in rep.extra["group"]
    finally:
        if p.poll() is None:
            proctree.terminate_tree(p.pid, grace=0)
        p.wait()


def test_terminate_tree_hangup_true_hangs_up_first(tmp_path, server):
    log = str(tmp_path / "log")
    p = subprocess.Popen(["sh", "-c", shell_line(server, log)], start_new_session=True)
    try:
        wait_ready(log)
        rep = proctree.terminate_tree(p.pid, grace=10, hangup=True)
        assert events(log) == [], "SIGHUP (not handled) ended it before any stop signal was heard"
        assert rep.ok and rep.extra["group"].startswith("SIGHUP to group")
    finally:
        if p.poll() is None:
            proctree.terminate_tree(p.pid, grace=0)
        p.wait()


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_counting_server_sees_exactly_one_stop_signal_from_every_path(trees, server, tmp_path, mode):
    """The server ignores nothing and counts: after terminate and the keeper's exit, one SIGTERM in all."""
    log = str(tmp_path / "log")
    t, pid = start(trees, server, log, mode)
    t.terminate(grace=10)
    time.sleep(0.2)  # nothing may arrive late either (the keeper is gone by now)
    assert events(log).count("SIGTERM") == 1 and "forced" not in events(log)


def test_terminate_tree_async_and_end_trees_take_the_signal(tmp_path, server):
    log_a, log_b = str(tmp_path / "a"), str(tmp_path / "b")
    a = subprocess.Popen(["sh", "-c", shell_line(server, log_a, "SIGINT")], start_new_session=True)
    b = subprocess.Popen(["sh", "-c", shell_line(server, log_b, "SIGUSR2")], start_new_session=True)
    try:
        wait_ready(log_a)
        wait_ready(log_b)
        rep = asyncio.run(proctree.terminate_tree_async(a.pid, grace=10, signal="INT"))
        assert events(log_a) == ["SIGINT", "drained"] and rep.ok and not rep.killed
        [rep_b] = _many.end_trees([proctree.proc(b.pid)], grace=10, signal=signal.SIGUSR2)
        assert events(log_b) == ["SIGUSR2", "drained"] and rep_b.ok and not rep_b.killed
    finally:
        for p in (a, b):
            if p.poll() is None:
                proctree.terminate_tree(p.pid, grace=0)
            p.wait()


@pytest.mark.parametrize("mode", ALL_MODES)
def test_tree_terminate_async_takes_the_signal(trees, server, tmp_path, mode):
    log = str(tmp_path / "log")
    t, pid = start(trees, server, log, mode, name="SIGINT")
    rep = asyncio.run(t.terminate_async(grace=10, signal="SIGINT"))
    assert events(log) == ["SIGINT", "drained"]
    assert rep.ok and not rep.killed and rep.signals.get(pid) == "SIGINT"


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_cancelled_terminate_async_still_kills_at_once(trees, server, tmp_path, mode):
    """The stop fd beside the blocking engine's waits: a cancel skips the rest of the grace."""
    log = str(tmp_path / "log")
    t, pid = start(trees, server, log, mode, name="IGNORE")

    async def main():
        task = asyncio.ensure_future(t.terminate_async(grace=60))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    t0 = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - t0 < 20 and not alive(pid)
