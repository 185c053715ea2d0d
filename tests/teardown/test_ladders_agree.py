"""What the two teardown ladders must agree on, checked on real processes in both.

The ladders: the Python one (proctree/_teardown/ladder.py; a tree from its
root, machine.py, or a cgroup's listed members, listed.py) and the C keeper's
(csrc/keeper/teardown.c, run when the keeper answers its owner's death).
Whichever ends a tree, a member that lives through the polite signals hears:

  1. the stop signal, once;
  2. then SIGCONT, once (never before the stop signal: a stopped member must
     be able to act on it, and a CONT alone would reach it first);
  3. nothing more it can catch: after the grace, SIGKILL (no earlier);

and a process outside the tree (a bystander) hears nothing. The Python
ladder also spares the keeper (never signalled one by one); the C keeper is
the one process of its tree it leaves to itself.
"""

import os
import signal
import time

import pytest

import proctree
from support.spawnkit import ALL_MODES
from support.treekit import Kit, OwnerKit, SpawnedKit, alive

GRACE = 0.6
# Generous: a loaded machine delays the kill, never brings it forward.
KILL_BOUND = GRACE + 5.0

# A member that records every TERM and CONT it hears, in order, and lives through them.
RECORDER = """
say("root")
LOG = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND)
def recorder():
    for s in (signal.SIGTERM, signal.SIGCONT):
        signal.signal(s, lambda n, f: os.write(LOG, b"%d " % n))
    say("recorder")
    ready()
    idle()
child(recorder)
idle()
"""


def _heard(r):
    os.set_blocking(r, False)
    try:
        return [int(x) for x in os.read(r, 65536).split()]
    except BlockingIOError:
        return []


def _logged(path):
    with open(path, "rb") as f:
        return [int(x) for x in f.read().split()]


def _wait_gone(pid, start, bound):
    deadline = time.monotonic() + bound
    while alive(pid, start) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not alive(pid, start)


def _check_the_ladder(kit, end, log):
    """Start a recorder tree in kit, end it by end(tree), check the agreed sequence; return (tree, report).

    The recorder logs to a file (log): a keeper passes its command no descriptor but the kit's.
    """
    log.write_bytes(b"")
    bystander_r, bystander_w = os.pipe()
    bystander = os.fork()
    if bystander == 0:  # outside the tree: must hear nothing
        for s in (signal.SIGTERM, signal.SIGCONT):
            signal.signal(s, lambda n, f: os.write(bystander_w, b"%d " % n))
        while True:
            time.sleep(1000)
    try:
        tree = kit.start(RECORDER, extra_args=(log,))
        pid = tree.role("recorder")
        start = proctree.proc(pid).start_time
        t0 = time.monotonic()
        report = end(tree)
        assert _wait_gone(pid, start, KILL_BOUND), "the recorder outlived the ladder"
        took = time.monotonic() - t0
        heard = _logged(log)
        assert heard == [signal.SIGTERM, signal.SIGCONT], f"the recorder heard {heard}: the stop signal, then CONT"
        assert took >= GRACE * 0.9, f"killed after {took:.2f} s: before the grace of {GRACE} s ran out"
        assert _heard(bystander_r) == [], "the bystander was signalled"
        assert alive(bystander)
        return tree, report
    finally:
        os.kill(bystander, signal.SIGKILL)  # our own unreaped child: its pid is still its own
        os.waitpid(bystander, 0)
        os.close(bystander_r)
        os.close(bystander_w)
        kit.cleanup()


def test_the_python_ladder_from_a_root(tmp_path):
    kit = Kit()
    _, report = _check_the_ladder(kit, lambda tree: proctree.terminate_tree(tree.root, grace=GRACE), tmp_path / "log")
    assert report.ok and report.mode == "plain"


@pytest.mark.parametrize("mode", ALL_MODES)
def test_the_python_ladder_of_a_contained_tree(mode, tmp_path):
    """Tree.terminate: the cgroup's listed members in cgroup mode, a tree from the keeper otherwise."""
    kit = SpawnedKit(mode, grace=GRACE)
    tree, report = _check_the_ladder(kit, lambda tree: tree.contained.terminate(grace=GRACE), tmp_path / "log")
    assert report.ok
    keeper = tree.contained.keeper_pid
    assert keeper not in {p.pid for p in report.found}, "the keeper was taken as a member"
    assert keeper not in report.signals


@pytest.mark.parametrize("mode", ALL_MODES)
def test_the_c_keepers_ladder(mode, tmp_path):
    """The keeper answering its owner's death climbs the same ladder."""
    kit = OwnerKit(mode, grace=GRACE)

    def owner_dies(tree):
        tree.owner.kill()
        tree.owner.wait()

    _check_the_ladder(kit, owner_dies, tmp_path / "log")
