"""`proctree up` vs `honcho start`: start and stop time on the same well-behaved Procfile, in one run.

Issue #22 asks what switching costs a honcho user in time. The Procfile is the
kind honcho users run: --entries entries (default 4), each a shell that prints
one line and then waits (`echo ready; exec sleep 300`), nothing ignoring a
signal, nothing leaving the tree. Each runner, started in a session of its
own with stdout to a pipe, is timed on:

1. start: from exec to every entry's line seen in its output (the runner's
   own startup, the Procfile and .env read, each entry spawned and its output
   relayed);
2. stop: from one SIGINT to the runner's exit, every entry ending on the
   SIGTERM it gets (honcho's Ctrl+C);
3. a run to completion: a Procfile whose first entry is `true` and whose
   second waits; from exec to exit (start, foreman's "one ends, all stop",
   stop, all in one).

Rounds are interleaved (one of each runner per round), so machine noise hits
both alike; medians and ratios (honcho / proctree up) are printed, as text
or Markdown (--markdown FILE). After each run, what the run started and left
(processes carrying this run's marker, pid and start time checked) is
counted, then killed with the runner: nothing else is signalled.

honcho: from --honcho PATH, else beside this Python, else pip-installed into
a temporary venv (skip that with --no-install: then only proctree up is
measured, and the report says honcho is missing). Linux only.

Usage: python benchmarks/bench_up_honcho.py [--rounds N] [--entries N] [--honcho PATH]
                                          [--no-install] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_supervisor import MARKER, PY, kill_marked, marked, version_of  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_honcho(given, install):
    """The honcho program to measure, or None (said in the report)."""
    if given:
        return given if os.access(given, os.X_OK) else None
    beside = os.path.join(os.path.dirname(PY), "honcho")
    if os.access(beside, os.X_OK):
        return beside
    if not install:
        return None
    venv = os.path.join(tempfile.gettempdir(), "proctree-bench-honcho")
    program = os.path.join(venv, "bin", "honcho")
    if not os.access(program, os.X_OK):
        if not os.path.exists(os.path.join(venv, "bin", "pip")):
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        r = subprocess.run(
            [os.path.join(venv, "bin", "pip"), "install", "-q", "honcho"], capture_output=True, text=True
        )
        if r.returncode != 0:
            print(f"# pip could not install honcho: {r.stderr.strip()[-400:]}", file=sys.stderr)
    return program if os.access(program, os.X_OK) else None


def command(runner, d, honcho):
    if runner == "proctree up":
        return [PY, "-m", "proctree", "up", "--grace", "5", "-f", f"{d}/Procfile"]
    return [honcho, "-f", f"{d}/Procfile", "-d", d, "start"]  # honcho's grace: 5 s, fixed


# Both runners' bytecode is cached in one folder of this run's (a checkout's proctree would
# otherwise be compiled from source on every start where PYTHONDONTWRITEBYTECODE is set,
# while a pip-installed honcho has its .pyc files: 0.1 s of difference that is not the runner's).
PYCACHE = tempfile.mkdtemp(prefix="bench-up-honcho-pycache-")


def launch(runner, d, honcho, nonce):
    env = {**os.environ, MARKER: nonce, "NO_COLOR": "1", "PYTHONPATH": ROOT, "PYTHONPYCACHEPREFIX": PYCACHE}
    for name in ("PROCFILE", "PORT", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    return subprocess.Popen(
        command(runner, d, honcho),
        env=env,
        cwd=d,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for_lines(proc, needles, deadline):
    """Read the runner's output until every needle has been seen; False if it ended or time ran out."""
    wanted = set(needles)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf = b""
    try:
        while wanted and time.monotonic() < deadline:
            if not sel.select(timeout=0.5):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                return False
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                text = line.decode(errors="replace")
                wanted -= {n for n in wanted if text.endswith(n)}
        return not wanted
    finally:
        sel.unregister(proc.stdout)


