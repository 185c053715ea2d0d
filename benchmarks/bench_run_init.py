"""`proctree run` as an init against tini and dumb-init, side by side in one run: medians and ratios.

1. `INIT -- true` start to finish, as PID 1 of a fresh pid namespace (`unshare --pid --fork --kill-child
   --mount-proc INIT -- true`, against unshare running `true` itself) and not: tini (-s when not PID 1, so it
   reaps as a subreaper too), dumb-init, proctree-init (the native runner, default auto = cgroup here, and
   --contain subreaper), `python -m proctree run` (which hands over to proctree-init) and the Python path
   (PROCTREE_RUN_NATIVE=0). Issue 22's goal: proctree-init within 1.5 ms of tini.
2. Resident memory while CMD (sleep) runs: VmRSS (and PSS) of every process of the init, CMD excluded
   (proctree-init: its runner and keeper half; the Python path: the interpreter and the keeper). Goal <= 1.5 MB.
3. Stopping a tree whose grandchild ignores SIGTERM: SIGTERM to the init, time until the init has exited and
   the grandchild is gone (as PID 1 the kernel ends the namespace with its init; not as PID 1, tini and
   dumb-init leave the grandchild running, said in the table, and this script ends it).

Every process started here is ended here (pids read from the processes themselves, start times checked).
Linux, root (for the pid namespace and a writable cgroup v2). Usage: python benchmarks/bench_run_init.py
[--rounds N] [--markdown FILE]
"""

import argparse
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import proctree  # noqa: E402
from proctree.cli import _native  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER = _native.runner_path()
UNSHARE = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
ENV = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
PY_ENV = {**ENV, "PROCTREE_RUN_NATIVE": "0"}
GRACE = "0.5"


def inits(pid1):
    """name -> (argv prefix before CMD, env)."""
    py = [sys.executable, "-m", "proctree", "run"]
    return {
        "tini": (["tini"] + ([] if pid1 else ["-s"]) + ["--"], ENV),
        "dumb-init": (["dumb-init"], ENV),
        "proctree-init": ([RUNNER, "--"], ENV),
        "proctree-init --contain subreaper": ([RUNNER, "--contain", "subreaper", "--"], ENV),
        "python -m proctree run (hands over)": ([*py, "--"], ENV),
        "python -m proctree run (Python path)": ([*py, "--"], PY_ENV),
    }


def run_quiet(argv, env):
    subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_to_finish(rounds, pid1):
    """{name: median seconds} of `INIT -- true`, rounds interleaved; a bare `true` (or unshare's) as the floor."""
    base = [*UNSHARE] if pid1 else []
    fns = {"(no init: true itself)": lambda: run_quiet([*base, "true"], ENV)}
    for name, (pre, env) in inits(pid1).items():
        fns[name] = lambda pre=pre, env=env: run_quiet([*base, *pre, "true"], env)
    samples = {n: [] for n in fns}
    for _ in range(rounds):
        for n, fn in fns.items():
            t = time.perf_counter_ns()
            fn()
            samples[n].append(time.perf_counter_ns() - t)
    return {n: statistics.median(v) / 1e9 for n, v in samples.items()}


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def _descendants(pid):
    out, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        out += kids
        todo += kids
    return out


def _status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return next((int(line.split()[1]) for line in f if line.startswith(field + ":")), 0)


def _pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("Pss:")), 0)
    except OSError:
        return 0


def _exe(pid):
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return ""


def memory(name, pre, env):
    """(VmRSS KiB, PSS KiB) summed over the init's processes (not CMD), while CMD sleeps; not PID 1."""
    p = subprocess.Popen([*pre, "sleep", "60"], env=env, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not any(_exe(d) == "sleep" for d in _descendants(p.pid)):
            assert p.poll() is None and time.monotonic() < deadline, f"{name} did not start sleep"
            time.sleep(0.005)
        time.sleep(0.2)  # settled
        mine = [p.pid] + [d for d in _descendants(p.pid) if _exe(d) != "sleep"]
        return sum(_status(q, "VmRSS") for q in mine), sum(_pss(q) for q in mine), len(mine)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)


GRANDCHILD = "sh -c 'trap \"\" TERM; echo $$; exec sleep 60' & wait"


