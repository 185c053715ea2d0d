"""`proctree tree [PID] [--json]`: draw the process tree like pstree."""
import json
import sys

import proctree

from ._common import fail, parse_pid


def register(sub):
    p = sub.add_parser("tree", help="draw the process tree (pid, pgid, sid, state, name)")
    p.add_argument("pid", nargs="?", help="root of the tree to draw (default: the whole table)")
    p.add_argument("--json", action="store_true", help="print the tree as JSON")
    p.set_defaults(run=run)


def _node(snap, pid, seen):
    p = snap[pid]
    seen.add(pid)
    return {
        **p._asdict(),
        "children": [_node(snap, c, seen) for c in snap.child_pids(pid) if c not in seen],
    }


def _draw(snap, pid, prefix, last, out, seen, top):
    p = snap[pid]
    seen.add(pid)
    label = f"{p.pid} [pgid {p.pgid} sid {p.sid} {p.state}] {p.name!s}".replace("\n", "\\n")
    out.write((label if top else prefix + ("└─ " if last else "├─ ") + label) + "\n")
    kids = [c for c in snap.child_pids(pid) if c not in seen]
    child_prefix = "" if top else prefix + ("   " if last else "│  ")
    for i, c in enumerate(kids):
        _draw(snap, c, child_prefix, i == len(kids) - 1, out, seen, False)


def run(args, out=None):
    out = out or sys.stdout
    snap = proctree.snapshot()
    if args.pid is None:
        roots = [pid for pid, p in snap.items() if p.ppid not in snap or p.ppid == pid]
    else:
        pid = parse_pid(args.pid)
        if pid not in snap:
            return fail(f"no process with pid {pid}")
        roots = [pid]
    seen = set()
    if args.json:
        json.dump([_node(snap, r, seen) for r in roots], out, indent=2)
        out.write("\n")
    else:
        for r in roots:
            _draw(snap, r, "", True, out, seen, True)
    return 0
