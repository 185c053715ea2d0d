"""What the holding tree's per-start check costs: the keeper's exit only, against the keeper's exit and hold's pidfd.

Both in one process, interleaved (rounds alternate which goes first), so the
machine's load weighs on both alike: medians of proctree.Popen(["true"]).wait().
Linux only. Usage: python benchmarks/bench_popen_holder_check.py [--rounds N]
"""

import argparse
import statistics
import time

import proctree
from proctree._containment import popenhold


def _median_start(count: int) -> float:
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        proctree.Popen(["true"]).wait()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--per-round", type=int, default=40)
    args = parser.parse_args()
    checks = {"keeper only": popenhold._exited, "keeper + hold pidfd": popenhold._lost}
    proctree.run(["true"])  # the holding tree, made once
    medians: dict[str, list[float]] = {name: [] for name in checks}
    try:
        for r in range(args.rounds):
            order = list(checks) if r % 2 else list(reversed(checks))
            for name in order:
                popenhold._lost = checks[name]  # type: ignore[assignment]
                medians[name].append(_median_start(args.per_round))
    finally:
        popenhold._lost = checks["keeper + hold pidfd"]  # type: ignore[assignment]
    base = statistics.median(medians["keeper only"])
    print("| per-start check | median start to finish | ratio |")
    print("|---|---:|---:|")
    for name, values in medians.items():
        m = statistics.median(values)
        print(f"| {name} | {m * 1e3:.3f} ms | {m / base:.3f}x |")


if __name__ == "__main__":
    main()
