"""foreman's exit rule for `proctree up`, on synthetic plans: which end ends the run, with which status and reason."""

import pytest

from proctree._procfile.config import ProcfileService
from proctree._procfile.exitrule import ExitRule, RunEnding


def svc(name, *, can_die=False, depends_on=None):
    entry = name.split(".")[0]
    return ProcfileService(
        name=name,
        entry=entry,
        instance=int(name.split(".")[1]) if "." in name else 1,
        command="true",
        env={},
        port=5000,
        cwd="/",
        ready=None,
        depends_on=depends_on or {},
        restart="no",
        max_restarts=None,
        can_die=can_die,
    )


def exited(name, code):
    return (name, dict(failed=False, status=code, exit_code=code, how=f"exited with code {code}"))


def killed(name, sig, status):
    return (name, dict(failed=False, status=status, exit_code=None, how=f"was ended by {sig}"))


def failed(name):
    return (name, dict(failed=True, status=1, exit_code=None, how="ended"))


PLAIN = [svc("web.1"), svc("worker.1")]
CAN_DIE = [svc("web.1"), svc("setup.1", can_die=True)]
# depends_on names instances, as the plan spells them out
MIGRATE = [
    svc("db.1"),
    svc("migrate.1", depends_on={"db.1": "ready"}),
    svc("web.1", depends_on={"migrate.1": "completed"}),
]
TESTS = [svc("web.1"), svc("tests.1"), svc("tests.2")]


@pytest.mark.parametrize(
    ("services", "exit_with", "ends", "expected"),
    [
        # foreman: the first end stops everything, with its status
        (PLAIN, None, [exited("web.1", 0)], RunEnding(0, "web.1 exited with code 0")),
        (PLAIN, None, [exited("worker.1", 3)], RunEnding(3, "worker.1 exited with code 3")),
        (PLAIN, None, [killed("web.1", "SIGKILL", 137)], RunEnding(137, "web.1 was ended by SIGKILL")),
        (PLAIN, None, [failed("web.1")], RunEnding(1, "web.1 failed")),
        (PLAIN, None, [exited("nobody.1", 1)], None),  # not of the plan
        # can_die: its end is no reason to stop; once every entry has ended, the run ends with 0
        (CAN_DIE, None, [exited("setup.1", 2)], None),
        (CAN_DIE, None, [failed("setup.1")], None),
        (CAN_DIE, None, [exited("setup.1", 2), exited("web.1", 5)], RunEnding(5, "web.1 exited with code 5")),
        ([svc("a.1", can_die=True), svc("b.1", can_die=True)], None, [exited("a.1", 1), exited("b.1", 0)],
         RunEnding(0, "every entry has ended")),
        # a one-shot something waits on to complete: its exit 0 is its job done, anything else ends the run
        (MIGRATE, None, [exited("migrate.1", 0)], None),
        (MIGRATE, None, [exited("migrate.1", 1)], RunEnding(1, "migrate.1 exited with code 1")),
        (MIGRATE, None, [failed("migrate.1")], RunEnding(1, "migrate.1 failed")),
        (MIGRATE, None, [exited("migrate.1", 0), exited("db.1", 0)], RunEnding(0, "db.1 exited with code 0")),
        # --exit-with: the run ends when every instance of it has, with the first non-zero status
        (TESTS, "tests", [exited("tests.1", 0)], None),
        (TESTS, "tests", [exited("tests.1", 0), exited("tests.2", 0)], RunEnding(0, "tests.2 exited with code 0")),
        (TESTS, "tests", [exited("tests.1", 4), exited("tests.2", 0)], RunEnding(4, "tests.2 exited with code 0")),
        # ... and another entry that ends first is a failure, whatever its own status
        (TESTS, "tests", [exited("web.1", 0)], RunEnding(1, "web.1 exited with code 0 before tests ended")),
        (TESTS, "tests", [exited("web.1", 7)], RunEnding(7, "web.1 exited with code 7 before tests ended")),
        (TESTS, "tests", [failed("web.1")], RunEnding(1, "web.1 failed before tests ended")),
    ],
)  # fmt: skip
def test_exit_rule(services, exit_with, ends, expected):
    rule = ExitRule(services, exit_with)
    decisions = [rule.on_end(name, **fields) for name, fields in ends]
    assert decisions[:-1] == [None] * (len(ends) - 1)
    assert decisions[-1] == expected
