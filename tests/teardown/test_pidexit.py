"""pidexit.py, the one place that knows how a pid's exit is waited for: on real children that exit, are killed, are
reaped elsewhere, and whose pid is reused (in a fresh pid namespace with a small pid_max), plus table-driven checks
of each form with and without pidfds, epoll and waitid.

Every child here is the test's own, signalled only by its Popen object (or, in the namespace, by its own pid there),
and reaped by the test before it ends.
"""

import asyncio
import os
import select
import signal
import subprocess
import sys
import threading
import time

import pytest

import proctree
from proctree._teardown import pidexit
from proctree._teardown import signals as _signals
from support.children import popens
from support.pidspace import SMALL_PID_MAX
from support.treekit import run_ns_json

LINUX = sys.platform.startswith("linux")
needs_pidfd = pytest.mark.skipif(
    not (LINUX and hasattr(os, "pidfd_open") and _signals.pidfds_available()), reason="no pidfds here"
)
needs_waitid = pytest.mark.skipif(not hasattr(os, "waitid"), reason="no os.waitid here (macOS before Python 3.13)")


@pytest.fixture
def children():
    """Start children through start(args, **kw); each is killed and reaped at the end."""
    with popens() as start:
        yield start


@pytest.fixture
def no_pidfds(monkeypatch):
    """Every open_pidfd() answers None, as where pidfds are missing (the probe is taken as failed)."""
    monkeypatch.setattr(_signals, "_pidfd_ok", False)


def _zombie(p: subprocess.Popen) -> None:
    """Block until our child p has exited, leaving it a zombie (reaping nothing)."""
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)


# -- open_pidfd, exited, wait ---------------------------------------------------
@needs_pidfd
@pytest.mark.parametrize(
    "end",
    ["exits", "killed", "zombie reaped elsewhere"],
)
def test_a_pidfd_turns_readable_once_its_child_ends(children, end):
    p = children(["sh", "-c", "read x"], stdin=subprocess.PIPE)
    fd = pidexit.open_pidfd(p.pid)
    assert fd is not None and fd > 2
    try:
        assert not pidexit.exited(fd)
        assert not pidexit.wait(fd, 0.05)
        if end == "exits":
            p.stdin.close()  # its read ends: it exits by itself
        else:
            p.send_signal(signal.SIGKILL)
        assert pidexit.wait(fd, 10)
        assert pidexit.exited(fd)
        assert pidexit.child_exited(p.pid), "a zombie is exited"
        assert os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None, "it was reaped"
        if end == "zombie reaped elsewhere":
            os.waitpid(p.pid, 0)  # reaped behind its Popen's back, as a waitpid(-1) child watcher would
            p.returncode = -9
            assert pidexit.exited(fd), "the pidfd still says exited once reaped"
            assert pidexit.child_exited(p.pid), "a reaped child reads as exited"
    finally:
        pidexit.close(fd)


@needs_pidfd
def test_open_pidfd_is_none_for_a_gone_pid_and_for_a_wrong_start_time(children):
    p = children()
    start = proctree.proc(p.pid).start_time
    wrong = pidexit.open_pidfd(p.pid, start + 1)
    assert wrong is None, "a pidfd not pinned to the start time asked for"
    right = pidexit.open_pidfd(p.pid, start)
    assert right is not None
    pidexit.close(right)
    p.kill()
    p.wait(10)
    assert pidexit.open_pidfd(p.pid, start) is None, "a pidfd on a reaped child"


def test_open_pidfd_is_none_without_pidfds(children, no_pidfds):
    p = children()
    assert pidexit.open_pidfd(p.pid) is None
    assert pidexit.open_pidfd(p.pid, proctree.proc(p.pid).start_time) is None


def test_close_takes_none_and_a_closed_fd():
    r, w = os.pipe()
    os.close(w)
    pidexit.close(r)
    pidexit.close(r)  # closed already: no exception
    pidexit.close(None)


