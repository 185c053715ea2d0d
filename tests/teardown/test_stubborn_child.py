"""The suite's stubborn child (tests/support/stubborn.py) means what the tests that use it say: it outlives every
polite signal, sent alone or as a teardown's stop signal and hang-up, and only the kill after the grace ends it."""

import signal
import subprocess
import sys
import time

import pytest

import proctree
from support.stubborn import (
    POLITE_SIGNALS,
    ignore_polite_signals_sh,
    survives_polite_signals_argv,
    survives_polite_signals_sh,
)


def start(argv, **kw):
    """The child, once it says its polite signals are ignored, and its pid from that line."""
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, **kw)
    line = child.stdout.readline()
    assert line.startswith("up "), line
    return child, int(line.split()[1])


def alive_after(child, seconds=0.3):
    """Whether child is still running `seconds` later (a signal that ends it acts well within that)."""
    try:
        child.wait(seconds)
    except subprocess.TimeoutExpired:
        return True
    return False


def test_the_shell_form_names_the_same_signals():
    assert ignore_polite_signals_sh() == "trap '' " + " ".join(s.name[3:] for s in POLITE_SIGNALS)
    assert {signal.SIGTERM, signal.SIGINT, signal.SIGHUP} <= set(POLITE_SIGNALS)


@pytest.mark.parametrize("sig", POLITE_SIGNALS, ids=lambda s: s.name)
def test_each_polite_signal_leaves_it_running(sig):
    child, pid = start(survives_polite_signals_argv(say="up {pid}"))
    try:
        assert pid == child.pid
        child.send_signal(sig)
        assert alive_after(child)
    finally:
        child.kill()
        child.wait(10)


@pytest.mark.parametrize("sig", POLITE_SIGNALS, ids=lambda s: s.name)
def test_a_teardown_with_any_polite_stop_signal_and_a_hangup_needs_the_kill(sig):
    child, pid = start(survives_polite_signals_argv(say="up {pid}"), start_new_session=True)
    try:
        t0 = time.monotonic()
        report = proctree.terminate_tree(pid, grace=0.4, signal=sig, hangup=True)
        assert [p.pid for p in report.killed] == [pid] and not report.exited
        assert time.monotonic() - t0 >= 0.3
    finally:
        child.kill()
        child.wait(10)


def test_the_shell_line_and_the_trap_survive_too():
    line = survives_polite_signals_sh(say="up {pid}")
    shell = f"{ignore_polite_signals_sh()}; {line}; exit 0"
    child, pid = start(["sh", "-c", shell], start_new_session=True)
    try:
        for sig in POLITE_SIGNALS:
            child.send_signal(sig)  # the shell, which ignores them as its trap says
        assert alive_after(child)
        report = proctree.terminate_tree(child.pid, grace=0.4, hangup=True)
        assert {p.pid for p in report.killed} == {child.pid, pid}
    finally:
        child.kill()
        child.wait(10)
    assert sys.executable in line
