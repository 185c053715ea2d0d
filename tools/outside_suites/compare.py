"""Comparing a proctree mode's results with its baseline's, test id by test id, and reading the plugin's blame.

The measure: no test fails or errors in a proctree mode unless it also fails
or errors in the baseline; the exit status is as good as the baseline's; the
run leaves no more processes behind than the baseline did. In plugin-leak
mode the added test must error and be the only thing the plugin blames.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

BAD = ("failed", "error")
LEAK_TEST_FILE = "test_zz_proctree_injected_leak.py"
LEAK_TEST_NAME = "test_proctree_injected_leak"

# The plugin's report lines: "..., left by test <nodeid>", "left by fixture 'x' (scope s, set up for <nodeid>)",
# "left by the run", "left by an earlier run".
_BLAME = re.compile(
    r"left by (test (?P<test>\S+)|fixture '(?P<fixture>[^']+)'[^)]*set up for (?P<for>\S+?)\)|(?P<other>.+))"
)


@dataclass
class Verdict:
    ok: bool
    new_bad: dict[str, str] = field(default_factory=dict)  # test id -> outcome, bad here only
    fixed: list[str] = field(default_factory=list)  # bad in the baseline only
    missing: list[str] = field(default_factory=list)  # run by the baseline, absent here
    problems: list[str] = field(default_factory=list)  # exit status, leftovers, blame
    notes: list[str] = field(default_factory=list)  # what was checked and held, worth printing


def counts(outcomes: dict[str, str]) -> dict[str, int]:
    result: dict[str, int] = {}
    for outcome in outcomes.values():
        result[outcome] = result.get(outcome, 0) + 1
    return result


def blamed(log_text: str) -> set[str]:
    """Everything the plugin's report lines blame: test ids, 'fixture NAME (for ID)', or other owners."""
    names = set()
    for match in _BLAME.finditer(log_text):
        if match["test"]:
            names.add(match["test"].rstrip(",:"))
        elif match["fixture"]:
            names.add(f"fixture {match['fixture']} (for {match['for']})")
        else:
            names.add(match["other"].strip())
    return names


def compare(
    mode: dict[str, str],
    base: dict[str, str],
    *,
    rc: int,
    base_rc: int,
    leftovers: int,
    base_leftovers: int,
    timed_out: bool,
    flaky: tuple[str, ...] = (),
) -> Verdict:
    """The verdict for a proctree mode's outcomes against its baseline's (tests matching flaky not compared)."""
    verdict = Verdict(ok=True)
    # A run that failed only because flaky tests did: its exit status says nothing of proctree.
    only_flaky_bad = all(any(f in t for f in flaky) for t, o in mode.items() if o in BAD) and any(
        o in BAD for o in mode.values()
    )
    mode = {t: o for t, o in mode.items() if not any(f in t for f in flaky)}
    base = {t: o for t, o in base.items() if not any(f in t for f in flaky)}
    for test_id, outcome in sorted(mode.items()):
        if outcome in BAD and base.get(test_id) not in BAD:
            verdict.new_bad[test_id] = outcome
    verdict.fixed = sorted(t for t, o in base.items() if o in BAD and mode.get(t) not in BAD and t in mode)
    verdict.missing = sorted(t for t in base if t not in mode and not t.startswith("<collect>"))
    if timed_out:
        verdict.problems.append("the run hit the overall timeout")
    if rc != 0 and base_rc == 0 and not only_flaky_bad:
        verdict.problems.append(f"exit status {rc} where the baseline's is 0")
    if leftovers > base_leftovers:
        verdict.problems.append(f"left {leftovers} process(es) running, the baseline {base_leftovers}")
    if verdict.missing:
        verdict.problems.append(f"{len(verdict.missing)} test(s) the baseline ran did not run")
    verdict.ok = not verdict.new_bad and not verdict.problems
    return verdict


def compare_leak(
    mode: dict[str, str],
    base: dict[str, str],
    *,
    log_text: str,
    leftovers: int,
    base_leftovers: int,
    timed_out: bool,
    flaky: tuple[str, ...] = (),
) -> Verdict:
    """plugin-leak: the added test errors and is the only one blamed; every other test as in the baseline."""
    leak_ids = [t for t in mode if t.endswith(f"{LEAK_TEST_FILE}::{LEAK_TEST_NAME}")]
    others = {t: o for t, o in mode.items() if t not in leak_ids}
    verdict = compare(
        others,
        base,
        rc=0,
        base_rc=0,
        leftovers=leftovers,
        base_leftovers=base_leftovers,
        timed_out=timed_out,
        flaky=flaky,
    )
    if len(leak_ids) != 1:
        verdict.problems.append(f"the added leaking test ran {len(leak_ids)} times (expected once)")
    else:
        (leak_id,) = leak_ids
        if mode[leak_id] != "error":
            verdict.problems.append(f"the leaking test's outcome is {mode[leak_id]}, not error")
        names = blamed(log_text)
        others_blamed = sorted(names - {leak_id})
        if leak_id not in names:
            verdict.problems.append(f"the plugin did not blame the leaking test {leak_id}")
        if others_blamed:
            more = f" and {len(others_blamed) - 3} more" if len(others_blamed) > 3 else ""
            listed = ", ".join(others_blamed[:3]) + more
            verdict.problems.append(f"the plugin blamed {len(others_blamed)} other(s): {listed}")
        if names == {leak_id}:
            verdict.notes.append(f"the plugin blamed exactly the leaking test, {leak_id}")
    verdict.ok = not verdict.new_bad and not verdict.problems
    return verdict