# -- child_exited: with waitid, and by the table alone -----------------------------
@pytest.mark.parametrize("waitid", [True, False], ids=["waitid", "table"])
@pytest.mark.parametrize("state, expected", [("running", False), ("zombie", True), ("reaped", True)])
def test_child_exited_reaps_nothing(children, monkeypatch, waitid, state, expected):
    if waitid and not hasattr(os, "waitid"):
        pytest.skip("no os.waitid here")
    monkeypatch.setattr(pidexit, "_HAS_WAITID", waitid and hasattr(os, "waitid"))
    p = children()
    if state != "running":
        p.kill()
        _zombie(p)
    if state == "reaped":
        p.wait(10)
    assert pidexit.child_exited(p.pid) is expected
    if state == "zombie":
        assert os.waitpid(p.pid, os.WNOHANG)[0] == p.pid, "child_exited() reaped the zombie"
        p.returncode = -9


# -- the loop reader and the thread -------------------------------------------------
@needs_pidfd
def test_the_loop_reader_calls_back_on_the_loop_and_closes_its_pidfd(children):
    p = children()

    async def main():
        loop = asyncio.get_running_loop()
        called = loop.create_future()
        held = _pidfds()
        assert pidexit.add_exit_reader(loop, p.pid, lambda: called.set_result(threading.get_ident()))
        assert _pidfds() == held + 1
        p.kill()
        ident = await asyncio.wait_for(called, 10)
        assert _pidfds() == held, "its pidfd is left open"
        return ident

    assert asyncio.run(main()) == threading.get_ident(), "called off the loop's thread"
    assert os.waitpid(p.pid, os.WNOHANG)[0] == p.pid, "the reader reaped the child"
    p.returncode = -9


def _pidfds() -> int:
    """How many pidfds this process holds."""
    held = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            held += os.readlink(f"/proc/self/fd/{name}") == "anon_inode:[pidfd]"
        except OSError:
            pass  # the listing's own descriptor, closed by now
    return held


def test_the_loop_reader_adds_nothing_without_a_pidfd(children, no_pidfds):
    p = children()

    async def main():
        return pidexit.add_exit_reader(asyncio.get_running_loop(), p.pid, lambda: None)

    assert asyncio.run(main()) is False


@needs_waitid
@pytest.mark.parametrize("state", ["running", "reaped"])
def test_the_thread_calls_back_once_the_child_exited_and_reaps_nothing(children, state):
    p = children()
    if state == "reaped":
        p.kill()
        p.wait(10)
    called = threading.Event()
    pidexit.call_when_child_exited(p.pid, called.set, name="test-exit")
    if state == "running":
        assert not called.wait(0.2), "called before the child exited"
        p.kill()
    assert called.wait(10)
    if state == "running":
        assert os.waitpid(p.pid, os.WNOHANG)[0] == p.pid, "the thread reaped the child"
        p.returncode = -9


# -- ExitSet ------------------------------------------------------------------------
class _W:
    def __init__(self, pid, pidfd):
        self.pid = pid
        self.pidfd = pidfd


def _exit_set_cases():
    cases = ["no pidfds"]
    if LINUX and hasattr(os, "pidfd_open"):
        cases += ["epoll", "poll"]
    return cases


@pytest.mark.parametrize("how", _exit_set_cases())
def test_exit_set_proves_exits_by_event_and_leaves_the_rest_to_the_table(children, monkeypatch, how):
    if how == "no pidfds":
        monkeypatch.setattr(_signals, "_pidfd_ok", False)
    elif not _signals.pidfds_available():
        pytest.skip("no pidfds here")
    if how == "poll":
        monkeypatch.delattr(select, "epoll")
    ended, running = children(), children()
    watched = [_W(p.pid, pidexit.open_pidfd(p.pid)) for p in (ended, running)]
    exits = pidexit.ExitSet()
    try:
        for w in watched:
            exits.add(w.pid, w.pidfd)
        assert exits.sees_new_unwoken
        ended.kill()
        _zombie(ended)
        t0 = time.monotonic()
        proven, maybe = exits.wait(watched, 30)
        if how == "no pidfds":
            assert proven == [] and maybe == watched
            assert time.monotonic() - t0 < 10, "no event: the wait is bounded by POLL_FALLBACK"
        else:
            assert proven == [watched[0]] and maybe == []
            exits.remove(watched[0].pidfd)
        exits.wake()
        t0 = time.monotonic()
        proven, maybe = exits.wait(watched[1:], None)
        assert proven == [] and time.monotonic() - t0 < 10, "a wake() ends the wait"
        assert exits.own_fds() >= {exits.wake_r, exits.wake_w}
    finally:
        exits.close()
        for w in watched:
            pidexit.close(w.pidfd)
    assert exits.own_fds() == set()
    exits.close()  # twice: nothing left to close