def stop_time(pre, env, pid1):
    """(seconds from SIGTERM until the init exited and the grandchild is gone, grandchild left running?)"""
    argv = [*(UNSHARE if pid1 else []), *pre, "sh", "-c", GRANDCHILD]
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    sleeper = start = None
    try:
        assert p.stdout.readline().strip()
        # The grandchild's pid as seen from here (as PID 1 it has another in its namespace): found by its place.
        deadline = time.monotonic() + 10
        while sleeper is None:
            assert time.monotonic() < deadline, "the grandchild did not start"
            sleeper = next((d for d in _descendants(p.pid) if _exe(d) == "sleep"), None)
        start = proctree.proc(sleeper).start_time
        time.sleep(0.05)
        target = _children(p.pid)[0] if pid1 else p.pid  # unshare's child is the init
        t = time.perf_counter()
        os.kill(target, signal.SIGTERM)
        p.wait(timeout=30)
        leaked = False
        while _ours(sleeper, start):
            if time.perf_counter() - t > 0.3 and not pid1:  # left running after its init exited
                leaked = True
                break
            time.sleep(0.002)
        return time.perf_counter() - t - (0.3 if leaked else 0), leaked
    finally:
        if p.poll() is None:
            p.kill()  # unshare --kill-child, or an init of ours: whatever it held dies or is ended below
            p.wait()
        if sleeper is not None and _ours(sleeper, start):
            os.kill(sleeper, signal.SIGKILL)  # ours: pid and start time checked just above


def _ours(pid, start):
    """True while pid is the live process started at start (a zombie counts as gone)."""
    try:
        q = proctree.proc(pid)
    except proctree.NoSuchProcess:
        return False
    return q.start_time == start and q.state not in ("Z", "X")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--markdown", metavar="FILE", help="also write the tables as Markdown to FILE")
    args = ap.parse_args()
    assert RUNNER, "build first: python setup.py build_ext --inplace"
    assert shutil.which("tini") and shutil.which("dumb-init"), "needs tini and dumb-init (.ci/apt-packages)"
    out = [
        f"### proctree run as an init: {args.rounds} rounds, {os.cpu_count()} CPUs, Linux {platform.release()}, "
        f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} at the start",
        "",
        "#### `INIT -- true` start to finish, median",
        "",
        "| init | not PID 1 | vs tini | as PID 1 | vs tini |",
        "|---|---|---|---|---|",
    ]
    plain, ns = start_to_finish(args.rounds, False), start_to_finish(args.rounds, True)
    for n in plain:
        out.append(
            f"| {n} | {plain[n] * 1e3:.2f} ms | {(plain[n] - plain['tini']) * 1e3:+.2f} ms | "
            f"{ns[n] * 1e3:.2f} ms | {(ns[n] - ns['tini']) * 1e3:+.2f} ms |"
        )
    out += ["", "#### Resident memory of the init while CMD sleeps (CMD excluded), median of 5", ""]
    out += ["| init | processes | VmRSS | PSS |", "|---|---|---|---|"]
    for n, (pre, env) in inits(False).items():
        rows = [memory(n, pre, env) for _ in range(5)]
        rss, pss = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
        out.append(f"| {n} | {rows[0][2]} | {rss / 1024:.2f} MB | {pss / 1024:.2f} MB |")
    out += ["", f"#### Stop a tree whose grandchild ignores SIGTERM (proctree: --grace {GRACE}), median of 5", ""]
    out += ["| init | not PID 1 | grandchild | as PID 1 |", "|---|---|---|---|"]
    for n, (pre, env) in inits(False).items():
        if n.startswith("proctree-init") or n.startswith("python"):
            pre = [*pre[:-1], "--grace", GRACE, "--"] if pre[-1] == "--" else pre
        pre1 = inits(True)[n][0]
        if n.startswith("proctree-init") or n.startswith("python"):
            pre1 = [*pre1[:-1], "--grace", GRACE, "--"]
        rows = [stop_time(pre, env, False) for _ in range(5)]
        rows1 = [stop_time(pre1, env, True) for _ in range(5)]
        leaked = "left running" if any(r[1] for r in rows) else "ended"
        out.append(
            f"| {n} | {statistics.median(r[0] for r in rows) * 1e3:.0f} ms | {leaked} | "
            f"{statistics.median(r[0] for r in rows1) * 1e3:.0f} ms |"
        )
    text = "\n".join(out)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
