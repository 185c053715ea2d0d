"""A reaped command leaves no descriptor behind: once wait(), poll() or communicate() returns with the command
reaped, proctree holds nothing for it (trio's test_for_leaking_fds counts /proc/self/fd around a run_process).

The keeper watch closes a command's pidfd in the reaping call itself, out of its thread's epoll set first, so
numbers the kernel hands out again are never taken for the old command's exit.
"""

import os
import subprocess
import sys
import threading
import time

import pytest

import proctree

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pidfds are Linux-only")

ROUNDS = 200


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _by_wait() -> None:
    assert proctree.Popen(["true"]).wait() == 0


def _by_poll() -> None:
    p = proctree.Popen(["true"])
    while p.poll() is None:
        time.sleep(0.0005)
    assert p.returncode == 0


def _by_communicate() -> None:
    p = proctree.Popen(["echo", "hi"], stdout=subprocess.PIPE)
    assert p.communicate()[0] == b"hi\n"


@pytest.mark.parametrize("reap", [_by_wait, _by_poll, _by_communicate], ids=["wait", "poll", "communicate"])
def test_a_reaped_command_leaves_no_descriptor(reap):
    reap()  # warm-up: the holding tree and the watch's thread (their descriptors stay) are made here
    before = _fds()
    left = []
    for i in range(ROUNDS):
        reap()
        now = _fds()
        if now != before:
            left.append((i, sorted(now - before), sorted(before - now)))
    assert not left, f"{len(left)} of {ROUNDS} starts left descriptors: {left[:5]}"


def test_closed_pidfd_numbers_reused_at_once_are_never_taken_for_an_exit():
    """Reaping closes a pidfd while the watch's thread may be in epoll_wait, and the next start's pidfd takes the
    same number at once: a long command must never be ended because an exited one had its number."""
    long = proctree.Popen(["sleep", "30"])
    stop = time.monotonic() + 3.0
    errors: list[BaseException] = []

    def churn(delay: float) -> None:
        try:
            while time.monotonic() < stop:
                p = proctree.Popen(["true"])
                if delay:
                    time.sleep(delay)  # exited unreaped: the watch's thread sees it first, then wait() reaps
                assert p.wait() == 0
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(d,)) for d in (0.0, 0.0, 0.002)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors, errors
        assert long.poll() is None, "the long command was ended"
    finally:
        long.kill()
        long.wait()
