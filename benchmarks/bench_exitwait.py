"""The teardown's exit waiter on its own: exitwait.make_waiter() against a bare epoll set, side by side.

    python benchmarks/bench_exitwait.py [--members N] [--rounds R]

N real children (`sleep 60`, ours, each ended with its Popen and reaped at the
end) are held by pidfds. Each round times, per method, the waiter's life in a
teardown: made, every member watched, ready() asked while all run (nothing
to report), then, once every member is killed and a zombie, ready() until all
are reported, and closed. The floor does the same with select.epoll directly.
Rounds interleave the methods, so machine noise spreads over both; the table
shows medians and the ratio to the floor. Run it in two checkouts to compare
them (it imports the proctree beside it). Linux with pidfds only.
"""

import argparse
import os
import select
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import proctree  # noqa: E402
from proctree._teardown import exitwait as _exitwait  # noqa: E402
from proctree._teardown import signals as _signals  # noqa: E402


def _floor(targets):
    """(watch and a look, collect) with a bare epoll set: the least any waiter can do."""
    t0 = time.perf_counter()
    ep = select.epoll()
    for t in targets:
        ep.register(t.pidfd, select.EPOLLIN)
    ep.poll(0, 256)
    t1 = time.perf_counter()
    return ep, t1 - t0


def _floor_collect(ep, n):
    t0 = time.perf_counter()
    seen = 0
    while seen < n:
        for fd, _ in ep.poll(0, 256):
            ep.unregister(fd)
            seen += 1
    ep.close()
    return time.perf_counter() - t0


def _waiter(targets):
    t0 = time.perf_counter()
    w = _exitwait.make_waiter(True)
    for t in targets:
        w.watch(t)
    w.ready()
    t1 = time.perf_counter()
    return w, t1 - t0


def _waiter_collect(w, n):
    t0 = time.perf_counter()
    seen = 0
    while seen < n:
        seen += len(w.ready())
    w.close()
    return time.perf_counter() - t0


def _round(n, make, collect):
    """One method's (watch, collect) seconds on n fresh children."""
    kids = [subprocess.Popen(["sleep", "60"]) for _ in range(n)]
    targets = []
    try:
        for p in kids:
            targets.append(_signals.Target(proctree.proc(p.pid), _signals.open_pidfd(p.pid)))
        handle, watch = make(targets)
        for p in kids:
            p.kill()
        for p in kids:
            os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # a zombie, not reaped: what a teardown sees
        return watch, collect(handle, n)
    finally:
        for p in kids:
            if p.returncode is None:
                p.kill()
            p.wait()
        for t in targets:
            if t.pidfd is not None:
                os.close(t.pidfd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    if not (sys.platform.startswith("linux") and _signals.pidfds_available()):
        sys.exit("needs Linux with pidfds")
    methods = {"floor: bare epoll": (_floor, _floor_collect), "exitwait.make_waiter": (_waiter, _waiter_collect)}
    times = {name: ([], []) for name in methods}
    for _ in range(args.rounds):
        for name, (make, collect) in methods.items():
            watch, gather = _round(args.members, make, collect)
            times[name][0].append(watch)
            times[name][1].append(gather)
    print(f"exit waiter, {args.members} members, {args.rounds} rounds, proctree from {proctree.__file__}")
    print(f"{'method':28} {'watch+look':>12} {'collect':>12} {'ratio watch':>12} {'ratio collect':>14}")
    floor_w, floor_c = (statistics.median(x) for x in times["floor: bare epoll"])
    for name, (w, c) in times.items():
        mw, mc = statistics.median(w), statistics.median(c)
        print(f"{name:28} {mw * 1e6:9.0f} us {mc * 1e6:9.0f} us {mw / floor_w:11.2f}x {mc / floor_c:13.2f}x")


if __name__ == "__main__":
    main()
