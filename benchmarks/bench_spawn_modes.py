"""spawn() per containment mode against subprocess.Popen (issue #31: "spawn() <= 1.5 ms over Popen in every mode").

One whole short command, `true`, start to finish, interleaved round by round:

- `subprocess.Popen(["true"]).wait()`, the floor;
- the keeper's exec alone: `Popen([proctree-keeper]).wait()` with no command
  line (it refuses it and exits at once), what the second exec of every
  contained start costs at least;
- `proctree.Popen(["true"]).wait()`;
- `spawn(["true"], contain=MODE).wait()` for cgroup, subreaper and session
  (the modes that work here).

The rows run in a fresh random order each round (seeded: every run alike).
Per row: the median and the 25th percentile of the wall time, what it adds to
Popen's median, the ratio, and two parts of it: until spawn() returned the
Tree (the keeper started, its "ok" read, the receipt written) and the
wait() after it; and the calling thread's own CPU time (time.thread_time),
which waiting does not count.

With --compare OLD NEW, two checkouts (each built in place: `pip install -e
.`) are measured in the same run: worker processes of each, alternating
block by block, so the machine's load falls on both alike; the tables come
out side by side with the ratio NEW/OLD per row. Every process started here
is reaped here (each command is waited for; each tree ends with its command).
Linux only. Usage:

    python benchmarks/bench_spawn_modes.py [--rounds N]
    python benchmarks/bench_spawn_modes.py --compare /path/to/old /path/to/new [--rounds N] [--blocks B]
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("cgroup", "subreaper", "session")


def _import_from(root):
    """proctree and its spawn() from the checkout at root."""
    sys.path.insert(0, root)
    import proctree
    from proctree._containment import launch
    from proctree._containment.spawn import spawn

    if not os.path.abspath(proctree.__file__).startswith(os.path.abspath(root) + os.sep):
        sys.exit(f"proctree came from {proctree.__file__}, not from {root}")
    return proctree, spawn, launch._KEEPER


def _modes(spawn):
    out = []
    for m in MODES:
        try:
            spawn(["true"], contain=m).wait(10)
        except OSError as exc:
            print(f"# mode {m} unavailable here: {exc}", file=sys.stderr)
            continue
        out.append(m)
    return out


def measure(root, rounds):
    """{row: {"wall": [...], "start": [...], "cpu": [...]}} seconds per round, the rows interleaved round by round."""
    proctree, spawn, keeper = _import_from(root)
    modes = _modes(spawn)

    def popen(argv, cls=subprocess.Popen, **kw):
        def run():
            c0, t0 = time.thread_time(), time.perf_counter()
            cls(argv, **kw).wait()
            return time.perf_counter() - t0, None, time.thread_time() - c0

        return run

    def spawned(mode):
        def run():
            c0, t0 = time.thread_time(), time.perf_counter()
            tree = spawn(["true"], contain=mode)
            t1 = time.perf_counter()
            tree.wait()
            return time.perf_counter() - t0, t1 - t0, time.thread_time() - c0

        return run

    rows = {
        "Popen": popen(["true"]),
        "keeper exec alone (refused argv)": popen([keeper], stderr=subprocess.DEVNULL),
        "proctree.Popen": popen(["true"], cls=proctree.Popen),
        **{f"spawn({m})": spawned(m) for m in modes},
    }
    for run in rows.values():  # warm: the holding tree, the watch thread, the page cache
        for _ in range(3):
            run()
    out = {k: {"wall": [], "start": [], "cpu": []} for k in rows}
    order = list(rows)
    shuffle = random.Random(31).shuffle
    for _ in range(rounds):
        # A fresh order each round: what a row leaves the kernel to do (a cgroup's release, an exit's
        # reaping) must not always fall on the same next row.
        shuffle(order)
        for k in order:
            run = rows[k]
            wall, start, cpu = run()
            out[k]["wall"].append(wall)
            out[k]["cpu"].append(cpu)
            if start is not None:
                out[k]["start"].append(start)
    return out


def _ms(v):
    return f"{v * 1e3:.2f} ms"


def table(samples):
    """Markdown table of one checkout's samples."""
    base = statistics.median(samples["Popen"]["wall"])
    lines = [
        "| how | median | p25 | added vs Popen | ratio vs Popen | spawn() returned | wait() | caller's CPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for k, s in samples.items():
        med = statistics.median(s["wall"])
        p25 = statistics.quantiles(s["wall"], n=4)[0]
        start = statistics.median(s["start"]) if s["start"] else None
        wait = statistics.median([w - st for w, st in zip(s["wall"], s["start"])]) if s["start"] else None
        lines.append(
            f"| {k} | {_ms(med)} | {_ms(p25)} | {(med - base) * 1e3:+.2f} ms | {med / base:.2f}x | "
            f"{_ms(start) if start is not None else '-'} | {_ms(wait) if wait is not None else '-'} | "
            f"{_ms(statistics.median(s['cpu']))} |"
        )
    return "\n".join(lines)


def compare(old, new, rounds, blocks):
    """Worker processes for old and new in alternating blocks; {"old": samples, "new": samples}."""
    merged = {"old": {}, "new": {}}
    per = max(1, rounds // blocks)
    for b in range(blocks):
        order = (("old", old), ("new", new)) if b % 2 == 0 else (("new", new), ("old", old))
        for name, root in order:
            out = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--worker", root, "--rounds", str(per)],
                capture_output=True,
                text=True,
                check=True,
            )
            for k, s in json.loads(out.stdout).items():
                row = merged[name].setdefault(k, {"wall": [], "start": [], "cpu": []})
                for field, v in s.items():
                    row[field].extend(v)
    return merged


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--blocks", type=int, default=8, help="with --compare: alternating blocks per checkout")
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    ap.add_argument("--worker", metavar="ROOT", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("bench_spawn_modes: Linux only")
    if a.worker:
        print(json.dumps(measure(a.worker, a.rounds)))
        return
    load = os.getloadavg()[0]
    if not a.compare:
        samples = measure(HERE, a.rounds)
        print(
            f"`true` start to finish, median of {a.rounds} interleaved rounds, load average {load:.1f} at the start\n"
        )
        print(table(samples))
        return
    old, new = (os.path.abspath(p) for p in a.compare)
    got = compare(old, new, a.rounds, a.blocks)
    n = len(got["new"]["Popen"]["wall"])
    print(
        f"`true` start to finish, {n} rounds per checkout in {a.blocks} alternating blocks, "
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n"
    )
    for name, root in (("before", old), ("after", new)):
        print(f"{name} ({root}):\n")
        print(table(got["old" if name == "before" else "new"]))
        print()
    print("| how | before (median) | after (median) | after / before |")
    print("|---|---:|---:|---:|")
    for k in got["new"]:
        if k in got["old"]:
            b, f = statistics.median(got["old"][k]["wall"]), statistics.median(got["new"][k]["wall"])
            print(f"| {k} | {_ms(b)} | {_ms(f)} | {f / b:.2f}x |")


if __name__ == "__main__":
    main()
