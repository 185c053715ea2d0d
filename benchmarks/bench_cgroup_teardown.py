"""Cgroup-mode teardown, this checkout against another, interleaved: Tree.terminate and Tree.kill of a 100-process tree.

    .venv/bin/python benchmarks/bench_cgroup_teardown.py --against /path/to/other/checkout [--batches 6] [--rounds 5]

Each batch runs bench_spawn.bench_teardown(["cgroup"], rounds) once in a
fresh interpreter per checkout, alternating which goes first, so machine
noise spreads over both; the table shows the medians of the batch medians
and the ratio (this checkout / the other). The other checkout needs its
compiled parts in place (pip install -e, or the same files copied when the
C sources are the same).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, sys
root, rounds = sys.argv[1], int(sys.argv[2])
sys.path[:0] = [root, root + "/benchmarks"]
import bench_spawn
td, found = bench_spawn.bench_teardown(["cgroup"], rounds)
assert bench_spawn.proctree.__file__.startswith(root), bench_spawn.proctree.__file__
print(json.dumps({k: v for k, v in td.items() if "(cgroup)" in k}))
"""


def one_batch(root, rounds):
    out = subprocess.run([sys.executable, "-c", CHILD, root, str(rounds)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"the batch in {root} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", required=True, help="the other checkout (the baseline)")
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    roots = {"this": HERE, "baseline": os.path.abspath(a.against)}
    got = {name: [] for name in roots}
    for i in range(a.batches):
        order = ["this", "baseline"] if i % 2 == 0 else ["baseline", "this"]
        for name in order:
            got[name].append(one_batch(roots[name], a.rounds))
    print(f"{a.batches} interleaved batches of {a.rounds} rounds; load average {os.getloadavg()[0]:.2f} at the end\n")
    print("| how | baseline median | this median | ratio this/baseline |")
    print("|---|---:|---:|---:|")
    for key in got["this"][0]:
        base = statistics.median(b[key] for b in got["baseline"])
        this = statistics.median(b[key] for b in got["this"])
        print(f"| {key} | {base * 1e3:.1f} ms | {this * 1e3:.1f} ms | {this / base:.2f}x |")


if __name__ == "__main__":
    main()
