"""The pytest plugin's cost on a clean suite, side by side, and the settle its default rests on.

    python benchmarks/bench_plugin_overhead.py [--rounds N] [--tests N] [--markdown]

(1) One suite of N (2,000) trivial tests and one of a single test, run
interleaved round by round: plain pytest, and pytest --proctree-leaks=fail.
The 1-test suite gives the run's fixed cost (the look for earlier runs'
leftovers, the watchdog's start and stop); the per-test overhead is what is
left, spread over the other tests. Target: at most 0.5 ms a clean test.

(2) The settle: how long a process a test has just signalled takes to be gone
(or a zombie its owner will reap), for a C program (sleep), a shell and a
Python interpreter, each SIGTERMed while the machine runs the benchmark's
own pytest load. The plugin's default settle (proctree/_plugin/settings.py)
must cover the slowest of them with room to spare.

Prints medians and ratios. Linux only.
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from _harness import table  # noqa: E402

import proctree  # noqa: E402


def suite(tmp, n):
    d = os.path.join(tmp, f"suite-{n}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "test_many.py"), "w") as f:
        f.write(f"import pytest\n\n@pytest.mark.parametrize('i', range({n}))\ndef test_trivial(i):\n    pass\n")
    return d


def run(d, *args):
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args]
    t = time.perf_counter()
    r = subprocess.run(argv, cwd=d, capture_output=True, text=True)
    took = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"pytest failed in {d}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return took


def gone_after_term(argv, ready):
    """Seconds from SIGTERM to the process being gone or a zombie (our own child: not reaped meanwhile)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, start_new_session=True)  # its group: ended after
    if ready:
        p.stdout.readline()
    else:
        time.sleep(0.05)
    t = time.perf_counter()
    os.kill(p.pid, signal.SIGTERM)
    while True:
        if proctree.proc(p.pid).is_zombie:
            took = time.perf_counter() - t
            break
        time.sleep(0.0005)
    try:
        os.killpg(p.pid, signal.SIGKILL)  # what it left (the shell's sleep), by its own process group
    except ProcessLookupError:
        pass
    p.wait()
    p.stdout.close()
    return took


KINDS = {
    "sleep (C)": (["sleep", "300"], False),
    "sh -c 'sleep & wait'": (["sh", "-c", "sleep 300 & wait"], False),
    "python, atexit and a SIGTERM handler that exits": (
        [
            sys.executable,
            "-c",
            "import atexit, signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
            "atexit.register(lambda: None)\nprint('ready', flush=True)\ntime.sleep(300)\n",
        ],
        True,
    ),
}


def per_test_work(n, below_a_subreaper):
    """Seconds the plugin's own work for one clean test takes, in process (median of n): the mark at setup,
    and at teardown the members, the helpers and fixtures left out, and the comparison. A whole pytest run
    on a shared machine varies by more than this; this is the part the plugin adds.

    below_a_subreaper: read the members as a pytest below the run's subreaper does (its descendants and the
    subreaper's adopted orphans: this process's parent stands in for the subreaper)."""
    from proctree._plugin import helpers
    from proctree._plugin.adoption import Adoption

    box = proctree.contain_self(watchdog=False, subreaper=not below_a_subreaper, tag="bench")
    reader = Adoption(os.getppid(), box.tree_id, False) if below_a_subreaper else box
    try:
        times = []
        for _ in range(n):
            t = time.perf_counter()
            mark = reader.mark()
            members = reader.members()
            skip = helpers.not_counted(members, set())
            [p for p in members if (p.pid, p.start_time) not in mark.identities | skip]
            times.append(time.perf_counter() - t)
    finally:
        box.close()
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tests", type=int, default=2000)
    ap.add_argument("--settle-samples", type=int, default=30)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    if not sys.platform.startswith("linux"):
        sys.exit("bench_plugin_overhead is Linux only")
    load_before = os.getloadavg()[0]
    samples = {k: [] for k in ("plain-n", "plugin-n", "plain-1", "plugin-1")}
    with tempfile.TemporaryDirectory() as tmp:
        many, one = suite(tmp, args.tests), suite(tmp, 1)
        for _ in range(args.rounds):
            samples["plain-n"].append(run(many))
            samples["plugin-n"].append(run(many, "--proctree-leaks=fail"))
            samples["plain-1"].append(run(one))
            samples["plugin-1"].append(run(one, "--proctree-leaks=fail"))
    med = {k: statistics.median(v) for k, v in samples.items()}
    fixed = med["plugin-1"] - med["plain-1"]
    per_test = (med["plugin-n"] - med["plain-n"] - fixed) / (args.tests - 1) * 1e3
    overall = (med["plugin-n"] - med["plain-n"]) / args.tests * 1e3
    work = per_test_work(args.tests, below_a_subreaper=False)
    work_below = per_test_work(args.tests, below_a_subreaper=True)
    settle = {k: [gone_after_term(a, r) for _ in range(args.settle_samples)] for k, (a, r) in KINDS.items()}
    rows = [
        (f"plain pytest, {args.tests} trivial tests", f"{med['plain-n']:.2f} s", "", ""),
        ("pytest --proctree-leaks=fail, the same suite", f"{med['plugin-n']:.2f} s", "", ""),
        ("the run's fixed cost (1-test suite, plugin - plain)", f"{fixed * 1e3:.0f} ms", "", ""),
        ("overhead per clean test, fixed cost apart", f"{per_test:.3f} ms", "<= 0.5 ms", _verdict(per_test)),
        ("overhead per clean test, fixed cost spread", f"{overall:.3f} ms", "", ""),
        ("the plugin's own work per clean test, in process (pytest its own subreaper)", f"{work * 1e3:.3f} ms", "", ""),
        (
            "the same, below the run's subreaper (the default for a command)",
            f"{work_below * 1e3:.3f} ms",
            "<= 0.5 ms",
            _verdict(work_below * 1e3),
        ),
        ("plugin / plain, whole run", f"{med['plugin-n'] / med['plain-n']:.2f}x", "", ""),
    ]
    for kind, s in settle.items():
        s.sort()
        rows.append(
            (f"SIGTERM to gone: {kind}, median / max", f"{s[len(s) // 2] * 1e3:.1f} / {s[-1] * 1e3:.1f} ms", "", "")
        )
    head = (
        f"proctree {proctree.__version__}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"Linux {os.uname().release}; medians of {args.rounds} interleaved runs; "
        f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(table(head, rows, args.markdown))
    return 0


def _verdict(ms):
    return "PASS" if ms <= 0.5 else "GAP"


if __name__ == "__main__":
    sys.exit(main())
