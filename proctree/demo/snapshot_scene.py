"""Demo scene: read the process table and walk a live tree it starts itself."""

from __future__ import annotations

import os
import time

import proctree

from ._reports import Started

TITLE = "1. Snapshot: the process table, and one subtree, read fast"

# A parent with two children, one of which has its own child; each reports
# its pid once it runs (demo/_reports.py).
_TREE = r"""
def child(depth):
    if os.fork() == 0:
        if depth:
            child(depth - 1)
        report("child")
        time.sleep(60)
        os._exit(0)
report("parent")
child(1)
child(0)
time.sleep(60)
"""


def run(out):
    t = time.perf_counter()
    snap = proctree.snapshot()
    ms = (time.perf_counter() - t) * 1e3
    out.write(f"snapshot(): {len(snap)} processes in {ms:.2f} ms\n")
    me = snap[os.getpid()]
    out.write(f"this process: {me}\n")
    out.write(f"its ancestors: {' <- '.join(f'{a.pid} {a.name}' for a in snap.ancestors(me.pid))}\n")

    started = Started()
    p, reports = started.start(_TREE, 4)
    pids = [pid for _, pid in reports]
    try:
        if len(pids) != 4:
            out.write("could not start the demo tree\n")
            return False
        t = time.perf_counter()
        found = proctree.descendants(p.pid)
        us = (time.perf_counter() - t) * 1e6
        out.write(f"\nstarted a tree under pid {p.pid}; descendants() found {len(found)} in {us:.0f} µs:\n")
        for d in found:
            out.write(f"  pid {d.pid:>7}  ppid {d.ppid:>7}  state {d.state}  start_time {d.start_time}\n")
        ok = sorted(d.pid for d in found) == sorted(pid for role, pid in reports if role == "child")
        out.write("  (matches the pids the tree reported)\n" if ok else "  MISMATCH with the pids the tree reported\n")
        return ok
    finally:
        # The scene's own tree, ended the way proctree ends trees (identity-checked).
        if p.poll() is None:
            proctree.terminate_tree(p.pid, grace=0.5)
        started.end()
