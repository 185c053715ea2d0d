"""exitwait.py's waiters, built on pidexit.ExitEvents: on real children that are killed, with and without pidfds,
plus ExitEvents itself (exits and plain readers told apart).

Every child here is the test's own, signalled only by its Popen object, and reaped by the test before it ends.
"""

import os
import select
import subprocess
import sys
import time

import pytest

import proctree
from proctree._teardown import exitwait, pidexit
from proctree._teardown import signals as _signals
from support.children import popens

LINUX = sys.platform.startswith("linux")
needs_pidfd = pytest.mark.skipif(
    not (LINUX and hasattr(os, "pidfd_open") and _signals.pidfds_available()), reason="no pidfds here"
)


@pytest.fixture
def children():
    """Start `sleep 60` children through start(); each is killed and reaped at the end."""
    with popens() as start:
        yield start


def _target(p: subprocess.Popen, with_pidfd: bool) -> _signals.Target:
    return _signals.Target(proctree.proc(p.pid), pidexit.open_pidfd(p.pid) if with_pidfd else None)


def _ready_within(waiter, seconds: float) -> list:
    """What waiter.ready() reports within seconds, sleeping on its fileno() or its poll_interval() between looks."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = waiter.ready()
        if got:
            return got
        fd = waiter.fileno()
        wait = waiter.poll_interval() or 0.05
        if fd is not None:
            select.select([fd], [], [], wait)
        else:
            time.sleep(wait)
    return []


@pytest.mark.parametrize("use_pidfd", [True, False])
def test_a_waiter_reports_each_killed_target_once_and_never_the_running_one(children, use_pidfd):
    if use_pidfd and not _signals.pidfds_available():
        pytest.skip("no pidfds here")
    waiter = exitwait.make_waiter(use_pidfd)
    ended, running = children(), children()
    targets = [_target(p, use_pidfd) for p in (ended, running)]
    try:
        if use_pidfd and LINUX:
            assert isinstance(waiter, exitwait.EventWaiter) and waiter.fileno() is not None
            assert waiter.poll_interval() is None, "every target is watched by an event"
        assert all(waiter.watch(t) for t in targets)
        assert waiter.ready() == []
        ended.kill()
        assert _ready_within(waiter, 30) == [targets[0]], "the zombie counts as ended, unreaped"
        assert ended.poll() is not None, "the waiter reaped nothing: the test's wait still finds the child"
        assert waiter.ready() == [], "reported once"
        assert len(waiter) == 1
    finally:
        waiter.close()
        for t in targets:
            pidexit.close(t.pidfd)


@needs_pidfd
def test_an_event_waiter_polls_for_a_target_without_a_pidfd(children):
    waiter = exitwait.make_waiter(True)
    p = children()
    target = _target(p, with_pidfd=False)
    try:
        assert waiter.watch(target)
        assert waiter.poll_interval() == exitwait.POLL_FIRST, "a target without an event is polled"
        p.kill()
        assert _ready_within(waiter, 30) == [target]
    finally:
        waiter.close()


def test_a_target_already_gone_is_not_watched(children):
    p = children()
    target = _target(p, with_pidfd=_signals.pidfds_available())
    p.kill()
    p.wait(10)
    waiter = exitwait.make_waiter(target.pidfd is not None)
    try:
        if target.pidfd is None:  # an event waiter takes a pidfd as it is: it turns readable at once
            assert not waiter.watch(target)
        else:
            assert waiter.watch(target) and _ready_within(waiter, 10) == [target]
    finally:
        waiter.close()
        pidexit.close(target.pidfd)


@needs_pidfd
def test_exit_events_tell_exits_from_readers(children):
    events = pidexit.ExitEvents()
    r, w = os.pipe()
    p = children()
    fd = pidexit.open_pidfd(p.pid)
    try:
        assert not events.by_pid
        events.add_reader(r)
        events.add_pidfd(fd)
        assert events.poll(0) == ([], [])
        os.write(w, b"x")
        assert events.poll(5) == ([], [r])
        os.read(r, 1)
        p.kill()
        assert events.poll(30) == ([fd], [])
        events.remove_pidfd(fd)
        events.remove_pidfd(fd)  # twice: never raises
        assert events.poll(0) == ([], [])
    finally:
        events.close()
        pidexit.close(fd)
        os.close(r)
        os.close(w)
