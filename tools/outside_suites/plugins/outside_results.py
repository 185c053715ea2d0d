"""pytest plugin (loaded with -p): every test id's outcome, written as JSON for the runner.

One outcome per node id, the worst of its phases: error (setup or teardown
failed, or its module failed to collect), failed, xpassed, passed, xfailed,
skipped. Under pytest-xdist the controller receives every worker's reports,
so only the controller writes the file.
"""

import json
import os
from typing import Any

RANK = {"skipped": 0, "xfailed": 1, "passed": 2, "xpassed": 3, "failed": 4, "error": 5}
outcomes: dict[str, str] = {}


def _record(nodeid: str, outcome: str) -> None:
    if RANK[outcome] >= RANK[outcomes.get(nodeid, "skipped")]:
        outcomes[nodeid] = outcome


def pytest_runtest_logreport(report: Any) -> None:
    xfail = hasattr(report, "wasxfail")
    if report.failed:
        _record(report.nodeid, "failed" if report.when == "call" else "error")
    elif report.skipped:
        _record(report.nodeid, "xfailed" if xfail else "skipped")
    elif report.when == "call":
        _record(report.nodeid, "xpassed" if xfail else "passed")


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _record(f"<collect> {report.nodeid}", "error")


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    path = os.environ.get("OUTSIDE_SUITES_RESULTS")
    if not path or hasattr(session.config, "workerinput"):
        return
    with open(path, "w") as out:
        json.dump({"exitstatus": int(exitstatus), "outcomes": outcomes}, out, indent=0, sort_keys=True)