@needs_pidfd
def test_exit_set_takes_pidfds_given_when_made(children):
    p = children()
    fd = pidexit.open_pidfd(p.pid)
    exits = pidexit.ExitSet([fd])
    try:
        p.kill()
        proven, _ = exits.wait([_W(p.pid, fd)], 30)
        assert [w.pid for w in proven] == [p.pid]
    finally:
        exits.close()
        pidexit.close(fd)


# -- a reused pid: a fresh pid namespace with a small pid_max -------------------------
REUSE = (
    SMALL_PID_MAX
    + r"""
from proctree._teardown import pidexit

def fork_waiting(r):
    pid = os.fork()
    if pid == 0:
        os.read(r, 1)
        os._exit(0)
    return pid

r, w = os.pipe()
while True:  # past the reserved pids: after a wrap the kernel hands out 300..499 only
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    if pid >= 320:
        break
a = fork_waiting(r)
a_start = proctree.proc(a).start_time
fd_a = pidexit.open_pidfd(a)
age_past_one_tick(proctree.proc(a))
os.kill(a, signal.SIGKILL)  # our own child, in our own namespace
os.waitpid(a, 0)
b = None
for _ in range(5000):  # until a child of ours takes a's pid again
    pid = os.fork()
    if pid == 0:
        if os.getpid() == a:
            os.read(r, 1)
        os._exit(0)
    if pid == a:
        b = pid
        break
    os.waitpid(pid, 0)
if b is None:
    done(skip="the pid was not reused")
    sys.exit(0)

class W:
    def __init__(self, pid, pidfd):
        self.pid, self.pidfd = pid, pidfd

exits = pidexit.ExitSet()
exits.add(a, fd_a)
proven, maybe = exits.wait([W(a, fd_a)], 5)
fd_b = pidexit.open_pidfd(b)
result = dict(
    old_pidfd_exited=pidexit.exited(fd_a),
    set_proves_old=len(proven) == 1,
    pinned_to_old_start=pidexit.open_pidfd(b, a_start),
    new_pidfd_running=fd_b is not None and not pidexit.exited(fd_b),
    new_child_exited=pidexit.child_exited(b),
    new_start_differs=proctree.proc(b).start_time != a_start,
)
os.kill(b, signal.SIGKILL)
os.waitpid(b, 0)
done(**result)
"""
)


@needs_pidfd
def test_a_reused_pid_is_never_taken_for_the_process_that_held_it():
    got = run_ns_json(REUSE)
    if "skip" in got:
        pytest.skip(got["skip"])
    assert got == dict(
        old_pidfd_exited=True,
        set_proves_old=True,
        pinned_to_old_start=None,
        new_pidfd_running=True,
        new_child_exited=False,
        new_start_differs=True,
    )


def test_without_waitid_the_thread_calls_back_at_once_for_the_callback_to_wait(children, monkeypatch):
    # macOS before Python 3.13: no way to wait without reaping, so the callback (exitwatch's waitpid) waits itself.
    monkeypatch.setattr(pidexit, "_HAS_WAITID", False)
    p = children()
    called = threading.Event()
    pidexit.call_when_child_exited(p.pid, called.set, name="test-exit")
    assert called.wait(10)
    assert p.poll() is None, "the thread reaped or ended the child"
