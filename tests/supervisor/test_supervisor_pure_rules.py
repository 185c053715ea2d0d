"""The supervisor's pure rules on synthetic data: dependency satisfaction and how a run ended, in words."""

import pytest

from proctree._supervisor.outcome import describe_end, describe_exit, shell_could_not_run
from proctree._supervisor.satisfaction import DependencyState, verdict


def dep(status, runs=1, completed=False, ended="exited with status 1"):
    return DependencyState("db", status, runs, completed, 2.5, ended)


@pytest.mark.parametrize(
    ("state", "condition", "expected"),
    [
        (dep("waiting", runs=0), "started", None),
        (dep("starting"), "started", True),
        (dep("stopped", runs=0, ended="was stopped"), "started", "db was stopped before it started"),
        (dep("exited"), "started", True),  # it ran: started is for good
        (dep("starting"), "ready", None),
        (dep("restarting"), "ready", None),
        (dep("ready"), "ready", True),
        (dep("running"), "ready", "db did not prove it was ready within 2.5 s (it is running)"),
        (dep("exited"), "ready", "db exited with status 1 before it was ready"),
        (dep("failed", ended="failed (boom)"), "ready", "db failed (boom) before it was ready"),
        (dep("ready"), "completed", None),
        (dep("exited", completed=True), "completed", True),
        (dep("restarting", completed=True), "completed", True),
        (dep("exited"), "completed", "db exited with status 1"),
        (dep("stopped", ended="was stopped"), "completed", "db was stopped"),
    ],
)
def test_dependency_verdict(state, condition, expected):
    assert verdict(state, condition) == expected


@pytest.mark.parametrize(
    ("status", "reason", "code", "sig", "expected"),
    [
        ("stopped", None, 0, None, "was stopped"),
        ("stopped", "why", None, "SIGTERM", "was stopped"),
        ("failed", None, 1, None, "failed"),
        ("failed", "crash loop", 1, None, "failed (crash loop)"),
        ("exited", None, 0, None, "exited with status 0"),
        ("exited", None, 3, None, "exited with status 3"),
        ("exited", None, None, "SIGKILL", "ended by SIGKILL"),
        ("exited", None, None, None, "ended (status unknown)"),
    ],
)
def test_describe_end(status, reason, code, sig, expected):
    assert describe_end(status, reason, code, sig) == expected


def test_describe_exit_prefers_the_signal():
    assert describe_exit(0, "SIGINT") == "ended by SIGINT"


@pytest.mark.parametrize(
    ("code", "last_row", "expected"),
    [
        (127, "sh: 1: nosuchcmd: not found", True),
        (127, "bash: ./x: No such file or directory", True),
        (126, "sh: 1: ./x: Permission denied", True),
        (126, "bash: ./dir: Is a directory", True),
        (126, "bash: ./x: cannot execute binary file: Exec format error", True),
        (127, "the program's own last line", False),
        (127, None, False),  # printed nothing: not the shell complaining
        (126, "not found", False),  # 126's words are other words
        (1, "not found", False),
        (None, "not found", False),
        (0, "not found", False),
    ],
)
def test_shell_could_not_run(code, last_row, expected):
    assert shell_could_not_run(code, last_row) is expected
