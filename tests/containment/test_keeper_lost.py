"""A keeper killed outright (kill -9): the owner ends its tree anyway, and never passes its death off as the command's.

The keeper watch (proctree/_containment/keeperwatch.py) sees the keeper's exit
at once; without any call from the test, every member (a TERM-ignoring setsid
daemon included) must be gone within the tree's grace + 1 s. Then wait(),
poll() and wait_async() raise KeeperLost with the owner's teardown report, and
terminate() returns that same report.
"""

import asyncio
import gc
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import proctree
from proctree._containment import keeperproc as _keeperproc
from proctree._containment import keeperwatch
from proctree._containment import protocol as _protocol
from proctree._containment import start as _start
from support.spawnkit import ALL_MODES, DAEMONIZER, alive, cgroup_dirs, read_lines, start_daemonizer, wait_gone

GRACE = 0.5


def _kill_keeper_and_time_the_end(tree, pids):
    t0 = time.monotonic()
    os.kill(tree.keeper_pid, signal.SIGKILL)  # our own unreaped child: its pid cannot be anyone else's
    gone = wait_gone(pids, GRACE + 10)
    return gone, time.monotonic() - t0


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_killed_keepers_tree_ends_within_the_grace_without_any_call(trees, pipe, mode):
    before = cgroup_dirs()
    tree, pids = start_daemonizer(trees, pipe, mode, ignore=True, grace=GRACE)
    members = [pids["cmd"], pids["daemon"]]
    assert all(alive(p) for p in members)
    gone, took = _kill_keeper_and_time_the_end(tree, members)
    assert gone, f"{mode}: the tree outlived its killed keeper"
    assert took < GRACE + 1.0, f"{mode}: took {took:.2f} s (grace {GRACE})"

    with pytest.raises(proctree.KeeperLost, match="killed by signal 9") as info:
        tree.wait(timeout=10)
    lost = info.value
    assert lost.keeper_pid == tree.keeper_pid and lost.keeper_returncode == -signal.SIGKILL
    assert isinstance(lost, subprocess.SubprocessError)
    found = {p.pid for p in lost.report.found}
    assert set(members) <= found, (members, lost.report)
    assert lost.report.ok and lost.report.extra.get("keeper_lost") is True
    with pytest.raises(proctree.KeeperLost):
        tree.poll()
    with pytest.raises(proctree.KeeperLost):
        tree.returncode  # noqa: B018 - the property raises
    assert "lost" in repr(tree)
    assert tree.terminate() is lost.report  # nothing more to end: the owner's report
    assert tree.members() == []
    assert tree.receipt is None
    assert cgroup_dirs() == before or all(d in before for d in cgroup_dirs())


