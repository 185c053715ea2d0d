"""The native runner's trees are reapable: proctree-init and its keeper half SIGKILLed together (a group kill, the OOM
killer) leave members that carry its owner marker, which `proctree reap` proves orphaned and ends, in every mode.

Every selection is scoped with `within` to the pids the test started, so a test never selects (let alone signals)
anything else on the machine.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

import proctree
from proctree._containment.evidence import receipt
from proctree.cli import _native
from support.reapkit import COMMAND
from support.spawnkit import ALL_MODES, alive, read_lines, wait_gone

RUNNER = _native.runner_path()
pytestmark = pytest.mark.skipif(RUNNER is None, reason="proctree-init is not built here (Linux only)")


@pytest.fixture
def receipts(tmp_path, monkeypatch):
    """A receipt directory of the test's own, for the runner and the reaper alike."""
    d = tmp_path / "receipts"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("PROCTREE_RECEIPTS_DIR", str(d))
    return d


def _start_detached_runner(mode, w, started):
    """proctree-init running COMMAND, reparented away from the test process (whose subtree the reaper protects)."""
    script = 'exec "$@" </dev/null >/dev/null 2>&1 & echo $!'
    argv = [RUNNER, "--contain", mode, "--", sys.executable, "-c", COMMAND, str(w)]
    sh = subprocess.run(["sh", "-c", script, "sh", *argv], capture_output=True, text=True, timeout=30, pass_fds=(w,))
    pid = int(sh.stdout.split()[0])
    started.append((pid, proctree.proc(pid).start_time))
    return pid


def _keeper_half(runner):
    deadline = time.monotonic() + 10
    while True:
        kids = [p.pid for p in proctree.children(runner)] if alive(runner) else []
        if kids:
            return kids[0]
        assert time.monotonic() < deadline, "the runner started no keeper half"
        time.sleep(0.01)


def orphaned_native_tree(mode, started):
    """A proctree-init tree whose runner and keeper half were stopped, then SIGKILLed together: its members' pids."""
    r, w = os.pipe()
    try:
        runner = _start_detached_runner(mode, w, started)
        os.close(w)
        pids = read_lines(r, 3, timeout=20)
    finally:
        os.close(r)
    keeper = _keeper_half(runner)
    started.append((keeper, proctree.proc(keeper).start_time))
    for role in ("cmd", "scrubbed", "daemon"):
        started.append((pids[role], proctree.proc(pids[role]).start_time))
    # Stopped first, so that neither sees the other die and ends the tree itself: both killed at one instant.
    for pid in (runner, keeper):
        os.kill(pid, signal.SIGSTOP)
    for pid in (runner, keeper):
        os.kill(pid, signal.SIGKILL)
    assert wait_gone([runner, keeper], 10)
    return {pids["cmd"], pids["scrubbed"], pids["daemon"]}, (runner, keeper)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_runner_and_keeper_half_killed_together_leave_nothing_reap_cannot_end(mode, started, receipts):
    members, (runner, keeper) = orphaned_native_tree(mode, started)
    assert all(alive(p) for p in members), "the tree must outlive its runner and keeper half for this test"
    (left,) = receipt.read_all(str(receipts))[0]  # the keeper half's receipt names the runner as the owner
    assert (left.owner[0], left.keeper[0], left.mode) == (runner, keeper, mode)
    found = {o.proc.pid for o in proctree.find_orphans(within=members)}
    assert found == members
    report = proctree.reap_orphans(within=members, grace=1.0)
    assert report.ok, report
    assert wait_gone(members, 5)
    assert proctree.find_orphans(within=members) == []
    assert report.receipts_removed == (left.path,) and os.listdir(receipts) == []


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_receipt_while_the_tree_runs_and_none_after(mode, receipts):
    script = f"sleep 0.2; ls -A {receipts}; sleep 30 & sleep 0.3"
    r = subprocess.run(
        [RUNNER, "--contain", mode, "--", "sh", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    (name,) = r.stdout.split()
    assert name.endswith(".json") and "proctree-init: ended 1 process CMD left running: sleep" in r.stderr
    assert os.listdir(receipts) == []  # the tree ended: its receipt too
