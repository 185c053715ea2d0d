"""Benchmark for the pytest plugin's per-test cost, measured side by side in one run.

    python benchmarks/bench_pytest_plugin.py [--rounds N] [--tests N] [--markdown]

With 2,000 extra processes on the machine (sleepers forked by a small C
helper), one suite of N (1,000) trivial tests is run, interleaved round by
round, three ways:

  (a) plain pytest;
  (b) pytest --proctree-leaks=fail (the plugin: a mark before each test, a
      comparison after it: a walk of pytest's own descendants, no table scan);
  (c) what projects write by hand: an autouse fixture that lists every
      process whose parent is init with psutil before and after each test
      (mlflow's PPID=1 orphan tracker). It only counts what it sees: on a
      shared machine it also sees orphans of processes other users run, and
      would blame the tests for them.

Prints the medians of the whole runs, the per-test overhead of (b) and (c)
over (a), and the plugin's target (under 0.5 ms a test). The crowd's
processes have PR_SET_PDEATHSIG and are ended in a finally block. Linux only.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from _harness import Crowd, build, table  # noqa: E402

import proctree  # noqa: E402

FLOOR_C = "int floor_scan(void) { return 1; }\n"  # the harness builds a floor; this benchmark needs only its forker
EXTRA = 2000

PPID1_CONFTEST = r"""
import psutil, pytest

def _orphans():
    return {p.info["pid"] for p in psutil.process_iter(["pid", "ppid"]) if p.info["ppid"] == 1}

NEW = []

@pytest.fixture(autouse=True)
def no_new_orphans():
    before = _orphans()
    yield
    NEW.append(_orphans() - before)  # counted, not asserted: on a shared machine it also sees others' orphans
"""


def suite(tmp, n, conftest=None):
    d = os.path.join(tmp, f"suite-{'ppid1' if conftest else 'plain'}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "test_many.py"), "w") as f:
        f.write(f"import pytest\n\n@pytest.mark.parametrize('i', range({n}))\ndef test_trivial(i):\n    pass\n")
    if conftest:
        with open(os.path.join(d, "conftest.py"), "w") as f:
            f.write(conftest)
    return d


def run(d, *args):
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args]
    t = time.perf_counter()
    r = subprocess.run(argv, cwd=d, capture_output=True, text=True)
    took = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"pytest failed in {d}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return took


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tests", type=int, default=1000)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    if not sys.platform.startswith("linux"):
        sys.exit("bench_pytest_plugin is Linux only")
    try:
        import psutil  # noqa: F401
    except ImportError:
        sys.exit("needs psutil (pip install '.[bench]')")
    load_before = os.getloadavg()[0]
    samples = {"plain": [], "plugin": [], "ppid1": []}
    with tempfile.TemporaryDirectory() as tmp:
        _, forker = build(tmp, FLOOR_C)
        crowd = Crowd(forker)
        try:
            crowd.start("flat", EXTRA - 1)
            plain, ppid1 = suite(tmp, args.tests), suite(tmp, args.tests, PPID1_CONFTEST)
            n = len(proctree.snapshot())
            for _ in range(args.rounds):
                samples["plain"].append(run(plain))
                samples["plugin"].append(run(plain, "--proctree-leaks=fail"))
                samples["ppid1"].append(run(ppid1))
        finally:
            crowd.stop()
    med = {k: statistics.median(v) for k, v in samples.items()}
    per = {k: (med[k] - med["plain"]) / args.tests * 1e3 for k in ("plugin", "ppid1")}
    rows = [
        (f"plain pytest, {args.tests} trivial tests", f"{med['plain']:.2f} s", "", ""),
        ("pytest --proctree-leaks=fail", f"{med['plugin']:.2f} s", "", ""),
        ("psutil PPID=1 scan before and after each test", f"{med['ppid1']:.2f} s", "", ""),
        ("plugin overhead per test", f"{per['plugin']:.3f} ms", "< 0.5 ms", "PASS" if per["plugin"] < 0.5 else "GAP"),
        ("PPID=1 scan overhead per test", f"{per['ppid1']:.3f} ms", "", ""),
        ("PPID=1 scan / plugin, per test", f"{per['ppid1'] / max(per['plugin'], 1e-6):.0f}x", "", ""),
    ]
    head = (
        f"proctree {proctree.__version__}, Python {sys.version.split()[0]}, pytest, {os.cpu_count()} CPUs, "
        f"Linux {os.uname().release}; {n} processes on the machine; medians of {args.rounds} interleaved runs; "
        f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(table(head, rows, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