@pytest.mark.parametrize("mode", ALL_MODES)
def test_wait_async_raises_keeper_lost(trees, pipe, mode):
    tree, pids = start_daemonizer(trees, pipe, mode, grace=GRACE)

    async def main():
        waiter = asyncio.ensure_future(tree.wait_async(timeout=20))
        await asyncio.sleep(0.05)
        os.kill(tree.keeper_pid, signal.SIGKILL)
        with pytest.raises(proctree.KeeperLost):
            await waiter

    asyncio.run(main())
    assert wait_gone(list(pids.values()), 5)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_waiting_thread_gets_keeper_lost_not_the_keepers_status(trees, pipe, mode):
    tree, pids = start_daemonizer(trees, pipe, mode, grace=GRACE)
    got = []

    def waiter():
        try:
            got.append(tree.wait())
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            got.append(exc)

    th = threading.Thread(target=waiter)
    th.start()
    time.sleep(0.05)
    os.kill(tree.keeper_pid, signal.SIGKILL)
    th.join(20)
    assert not th.is_alive()
    assert len(got) == 1 and isinstance(got[0], proctree.KeeperLost), got
    assert wait_gone(list(pids.values()), 5)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_keep_orphans_keeper_killed_after_the_command_ended_keeps_its_status(trees, pipe, mode):
    """The command's status was reported: wait() returns it; the orphans the keeper was waiting for are ended."""
    tree, pids = start_daemonizer(trees, pipe, mode, then="exit", keep_orphans=True, grace=GRACE)
    assert tree.wait(timeout=20) == 3
    assert alive(pids["daemon"]), "keep_orphans: the daemon runs on after the command"
    gone, took = _kill_keeper_and_time_the_end(tree, [pids["daemon"]])
    assert gone and took < GRACE + 1.0, took
    assert tree.wait(timeout=5) == 3
    rep = tree.terminate()
    assert pids["daemon"] in {p.pid for p in rep.found}


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_dropped_tree_is_still_ended_when_its_keeper_is_killed(pipe, mode):
    r, w = pipe
    tree = proctree.spawn(
        [sys.executable, "-c", "import os, sys, time; os.write(int(sys.argv[1]), b'%d\\n' % os.getpid()); "
         "time.sleep(300)", str(w)],
        contain=mode, grace=GRACE, pass_fds=(w,),
    )  # fmt: skip
    os.close(w)
    cmd = int(os.read(r, 64))
    keeper = tree.keeper_pid
    del tree
    gc.collect()
    try:
        os.kill(keeper, signal.SIGKILL)  # still our unreaped child: the watch holds its Tree
        assert wait_gone([cmd], GRACE + 10)
        deadline = time.monotonic() + 5
        while keeper in keeperwatch.instance(_keeperproc._keeper_exited).watching() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert keeper not in keeperwatch.instance(_keeperproc._keeper_exited).watching()
    finally:
        if alive(cmd):
            os.kill(cmd, signal.SIGKILL)


