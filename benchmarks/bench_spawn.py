"""Contained spawning, side by side in one run: medians and ratios.

1. Spawn latency, from the call to the command running (the call returns once
   the command's exec succeeded, for Popen and spawn alike), per mode vs plain
   subprocess.Popen. Rounds are interleaved so machine noise hits every row alike.
2. Teardown of a cooperative 100-process tree (sh + 99 sleeps): Tree.terminate()
   per mode vs terminate_tree() on the same tree started uncontained.

Usage: python benchmarks/bench_spawn.py [--rounds N] [--markdown FILE]
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import proctree  # noqa: E402
from proctree._containment.spawn import spawn  # noqa: E402

TREE_CMD = ["sh", "-c", "for i in $(seq 99); do sleep 60 & done; echo ready; wait"]


def available_modes():
    modes = []
    for m in ("cgroup", "subreaper", "session"):
        try:
            t = spawn(["true"], contain=m)
        except OSError as exc:
            print(f"# mode {m} unavailable here: {exc}", file=sys.stderr)
            continue
        t.wait(10)
        t.terminate()
        modes.append(m)
    return modes


def bench_latency(modes, rounds):
    rows = {"subprocess.Popen": [], "python -I -S -c pass (keeper floor)": [], **{f"spawn({m})": [] for m in modes}}
    for _ in range(rounds):
        t = time.perf_counter()
        p = subprocess.Popen(["sleep", "60"])
        rows["subprocess.Popen"].append(time.perf_counter() - t)
        p.kill()
        p.wait()
        t = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", "pass"])
        rows["python -I -S -c pass (keeper floor)"].append(time.perf_counter() - t)
        for m in modes:
            t = time.perf_counter()
            tree = spawn(["sleep", "60"], contain=m)
            rows[f"spawn({m})"].append(time.perf_counter() - t)
            tree.terminate(grace=0)
    return {k: statistics.median(v) for k, v in rows.items()}


def _tree_ready(stream):
    line = stream.readline()
    assert line.strip() in (b"ready", "ready"), line


def bench_teardown(modes, rounds):
    rows = {"terminate_tree (uncontained Popen)": [], **{f"Tree.terminate ({m})": [] for m in modes}}
    counts = {k: [] for k in rows}
    for _ in range(rounds):
        p = subprocess.Popen(TREE_CMD, stdout=subprocess.PIPE)
        _tree_ready(p.stdout)
        t = time.perf_counter()
        rep = proctree.terminate_tree(p.pid, grace=5)
        rows["terminate_tree (uncontained Popen)"].append(time.perf_counter() - t)
        counts["terminate_tree (uncontained Popen)"].append(len(rep.found))
        p.wait()
        p.stdout.close()
        for m in modes:
            tree = spawn(TREE_CMD, contain=m, stdout=subprocess.PIPE, grace=5)
            _tree_ready(tree.stdout)
            t = time.perf_counter()
            rep = tree.terminate()
            rows[f"Tree.terminate ({m})"].append(time.perf_counter() - t)
            counts[f"Tree.terminate ({m})"].append(len(rep.found))
            tree.stdout.close()
    return ({k: statistics.median(v) for k, v in rows.items()}, {k: statistics.median(v) for k, v in counts.items()})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--teardown-rounds", type=int, default=10)
    ap.add_argument("--markdown", help="also write the tables to this file")
    a = ap.parse_args()
    modes = available_modes()
    lat = bench_latency(modes, a.rounds)
    td, counts = bench_teardown(modes, a.teardown_rounds)
    base = lat["subprocess.Popen"]
    out = []
    out.append(
        f"Machine: {platform.system()} {platform.release()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.2f} at the end.\n"
    )
    out.append(f"### Spawn latency (call to command running), median of {a.rounds} interleaved rounds\n")
    out.append("| how | median | added vs Popen | ratio vs Popen |")
    out.append("|---|---:|---:|---:|")
    for k, v in lat.items():
        out.append(f"| {k} | {v * 1e3:.2f} ms | {(v - base) * 1e3:+.2f} ms | {v / base:.1f}x |")
    tbase = td["terminate_tree (uncontained Popen)"]
    out.append(f"\n### Teardown of a cooperative 100-process tree, median of {a.teardown_rounds} rounds\n")
    out.append("| how | members found | median | ratio vs terminate_tree |")
    out.append("|---|---:|---:|---:|")
    for k, v in td.items():
        out.append(f"| {k} | {counts[k]:.0f} | {v * 1e3:.1f} ms | {v / tbase:.2f}x |")
    text = "\n".join(out) + "\n"
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