def start_stop_round(runner, entries, honcho):
    """(seconds to every entry's line, seconds from SIGINT to exit, processes left) for one run."""
    d = tempfile.mkdtemp(prefix="bench-up-honcho-")
    names = [f"e{i}" for i in range(entries)]
    with open(os.path.join(d, "Procfile"), "w") as f:
        f.writelines(f"{n}: echo ready {n}; exec sleep 300\n" for n in names)
    nonce = secrets.token_hex(8)
    t0 = time.perf_counter()
    proc = launch(runner, d, honcho, nonce)
    try:
        if not wait_for_lines(proc, [f"| ready {n}" for n in names], time.monotonic() + 60):
            raise RuntimeError(f"{runner} did not start every entry (exit {proc.poll()})")
        started = time.perf_counter() - t0
        time.sleep(0.2)  # let every entry settle into its sleep
        t1 = time.perf_counter()
        proc.send_signal(signal.SIGINT)  # the runner: started here, in a session of its own
        proc.stdout.read()  # drain, so a blocked write never holds the runner
        proc.wait(60)
        stopped = time.perf_counter() - t1
        time.sleep(0.5)
        left = len([p for p in marked(nonce, d) if p.pid != proc.pid])
        return started, stopped, left
    finally:
        kill_marked(nonce, d, proc)
        proc.wait()
        proc.stdout.close()
        shutil.rmtree(d, ignore_errors=True)


def completion_round(runner, honcho):
    """Seconds from exec to exit for `a: true` beside `b: exec sleep 300`; and processes left."""
    d = tempfile.mkdtemp(prefix="bench-up-honcho-")
    with open(os.path.join(d, "Procfile"), "w") as f:
        f.write("a: true\nb: exec sleep 300\n")
    nonce = secrets.token_hex(8)
    t0 = time.perf_counter()
    proc = launch(runner, d, honcho, nonce)
    try:
        proc.stdout.read()
        proc.wait(60)
        took = time.perf_counter() - t0
        left = len([p for p in marked(nonce, d) if p.pid != proc.pid])
        return took, left
    finally:
        kill_marked(nonce, d, proc)
        proc.wait()
        proc.stdout.close()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--entries", type=int, default=4)
    ap.add_argument("--honcho", help="the honcho program to measure")
    ap.add_argument("--no-install", action="store_true")
    ap.add_argument("--markdown")
    args = ap.parse_args()

    honcho = find_honcho(args.honcho, not args.no_install)
    runners = ["proctree up"] + (["honcho"] if honcho else [])
    load = os.getloadavg()[0]
    out = [
        f"# {platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at the start"
    ]
    if not honcho:
        out.append("# honcho: not available (not found, and not installed): proctree up alone")
    samples = {r: {"start": [], "stop": [], "left": [], "run": [], "run_left": []} for r in runners}
    try:
        for r in runners:  # a warm-up run each, not counted: the bytecode cached, the page cache warm
            completion_round(r, honcho)
        measure(args, runners, honcho, samples)
    finally:
        shutil.rmtree(PYCACHE, ignore_errors=True)
    report(args, runners, honcho, samples, out)


def measure(args, runners, honcho, samples):
    for i in range(args.rounds):
        for r in runners:
            started, stopped, left = start_stop_round(r, args.entries, honcho)
            took, run_left = completion_round(r, honcho)
            s = samples[r]
            s["start"].append(started)
            s["stop"].append(stopped)
            s["left"].append(left)
            s["run"].append(took)
            s["run_left"].append(run_left)
            print(f"round {i + 1} {r}: start {started:.3f} s, stop {stopped:.3f} s, run {took:.3f} s", file=sys.stderr)


def report(args, runners, honcho, samples, out):
    med = statistics.median
    label = {"proctree up": "proctree up", "honcho": version_of(honcho) if honcho else "honcho"}
    if label["honcho"] and not label["honcho"].startswith("honcho"):
        label["honcho"] = f"honcho {label['honcho']}"
    out.append("")
    out.append(
        f"{args.entries} entries (`echo ready; exec sleep 300`), stdout to a pipe, {args.rounds} interleaved rounds (medians):"
    )
    out.append("")
    out.append(
        "| runner | start: exec to every entry's line | stop: SIGINT to exit | run of `a: true` + a waiter, exec to exit | processes left | vs proctree up (start / stop / run) |"
    )
    out.append("|---|---|---|---|---|---|")
    ours = samples["proctree up"]
    for r in runners:
        s = samples[r]
        ratio = " / ".join(f"{med(s[k]) / med(ours[k]):.2f}" for k in ("start", "stop", "run"))
        out.append(
            f"| {label[r]} | {med(s['start']) * 1000:.0f} ms | {med(s['stop']) * 1000:.0f} ms | "
            f"{med(s['run']) * 1000:.0f} ms | {max(s['left'] + s['run_left'])} | {ratio} |"
        )
    text = "\n".join(out)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
