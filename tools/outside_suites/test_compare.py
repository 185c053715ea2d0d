"""The runner's verdict logic on synthetic results (run by .ci/run before the suites)."""

from typing import Any

import pytest
from compare import blamed, compare, compare_leak
from projects import MODES, PROJECTS, REQUIRED, with_baselines

LEAK = "tests/test_zz_proctree_injected_leak.py::test_proctree_injected_leak"
CLEAN: dict[str, Any] = {"leftovers": 0, "base_leftovers": 0, "timed_out": False}


@pytest.mark.parametrize(
    ("mode", "base", "rc", "base_rc", "new_bad", "ok"),
    [
        ({"a": "passed", "b": "failed"}, {"a": "passed", "b": "failed"}, 1, 1, {}, True),
        ({"a": "failed"}, {"a": "passed"}, 1, 0, {"a": "failed"}, False),
        ({"a": "error"}, {"a": "skipped"}, 1, 0, {"a": "error"}, False),
        ({"a": "passed"}, {"a": "failed"}, 0, 1, {}, True),  # better is fine
        ({"a": "passed"}, {"a": "passed"}, 1, 0, {}, False),  # a run that fails with every test passing
        ({"a": "passed"}, {"a": "passed", "b": "passed"}, 0, 0, {}, False),  # b did not run
        ({"a": "xfailed", "n": "error"}, {"a": "xfailed"}, 1, 0, {"n": "error"}, False),  # a test stock lacks
    ],
)
def test_compare(mode, base, rc, base_rc, new_bad, ok):
    verdict = compare(mode, base, rc=rc, base_rc=base_rc, **CLEAN)
    assert verdict.new_bad == new_bad
    assert verdict.ok is ok


def test_flaky_tests_are_not_compared():
    verdict = compare(
        {"t[a]": "failed", "u": "passed"}, {"t[a]": "passed", "u": "passed"}, rc=1, base_rc=1, flaky=("t[",), **CLEAN
    )
    assert verdict.ok and not verdict.new_bad


def test_a_run_failed_by_flaky_tests_alone_is_not_worse_for_its_exit_status():
    base = {"t[a]": "passed", "u": "passed"}
    assert compare({"t[a]": "failed", "u": "passed"}, base, rc=1, base_rc=0, flaky=("t[",), **CLEAN).ok
    assert not compare({"t[a]": "failed", "u": "failed"}, base, rc=1, base_rc=0, flaky=("t[",), **CLEAN).ok
    assert not compare({"t[a]": "passed", "u": "passed"}, base, rc=1, base_rc=0, flaky=("t[",), **CLEAN).ok


def test_leftovers_and_timeouts_are_worse():
    same = {"a": "passed"}
    assert not compare(same, same, rc=0, base_rc=0, leftovers=1, base_leftovers=0, timed_out=False).ok
    assert compare(same, same, rc=0, base_rc=0, leftovers=1, base_leftovers=1, timed_out=False).ok
    assert not compare(same, same, rc=0, base_rc=0, leftovers=0, base_leftovers=0, timed_out=True).ok


REPORT = f"""
_______________________ ERROR at teardown of test_proctree_injected_leak ________________________
proctree: processes left running, now ended:
  pid 3476 (sleep), running 0.0 s: 'sleep 600', left by test {LEAK}
  pid 3480 (sleep), running 0.0 s: 'sleep 601', left by test {LEAK}
"""


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (REPORT, {LEAK}),
        (
            "  pid 9 (x), running 1.0 s: 'x', left by fixture 'server' (scope module, set up for t.py::a)",
            {"fixture server (for t.py::a)"},
        ),
        ("  pid 9 (python), running 1.0 s: 'python -c ...', left by the run", {"the run"}),
        ("no report at all", set()),
    ],
)
def test_blamed(text, names):
    assert blamed(text) == names


def test_leak_verdict():
    base = {"a": "passed"}
    exact = compare_leak({"a": "passed", LEAK: "error"}, base, log_text=REPORT, **CLEAN)
    assert exact.ok and exact.notes == [f"the plugin blamed exactly the leaking test, {LEAK}"]
    blamed_more = REPORT + "  pid 7 (python), running 2.0 s: 'python -u -c import sys', left by test t.py::a\n"
    assert not compare_leak({"a": "passed", LEAK: "error"}, base, log_text=blamed_more, **CLEAN).ok
    assert not compare_leak({"a": "passed", LEAK: "passed"}, base, log_text="", **CLEAN).ok
    assert not compare_leak({"a": "error", LEAK: "error"}, base, log_text=REPORT, **CLEAN).ok


def test_tables_are_consistent():
    for name, mode in REQUIRED:
        assert mode in PROJECTS[name].modes, (name, mode)
    for project in PROJECTS.values():
        for mode in project.modes:
            assert MODES[mode].baseline is None or MODES[mode].baseline in project.modes
            assert not MODES[mode].leak or project.leak_dir
    assert with_baselines(["plugin-n2", "swap"]) == ["stock-n2", "stock", "plugin-n2", "swap"]