def test_the_watch_thread_runs_only_while_a_keeper_lives(trees):
    t = proctree.spawn(["true"])
    trees.append(t)
    assert t.wait(timeout=10) == 0
    deadline = time.monotonic() + 5
    while any(th.name == "proctree-keeper-watch" for th in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(th.name == "proctree-keeper-watch" for th in threading.enumerate())


def test_a_forked_child_forgets_its_parents_keepers(trees):
    t = proctree.spawn(["sleep", "300"])
    trees.append(t)
    watch = keeperwatch.instance(_keeperproc._keeper_exited)
    assert t.keeper_pid in watch.watching()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.write(w, b"%d" % len(watch.watching()))
        finally:
            os._exit(0)
    os.close(w)
    try:
        assert os.read(r, 16) == b"0"
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    t.terminate(0.5)
    assert t.keeper_pid not in watch.watching()


CHILD = """
import os, signal, sys, time
sys.path.insert(0, {tests!r})
import proctree
r, w = os.pipe()
t = proctree.spawn([sys.executable, "-c", "import os, sys, time; os.write(int(sys.argv[1]), b'%d\\\\n' % os.getpid()); time.sleep(300)", str(w)], grace=0.3, pass_fds=(w,))
os.close(w)
cmd = int(os.read(r, 64))
print(cmd, flush=True)
os.kill(t.keeper_pid, signal.SIGKILL)
try:
    t.wait(timeout=20)
except proctree.KeeperLost:
    print("lost", flush=True)
"""


def test_without_pidfds_the_watch_still_sees_the_keeper_die(tmp_path):
    env = dict(os.environ, PROCTREE_NO_PIDFD="1")
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/, where `support` lives
    p = subprocess.run(
        [sys.executable, "-c", CHILD.format(tests=tests)], env=env, capture_output=True, text=True, timeout=60
    )
    out = p.stdout.split()
    try:
        assert p.returncode == 0, p.stderr
        assert out[1:] == ["lost"], (p.stdout, p.stderr)
    finally:
        if out and out[0].isdigit() and alive(int(out[0])):
            os.kill(int(out[0]), signal.SIGKILL)
    assert not alive(int(out[0]))


def test_a_forked_child_cannot_use_its_parents_tree(trees):
    """The keeper is the parent's child: in a forked child every call that could reach it raises, none signals."""
    t = proctree.spawn(["sleep", "300"], contain="subreaper", grace=0.5)  # members() would walk from the keeper
    trees.append(t)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            out = []
            for call in (t.poll, t.wait, t.terminate, t.kill, lambda: t.send_signal(signal.SIGTERM)):
                try:
                    call()
                    out.append("ran")
                except RuntimeError as exc:
                    out.append("refused" if "forked child" in str(exc) else f"other {exc}")
            out.append(f"members {len(t.members())}")
            os.write(w, " ".join(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    try:
        assert os.read(r, 4096).decode() == "refused refused refused refused refused members 0"
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    assert t.poll() is None  # untouched by the child
    assert t.terminate().ok


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("when", ["at_once", "later"])
def test_a_member_that_stops_its_keeper_does_not_wedge_the_tree(trees, mode, when):
    """SIGSTOP to the keeper (a member may send it) is undone: wait() still gets the command's status."""
    pause = "" if when == "at_once" else "sleep 0.5; "  # at once: maybe before the keeper's `ok`
    t = proctree.spawn(["sh", "-c", f"{pause}kill -STOP $PPID; sleep 0.5; exit 3"], contain=mode, grace=0.5)
    trees.append(t)
    assert t.wait(timeout=30) == 3


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_tree_whose_keeper_was_stopped_is_still_torn_down(trees, mode):
    t = proctree.spawn(["sh", "-c", "kill -STOP $PPID; exec sleep 300"], contain=mode, grace=0.5)
    trees.append(t)
    pid = t.pid
    rep = t.terminate()
    assert rep.ok, rep
    assert wait_gone([pid], 10)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_keeper_killed_before_its_first_line_leaves_nothing(monkeypatch, pipe, mode):
    """The command started (a TERM-ignoring setsid daemon too), then the keeper died before the owner read `ok`.

    The first line is read for real, then the keeper is SIGKILLed and the read
    reported as end-of-file: what a keeper killed between its start of the
    command and its first line looks like. spawn() ends what was started and
    raises KeeperLost, never "exited before starting the command".
    """
    r, w = pipe
    real = _start._first_status
    seen = []

    def first_status(self, deadline, stop):
        assert isinstance(real(self, deadline, stop), _protocol.Ok)
        pids = read_lines(r, 2)
        seen.extend([pids["cmd"], pids["daemon"]])
        os.kill(self.keeper_pid, signal.SIGKILL)  # our own unreaped child
        return None

    monkeypatch.setattr(_start, "_first_status", first_status)
    before = cgroup_dirs()
    with pytest.raises(proctree.KeeperLost, match="killed by signal 9") as info:
        proctree.spawn(
            [sys.executable, "-c", DAEMONIZER, str(w), "1", "sleep"], contain=mode, pass_fds=(w,), grace=GRACE
        )
    os.close(w)
    assert seen and wait_gone(seen, 10), f"{mode}: the tree outlived its keeper killed at the start"
    assert set(seen) <= {p.pid for p in info.value.report.found}
    assert cgroup_dirs() == before


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_dropped_trees_keeper_that_ends_normally_is_reaped(mode):
    """A Tree its caller dropped: once its keeper ends the tree and exits, the watch reaps it (no zombie)."""
    t = proctree.spawn(["sleep", "0.3"], contain=mode)  # the keeper still runs when it is read here
    keeper = proctree.proc(t.keeper_pid)
    del t
    gc.collect()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if proctree.proc(keeper.pid).start_time != keeper.start_time:
                return  # reaped, and its pid already someone else's
        except proctree.NoSuchProcess:
            return  # reaped
        time.sleep(0.02)
    raise AssertionError(f"keeper {keeper.pid} was never reaped")
