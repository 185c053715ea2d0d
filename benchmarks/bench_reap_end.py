"""Benchmark for the orphan reaper's ending side, two checkouts side by side, interleaved round by round.

    python benchmarks/bench_reap_end.py [--rounds N] [--against DIR] [--markdown]

Each round, in a fresh process per checkout (this one, and DIR when given:
another checkout of proctree, built in place), TREES orphaned trees are
made (an owner spawns `sh` with two `sleep`s, half in cgroup mode where
cgroups are writable, half in session mode; the owner and its keeper are
then SIGKILLed, so the owner is provably gone), and reap_orphans() ends
them, scoped by within= to those trees' pids:

  (a) cooperative: the trees exit on SIGTERM (grace 2 s: the time is the
      selection plus how fast the exits are seen);
  (b) TERM-ignoring: the trees ignore SIGTERM (grace 0.3 s: every tree and
      cgroup must cost one grace together, not one each).

Prints the medians of reap_orphans()'s elapsed time per checkout and the
ratio this checkout / DIR. The reap is scoped to the processes this script
made (within=), so it can end nothing else; whatever a round leaves is
SIGKILLed by identity (pid and start time) before the next. Linux only.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREES = 4
CASES = {"cooperative": ("", 2.0), "TERM-ignoring": ("trap '' TERM; ", 0.3)}

OWNER = r"""
import sys, time, proctree
t = proctree.spawn(["sh", "-c", sys.argv[2] + "sleep 300 & sleep 300 & wait"], contain=sys.argv[1])
while len(t.members()) < 3:  # sh and its two sleeps (the keeper is not a member)
    time.sleep(0.005)
print(t.keeper_pid, *[p.pid for p in t.members()], flush=True)
time.sleep(300)
"""


def _start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _orphans(modes, prefix):
    """Make one orphaned tree per mode; {pid: start time} of their members."""
    members = {}
    for mode in modes:
        o = subprocess.Popen([sys.executable, "-c", OWNER, mode, prefix], stdout=subprocess.PIPE, text=True)
        keeper, *pids = map(int, o.stdout.readline().split())
        for sig in (signal.SIGSTOP, signal.SIGKILL):  # both stopped, then both killed: neither ends the tree
            for pid in (o.pid, keeper):
                os.kill(pid, sig)  # our child, and the keeper it reported, unreaped: both still theirs
        o.wait()
        members.update((pid, _start_time(pid)) for pid in pids)
    return members


def _clean(members):
    """SIGKILL what a round left, each only if it is still the process that was made."""
    for pid, start in members.items():
        if start is not None and _start_time(pid) == start:
            os.kill(pid, signal.SIGKILL)


def child(repo):
    """One round in this process, with proctree imported from repo; prints {case: seconds}."""
    sys.path.insert(0, repo)
    import proctree
    from proctree._containment import cgroup

    modes = ["cgroup", "session"] if cgroup.find_mount() and os.geteuid() == 0 else ["session"]
    modes = (modes * TREES)[:TREES]
    out = {}
    for case, (prefix, grace) in CASES.items():
        members = _orphans(modes, prefix)
        try:
            rep = proctree.reap_orphans(grace=grace, within=list(members))
            # A member the selection could not prove (its environment unreadable at that instant) is
            # left out of the reap, and SIGKILLed below: timed all the same, the teardowns are the same.
            out[case] = rep.elapsed
        finally:
            _clean(members)
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--against", help="another proctree checkout (built in place) to run side by side")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return
    repos = {"this": REPO, **({"against": os.path.abspath(args.against)} if args.against else {})}
    samples = {(name, case): [] for name in repos for case in CASES}
    for _ in range(args.rounds):
        for name, repo in repos.items():
            r = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--child", repo],
                capture_output=True,
                text=True,
                cwd="/",
            )
            if r.returncode != 0:
                sys.exit(f"the round with {repo} failed:\n{r.stderr[-3000:]}")
            for case, secs in json.loads(r.stdout.strip().splitlines()[-1]).items():
                samples[(name, case)].append(secs)
    med = {k: statistics.median(v) for k, v in samples.items()}
    head = f"reap_orphans() ending {TREES} orphaned trees, median of {args.rounds} interleaved rounds"
    rows = []
    for case, (_, grace) in CASES.items():
        cells = [f"{med[(name, case)] * 1000:.1f} ms" for name in repos]
        ratio = f"{med[('this', case)] / med[('against', case)]:.2f}x" if "against" in repos else ""
        rows.append((f"{case} (grace {grace} s)", *cells, ratio))
    names = list(repos) + (["this / against"] if "against" in repos else [])
    if args.markdown:
        print(head, "", "| case | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|", sep="\n")
        for row in rows:
            print("| " + " | ".join(c for c in row if c != "") + " |")
    else:
        print(head)
        for row in rows:
            print("  ".join(f"{c:>22}" for c in row if c != ""))


if __name__ == "__main__":
    main()
