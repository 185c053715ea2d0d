"""The keeper's side of the stop-signal rule (protocol v6), through the protocol alone.

A command that exits by itself and leaves a "second stop signal forces"
server (support/stopkit.py) behind: the keeper's own sweep says `sweep`
before it signals, and sends the server the tree's stop signal once; held
by its owner (HOLD_SIGNAL, answered `held`), it sends nothing at all and
waits for the tree to end.
"""

import os
import signal
import sys

import pytest

from proctree._containment import protocol
from proctree._containment.protocol import Done, Exit, Held, Ok, Sweep
from support.spawnkit import ALL_MODES, KeeperRun, alive, new_cgroup
from support.stopkit import events, wait_events, wait_ready, write_server


@pytest.fixture
def keeper():
    runs = []

    def start(mode, argv, **kw):
        cgroup = new_cgroup(f"hold-{len(runs)}") if mode == "cgroup" else None
        run = KeeperRun(mode, argv, cgroup=cgroup, **kw)
        runs.append(run)
        return run

    yield start
    for run in runs:
        run.close()


def leaving(server, log, name="SIGTERM"):
    """sh that starts the server in the background, waits until it is ready, and exits 0, leaving it."""
    return ["/bin/sh", "-c", f"{sys.executable} {server} {log} {name} & while ! test -s {log}; do sleep 0.01; done"]


@pytest.mark.parametrize("mode", ALL_MODES)
def test_the_keepers_own_sweep_says_so_and_sends_the_stop_signal_once(keeper, tmp_path, mode):
    log = str(tmp_path / "log")
    k = keeper(mode, leaving(write_server(tmp_path), log, "SIGINT"), grace=10, stop_signal=signal.SIGINT)
    assert isinstance(k.status(), Ok)
    wait_ready(log)
    assert k.status() == Exit(0)
    assert k.status() == Sweep(), "the sweep is announced before its first signal"
    assert k.status() == Done(True)
    assert k.popen.wait(15) == 0
    assert events(log) == ["SIGINT", "drained"]


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_held_keeper_signals_nothing_and_waits_for_the_tree(keeper, tmp_path, mode):
    log = str(tmp_path / "log")
    server = write_server(tmp_path)
    fifo = str(tmp_path / "go")
    os.mkfifo(fifo)
    # The command exits only once the test writes to the fifo, after the keeper said `held`.
    argv = leaving(server, log)
    argv[2] += f"; read x < {fifo}"
    k = keeper(mode, argv, grace=0.2)
    assert isinstance(k.status(), Ok)
    pid = wait_ready(log)
    k.popen.send_signal(protocol.HOLD_SIGNAL)
    assert k.status() == Held()
    with open(fifo, "w") as f:
        f.write("go\n")
    assert k.status() == Exit(0)
    if mode == "session":
        # No subreaper, no cgroup, no terminal to hang up: the orphan is init's, and the owner ends it.
        assert k.status() == Done(False)  # held: the owner's teardown, not the keeper, knows what survived
    # Well past the keeper's grace: it sent nothing (and, but in session mode, it still waits for the tree).
    assert wait_events(log, ["x"], timeout=1.0) == []
    assert alive(pid)
    if mode != "session":
        assert k.popen.poll() is None, "a held keeper stays while the tree lives"
    os.kill(pid, signal.SIGTERM)  # the owner's part, done by hand: its one stop signal
    assert wait_events(log, ["SIGTERM", "drained"]) == ["SIGTERM", "drained"]
    if mode != "session":
        assert k.status() == Done(False)


OWNER = r"""
import sys
import proctree
mode, line = sys.argv[1], sys.argv[2]
t = proctree.spawn(["sh", "-c", line], contain=mode, grace=3)
print(t.keeper_pid, flush=True)
sys.stdin.readline()  # the test says when: the server is ready
t.terminate()  # killed by the test while the server drains
"""


@pytest.mark.parametrize("mode", ALL_MODES)
def test_an_owner_killed_during_its_teardown_leaves_the_keeper_sending_no_second_stop(tmp_path, mode):
    """The owner held the keeper and sent its SIGTERM, then died: the keeper ends the tree without another."""
    import subprocess

    from support.spawnkit import wait_gone
    from support.stopkit import shell_line

    log = str(tmp_path / "log")
    root = os.path.dirname(os.path.dirname(os.path.abspath(protocol.__file__)))
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, mode, shell_line(write_server(tmp_path), log)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.path.dirname(root)},
    )
    try:
        keeper_pid = int(owner.stdout.readline())
        pid = wait_ready(log)
        owner.stdin.write("go\n")
        owner.stdin.flush()
        assert wait_events(log, ["SIGTERM"])[:1] == ["SIGTERM"]
        owner.kill()
        owner.wait()
        assert wait_events(log, ["SIGTERM", "drained"]) == ["SIGTERM", "drained"]
        assert wait_gone([pid, keeper_pid], 15), "the keeper ended the tree and itself within its grace"
    finally:
        if owner.poll() is None:
            owner.kill()
        owner.wait()
        for f in (owner.stdin, owner.stdout):
            f.close()
