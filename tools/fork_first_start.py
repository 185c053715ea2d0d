"""Children forked while another thread makes a process's first proctree.Popen: how many hang in their own.

Each trial is a fresh interpreter (a first start happens once per process):
one thread makes its first `proctree.Popen(["true"]).wait()` (the name's first
use imports what a start needs, then the holding keeper starts) while the
main thread, or a thread of its own, forks children at random moments of that
span, with os.fork() or multiprocessing's fork start method (half the trials
with the name already loaded, so that the forks land in the holding keeper's
start, where proctree's locks are held; and a third with the name loaded and
a first command that leaves a process behind, so that the forks land while
its leftovers are ended, which loads proctree's teardown). Each child makes
its own first Popen at once (in the third kind it also ends a tree with
proctree.terminate_tree, which needs that same teardown); one that has not finished within --patience
seconds is counted as hung (and killed: it is this run's own child). Issue 28's
acceptance: 0 hung out of 200. The stdlib's Popen, the same way, for comparison
(--stdlib).

Usage: python tools/fork_first_start.py [--children 200] [--per-trial 5] [--patience 10] [--stdlib]
Prints one line per way of forking and a total; exits 1 if any child hung.
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# argv: how ("fork" or "mp"), who forks ("main" or "thread"), children, patience, module ("proctree" or
# "subprocess"), and "loaded" (the name proctree.Popen used first: the span is the holding keeper's start alone,
# forks packed into it), "cold", or "leftovers" (the name loaded; the span is the ending of what the first
# command left, which loads the teardown modules).
TRIAL = r"""
import json, os, random, signal, sys, threading, time
how, who, n, patience, module = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
spacing = 0.001 if sys.argv[6] == "loaded" else 0.012
import subprocess
if module == "proctree":
    import proctree
    lib = proctree
    if sys.argv[6] != "cold":
        proctree.Popen
else:
    lib = subprocess
if how == "mp":
    import multiprocessing
    ctx = multiprocessing.get_context("fork")

leftovers = sys.argv[6] == "leftovers" and module == "proctree"

def first_start():
    if leftovers:  # the command leaves a sleep: ending it loads the teardown, forks meanwhile
        lib.Popen(["sh", "-c", "sleep 30 & exit 0"]).wait()
        time.sleep(0.2)
    else:
        lib.Popen(["true"]).wait()  # the name's first use too: proctree.Popen loads here

def in_child():
    signal.alarm(int(patience))  # a hung child ends by SIGALRM: counted as hung
    p = lib.Popen(["sleep", "30"] if leftovers else ["true"])
    if leftovers:
        lib.terminate_tree(p.pid, grace=1)
    p.wait()

def fork_children(out):
    for _ in range(n):
        time.sleep(random.uniform(0, spacing))
        if how == "fork":
            pid = os.fork()
            if pid == 0:
                try:
                    in_child()
                finally:
                    os._exit(0)
            out.append(pid)
        else:
            p = ctx.Process(target=in_child)
            p.start()
            out.append(p)

children = []
starter = threading.Thread(target=first_start)
starter.start()
if who == "main":
    fork_children(children)
else:
    forker = threading.Thread(target=fork_children, args=(children,))
    forker.start()
    forker.join()
starter.join()
hung = 0
for c in children:
    if how == "fork":
        _, status = os.waitpid(c, 0)
        code = os.waitstatus_to_exitcode(status)
    else:
        c.join(patience + 5)
        if c.exitcode is None:
            c.kill()
            c.join()
        code = c.exitcode
    hung += code != 0
print(json.dumps({"children": len(children), "hung": hung}))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--children", type=int, default=200)
    ap.add_argument("--per-trial", type=int, default=5)
    ap.add_argument("--patience", type=float, default=10.0)
    ap.add_argument("--stdlib", action="store_true", help="the same with subprocess.Popen")
    args = ap.parse_args()
    module = "subprocess" if args.stdlib else "proctree"
    # The trials import the proctree this run was given (PYTHONPATH) or the checkout's (a built checkout).
    env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH") or ROOT)
    kinds = ("cold", "loaded", "leftovers")
    ways = [(h, w, c) for c in kinds for h in ("fork", "mp") for w in ("main", "thread")]
    totals = {w: [0, 0] for w in ways}
    done = 0
    i = 0
    while done < args.children:
        way = ways[i % len(ways)]
        i += 1
        n = min(args.per_trial, args.children - done)
        how, who, cold = way
        argv = [sys.executable, "-c", TRIAL, how, who, str(n), str(args.patience), module, cold]
        out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120 + 2 * args.patience)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return 2
        result = json.loads(out.stdout.strip().splitlines()[-1])
        totals[way][0] += result["children"]
        totals[way][1] += result["hung"]
        done += result["children"]
    hung = 0
    for (how, who, cold), (n, h) in totals.items():
        name = "os.fork()" if how == "fork" else "multiprocessing fork"
        name += {
            "cold": " during the name's first use and the first start",
            "loaded": " during a first start",
            "leftovers": " while a first command's leftovers are ended",
        }[cold]
        print(
            f"{module}.Popen: {name} from {'the main thread' if who == 'main' else 'another thread'}: {h} of {n} hung"
        )
        hung += h
    print(f"{module}.Popen: {hung} of {done} children forked during first starts hung")
    return 1 if hung else 0


if __name__ == "__main__":
    sys.exit(main())
