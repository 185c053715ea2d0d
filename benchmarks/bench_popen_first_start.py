"""proctree.Popen's first start in a fresh process against subprocess.Popen's, side by side: medians and ratios.

Each round starts two fresh interpreters, interleaved (the stdlib's first, then
proctree's, then the other way round): each imports its module, then times its
first `Popen(["true"]).wait()` and then 20 later ones. Issue 28's targets: the
first start within 5 ms of the stdlib's, later ones within 0.5 ms. The import
is timed on its own line (`import subprocess` against `import proctree` and
the `proctree.Popen` name's first use, which imports everything a start needs:
a start itself imports nothing, so a fork from another thread during it
cannot leave the child a held import lock).

Bytecode is compiled first (python -m compileall), as an installed wheel has
it: without it each import compiles its source, which is not what users pay.
--before DIR adds a third column, interleaved too: proctree from another
checkout (its C parts built in place), to show a change side by side.
Linux only. Usage: python benchmarks/bench_popen_first_start.py [--rounds N] [--before DIR] [--markdown FILE]
"""

import argparse
import compileall
import json
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What each fresh interpreter runs: argv[1] is "stdlib" or "proctree"; one JSON line of milliseconds.
CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
if sys.argv[1] == "stdlib":
    import subprocess
    Popen = subprocess.Popen
    t1 = t2 = time.perf_counter()
else:
    import proctree
    t1 = time.perf_counter()
    Popen = proctree.Popen
    t2 = time.perf_counter()
Popen(["true"]).wait()
t3 = time.perf_counter()
later = []
for _ in range(20):
    a = time.perf_counter()
    Popen(["true"]).wait()
    later.append(time.perf_counter() - a)
later.sort()
print(json.dumps({"import": (t1 - t0) * 1e3, "name": (t2 - t1) * 1e3, "first": (t3 - t2) * 1e3,
                  "later": later[len(later) // 2] * 1e3}))
"""


def one(which, root):
    env = dict(os.environ, PYTHONPATH=root)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    argv = [sys.executable, "-c", CHILD, "stdlib" if which == "stdlib" else "proctree"]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=True, cwd=root)
    return json.loads(out.stdout)


def run(rounds, before):
    roots = {"stdlib": ROOT, "proctree": ROOT}
    if before:
        roots["before"] = before
    rows: dict = {w: [] for w in roots}
    for i in range(rounds):
        order = list(roots) if i % 2 == 0 else list(reversed(roots))
        for which in order:
            rows[which].append(one(which, roots[which]))
    return {w: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for w, rs in rows.items()}


def table(med, rounds):
    s, p = med["stdlib"], med["proctree"]
    s_total, p_total = (sum(m[k] for k in ("import", "name", "first")) for m in (s, p))
    b = med.get("before")
    lines = [
        f"### proctree.Popen's first start in a fresh process: median of {rounds} interleaved rounds, "
        f"{os.cpu_count()} CPUs, Linux {platform.release()}, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f} at the end",
        "",
        "| ms | subprocess.Popen | proctree.Popen | over | ratio |",
        "|---|---|---|---|---|",
        f"| `import subprocess` / `import proctree` | {s['import']:.2f} | {p['import']:.2f} | "
        f"{p['import'] - s['import']:+.2f} | {p['import'] / s['import']:.1f}x |",
        f"| first use of the name `proctree.Popen` (imports the start path) | - | {p['name']:.2f} | "
        f"{p['name']:+.2f} | - |",
        f"| first `Popen(['true']).wait()` (proctree: its holding keeper starts) | {s['first']:.2f} | "
        f"{p['first']:.2f} | {p['first'] - s['first']:+.2f} | {p['first'] / s['first']:.1f}x |",
        f"| all of it to the first command's end (import, name, first start) | {s_total:.2f} | {p_total:.2f} | "
        f"{p_total - s_total:+.2f} | {p_total / s_total:.1f}x |",
        f"| later `Popen(['true']).wait()`, median of 20 | {s['later']:.2f} | {p['later']:.2f} | "
        f"{p['later'] - s['later']:+.2f} | {p['later'] / s['later']:.1f}x |",
    ]
    if b is not None:
        b_total = sum(b[k] for k in ("import", "name", "first"))
        lines += [
            "",
            "| ms, proctree.Popen | before (--before) | now | change |",
            "|---|---|---|---|",
            *(
                f"| {label} | {b[k]:.2f} | {p[k]:.2f} | {p[k] / b[k]:.2f}x |"
                for label, k in (
                    ("`import proctree`", "import"),
                    ("first use of the name", "name"),
                    ("first start", "first"),
                    ("later starts", "later"),
                )
            ),
            f"| all of it to the first command's end | {b_total:.2f} | {p_total:.2f} | {p_total / b_total:.2f}x |",
        ]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--before", help="another checkout's root: proctree from there, side by side")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    for root in (ROOT, args.before):
        if root:
            compileall.compile_dir(os.path.join(root, "proctree"), quiet=1)
    out = table(run(args.rounds, args.before), args.rounds)
    print(out)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(out + "\n")


if __name__ == "__main__":
    main()
