"""Starts from an event loop and from plain code, stdlib against proctree, side by side in one run: medians, ratios.

1. `Popen(["true"]).wait()`: subprocess.Popen against proctree.Popen (and
   proctree.Popen(detach=True), which is subprocess.Popen's own start).
2. `await create_subprocess_exec("true")` then `await p.wait()`: asyncio's
   against proctree's.
3. How long each start holds the loop's thread: the time inside the start
   call for a subprocess.Popen / proctree.Popen made on the loop's thread
   (the swap under asyncio: loop.subprocess_exec calls it there).

Interleaved rounds, after one warm-up start of each (the holding tree is
made once per process). Run it from the tree to measure (PYTHONPATH picks the
tree): `python benchmarks/bench_loop_starts.py --rounds 200`.
"""

import argparse
import asyncio
import inspect
import platform
import statistics
import subprocess
import time

import proctree


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_sync(rounds: int) -> dict[str, float]:
    hows = {
        "subprocess.Popen": lambda: subprocess.Popen(["true"]).wait(),
        "proctree.Popen": lambda: proctree.Popen(["true"]).wait(),
        "proctree.Popen(detach=True)": lambda: proctree.Popen(["true"], detach=True).wait(),
    }
    if "detach" not in inspect.signature(proctree.Popen).parameters:  # a tree from before detach=True
        del hows["proctree.Popen(detach=True)"]
    for fn in hows.values():
        fn()
    times: dict[str, list[float]] = {how: [] for how in hows}
    for _ in range(rounds):
        for how, fn in hows.items():
            times[how].append(_timed(fn))
    return {how: statistics.median(t) for how, t in times.items()}


async def _async_rounds(rounds: int) -> tuple[dict[str, float], dict[str, float]]:
    async def stock() -> None:
        p = await asyncio.create_subprocess_exec("true")
        await p.wait()

    async def ours() -> None:
        p = await proctree.create_subprocess_exec("true")
        await p.wait()

    whole: dict[str, list[float]] = {"asyncio": [], "proctree": []}
    held: dict[str, list[float]] = {"subprocess.Popen": [], "proctree.Popen": []}
    await stock()
    await ours()
    for _ in range(rounds):
        for how, fn in (("asyncio", stock), ("proctree", ours)):
            t = time.perf_counter()
            await fn()
            whole[how].append(time.perf_counter() - t)
        for how, cls in (("subprocess.Popen", subprocess.Popen), ("proctree.Popen", proctree.Popen)):
            t = time.perf_counter()
            p = cls(["true"])
            held[how].append(time.perf_counter() - t)
            while p.poll() is None:
                await asyncio.sleep(0.001)
    return (
        {how: statistics.median(t) for how, t in whole.items()},
        {how: statistics.median(t) for how, t in held.items()},
    )


def _table(title: str, medians: dict[str, float], base: str) -> None:
    print(f"\n### {title}\n")
    print("| how | median | vs " + base + " |")
    print("|---|---|---|")
    for how, m in medians.items():
        print(f"| {how} | {m * 1e3:.3f} ms | {m / medians[base]:.2f}x ({(m - medians[base]) * 1e3:+.3f} ms) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    print(f"{args.rounds} interleaved rounds, Python {platform.python_version()}, proctree from {proctree.__file__}")
    _table("`Popen(['true']).wait()`", bench_sync(args.rounds), "subprocess.Popen")
    whole, held = asyncio.run(_async_rounds(args.rounds))
    _table("`await create_subprocess_exec('true')`, then `await p.wait()`", whole, "asyncio")
    _table("the loop's thread held by one start (the Popen call on it)", held, "subprocess.Popen")


if __name__ == "__main__":
    main()
