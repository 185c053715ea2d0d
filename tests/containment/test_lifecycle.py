"""A Tree's lifecycle (proctree/_containment/lifecycle.py) on synthetic status lines: every order, no process."""

import itertools

import pytest

from proctree._containment import protocol
from proctree._containment.lifecycle import Lifecycle, Phase

EXIT_0 = protocol.Exit(0)
EXIT_9 = protocol.Exit(9)  # a wait status: killed by SIGKILL
LINES = {
    "sweep": protocol.Sweep(),
    "held": protocol.Held(),
    "done": protocol.Done(True),
    "exit": EXIT_0,
    "stopped": protocol.Stopped(19),
}


@pytest.mark.parametrize(
    "lines, phase, swept, answered",
    [
        ([], Phase.RUNNING, False, False),
        (["exit"], Phase.RUNNING, False, False),
        (["exit", "sweep"], Phase.SWEEPING, True, False),
        (["exit", "sweep", "done"], Phase.DONE, True, True),
        (["held"], Phase.HELD, False, True),
        (["held", "exit", "done"], Phase.DONE, False, True),
        # A hold answered during the keeper's own sweep: it signals nothing more.
        (["exit", "sweep", "held"], Phase.HELD, True, True),
        # A late sweep line after held, or anything after done, moves nothing back.
        (["held", "sweep"], Phase.HELD, True, True),
        (["done", "held", "sweep"], Phase.DONE, True, True),
        (["stopped", "stopped"], Phase.RUNNING, False, False),
    ],
)
def test_the_phase_only_moves_forward(lines, phase, swept, answered):
    life = Lifecycle()
    for name in lines:
        life.heard(LINES[name])
    assert (life.phase, life.swept, life.answered_hold) == (phase, swept, answered)
    assert life.done is (phase is Phase.DONE)
    assert life.sweeping is (phase is Phase.SWEEPING)


@pytest.mark.parametrize("order", list(itertools.permutations(["sweep", "held", "done"])))
def test_done_is_final_in_every_order(order):
    life = Lifecycle()
    for name in order:
        life.heard(LINES[name])
    assert life.phase is Phase.DONE


def test_the_first_exit_status_is_the_commands():
    life = Lifecycle()
    assert life.heard(EXIT_9) == 9
    assert life.heard(EXIT_0) == 0  # each line says what it carries
    assert life.status == 9  # but the command's is the first


def test_a_lost_keeper_keeps_a_status_already_known():
    life = Lifecycle()
    life.heard(EXIT_0)
    life.lose(1234, -9)
    assert life.lost is None and life.status == 0


def test_a_lost_keeper_carries_the_recovery_report():
    from proctree import TeardownReport

    life = Lifecycle()
    life.lose(1234, -9)
    assert life.lost is not None and life.lost.report is None
    first = life.lost
    life.lose(1234, -9)
    assert life.lost is first  # lost once
    report = TeardownReport(root=None)
    life.recover(report)
    assert life.recovery is report and life.lost.report is report
    assert not life.recovered.is_set()  # the caller says when the recovery is over


@pytest.mark.parametrize(
    "lines, stops, last",
    [
        ([], 0, None),
        (["exit", "done"], 0, None),
        ([protocol.Stopped(19)], 1, 19),
        ([protocol.Stopped(19), protocol.Stopped(20), "exit"], 2, 20),  # the last stop's signal counts
        (["held", protocol.Stopped(21), "done"], 1, 21),  # a stop is counted in any phase
    ],
)
def test_the_lifecycle_counts_the_stops_reported(lines, stops, last):
    life = Lifecycle()
    for line in lines:
        life.heard(LINES[line] if isinstance(line, str) else line)
    assert (life.stops, life.stop_signal) == (stops, last)
