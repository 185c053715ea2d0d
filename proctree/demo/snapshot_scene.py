"""Demo scene: read the process table and walk a live tree it starts itself."""
import os
import subprocess
import sys
import time

import proctree

TITLE = "1. Snapshot: the process table, and one subtree, read fast"

# A parent with two children, one of which has its own child; each reports
# its pid on the pipe once it runs, so the scene never guesses by sleeping.
_TREE = r"""
import os, sys, time
w = int(sys.argv[1])
def child(depth):
    if os.fork() == 0:
        if depth:
            child(depth - 1)
        os.write(w, b"%d\n" % os.getpid())
        time.sleep(60)
        os._exit(0)
os.write(w, b"%d\n" % os.getpid())
child(1)
child(0)
time.sleep(60)
"""


def _start_tree():
    r, w = os.pipe()
    p = subprocess.Popen([sys.executable, "-c", _TREE, str(w)], pass_fds=(w,))
    os.close(w)
    pids = []
    with os.fdopen(r, "rb") as f:
        while len(pids) < 4:
            line = f.readline()
            if not line:
                break
            pids.append(int(line))
    return p, pids


def run(out):
    t = time.perf_counter()
    snap = proctree.snapshot()
    ms = (time.perf_counter() - t) * 1e3
    out.write(f"snapshot(): {len(snap)} processes in {ms:.2f} ms\n")
    me = snap[os.getpid()]
    out.write(f"this process: {me}\n")
    out.write(f"its ancestors: {' <- '.join(f'{a.pid} {a.name}' for a in snap.ancestors(me.pid))}\n")

    p, pids = _start_tree()
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
        ok = sorted(d.pid for d in found) == sorted(pids[1:])
        out.write("  (matches the pids the tree reported)\n" if ok else "  MISMATCH with the pids the tree reported\n")
        return ok
    finally:
        # The scene's own tree, ended the way proctree ends trees (identity-checked).
        if p.poll() is None:
            proctree.terminate_tree(p.pid, grace=0.5)
        p.wait()
