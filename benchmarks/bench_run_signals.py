"""`proctree run`'s start-up window for signals, side by side in one run: medians.

From the parent's Popen of `python -m proctree run --no-pty -- sleep 30`, two
moments, read by polling the runner's /proc/PID/status:

1. held: SIGTERM is in SigBlk (main()'s first line blocked the forwarded
   signals): from here on a signal is queued and forwarded to CMD.
2. handler: SIGTERM is in SigCgt (run() installed its handlers, where the
   handlers used to be the first protection): before this, a signal used to
   be lost or kill the runner.

Each round ends its runner with SIGTERM (forwarded: exit 143) and waits for
it. Every process started here is ended here. Linux only.
Usage: python benchmarks/bench_run_signals.py [--rounds N]
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIT = 1 << (signal.SIGTERM - 1)


def mask(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith(field + ":")).split()[1], 16)


def one_round():
    """(held, handler) seconds after Popen, for one runner."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "proctree", "run", "--no-pty", "--", "sleep", "30"], env=env)
    held = handler = None
    try:
        while handler is None:
            assert p.poll() is None and time.monotonic() - t0 < 30, "the runner ended or hung"
            try:
                if held is None and mask(p.pid, "SigBlk") & BIT:
                    held = time.monotonic() - t0
                if mask(p.pid, "SigCgt") & BIT:
                    handler = time.monotonic() - t0
            except (OSError, StopIteration):  # /proc not there yet
                pass
    finally:
        p.send_signal(signal.SIGTERM)  # held or handled by now: forwarded to sleep
        p.wait(timeout=30)
    return held if held is not None else handler, handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    rows = [one_round() for _ in range(args.rounds)]
    for i, name in enumerate(("held (SigBlk)", "handler (SigCgt)")):
        xs = sorted(r[i] * 1000 for r in rows)
        print(f"{name:18} median {statistics.median(xs):6.1f} ms  min {xs[0]:6.1f}  max {xs[-1]:6.1f}")


if __name__ == "__main__":
    main()
