"""sessions.run_suite on real processes: what a run leaves is found (by session or by marker) and ended."""

import os
import sys
import time
from pathlib import Path

from sessions import run_suite


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def test_leftovers_in_the_session_and_outside_it_are_found_and_ended(tmp_path):
    # one stays in the run's session; one leaves it (setsid) but keeps the marker in its environment
    script = "sleep 301 & setsid sleep 302 & exit 0"
    run = run_suite(["sh", "-c", script], tmp_path, dict(os.environ), 30, tmp_path / "log")
    assert run.returncode == 0 and not run.timed_out
    assert sorted(p.cmdline for p in run.leftovers) == ["sleep 301", "sleep 302"]
    deadline = time.monotonic() + 5
    while any(_alive(p.pid) for p in run.leftovers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p.pid) for p in run.leftovers)


def test_a_run_over_its_time_is_ended(tmp_path):
    run = run_suite(["sleep", "300"], tmp_path, dict(os.environ), 0.5, tmp_path / "log")
    assert run.timed_out and run.returncode == -9 and run.wall < 10


def test_a_clean_run_leaves_nothing(tmp_path):
    run = run_suite([sys.executable, "-c", "print('hi')"], tmp_path, dict(os.environ), 30, tmp_path / "log")
    assert run.returncode == 0 and run.leftovers == []
    assert (tmp_path / "log").read_text() == "hi\n"
