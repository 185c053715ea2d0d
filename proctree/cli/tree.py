"""`proctree tree [PID] [--json]`: draw the process tree like pstree.

The walk is iterative (a chain thousands deep draws like any other tree),
and the JSON form is flat, one record per process in drawing order with its
depth and child pids: nested JSON as deep as the tree is more than common
parsers accept (Python's json.loads stops near 500 levels of processes).
Reads one snapshot; never signals anything.
"""

import json
import sys

import proctree

from ._common import CliError, parse_pid, printable


def register(sub):
    p = sub.add_parser(
        "tree",
        help="draw the process tree (pid, pgid, sid, state, name)",
        description="Draw the process tree below PID (default: every process).",
    )
    p.add_argument("pid", nargs="?", metavar="PID", help="root of the tree to draw (default: the whole table)")
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"ok": true, "roots": [...], "procs": [...]} (one record per process, in drawing order)',
    )
    p.set_defaults(run=run)


def table_roots(snap):
    """Pids whose parent is not in the snapshot (or is themselves), ascending: the roots of the whole table."""
    return [pid for pid, p in snap.items() if p.ppid == pid or p.ppid not in snap]


def walk(snap, roots, everything=False):
    """Yield (pid, depth, is_last_child, child_pids) in drawing order, each pid once.

    Pre-order, children in pid order, with an explicit stack (no recursion
    limit). child_pids are the children drawn below pid. With everything=True,
    processes no root reaches (a parent-link cycle) follow, from their lowest pid.
    """
    seen = set()

    def from_root(root):
        seen.add(root)
        stack = [(root, 0, True)]
        while stack:
            pid, depth, last = stack.pop()
            kids = [c for c in snap.child_pids(pid) if c not in seen]
            seen.update(kids)
            yield pid, depth, last, kids
            stack.extend((c, depth + 1, i == 0) for i, c in enumerate(reversed(kids)))

    for root in roots:
        if root not in seen:
            yield from from_root(root)
    if everything:
        for pid in snap:
            if pid not in seen:
                yield from from_root(pid)


def label(p):
    return f"{p.pid} [pgid {p.pgid} sid {p.sid} {p.state}] {printable(p.name)}"


def draw(snap, steps, out):
    """Write the walk as a pstree-like drawing, one line per process."""
    rails: list[str] = []  # rails[d]: what runs down the column of depth d+1 below the current line
    for pid, depth, last, _ in steps:
        if depth == 0:
            out.write(label(snap[pid]) + "\n")
            rails.clear()
            continue
        del rails[depth - 1 :]
        out.write("".join(rails) + ("└─ " if last else "├─ ") + label(snap[pid]) + "\n")
        rails.append("   " if last else "│  ")


def document(snap, steps):
    """The --json form: {"ok": true, "roots": [...], "procs": [{Proc fields, depth, children}, ...]}."""
    procs = [{**snap[pid]._asdict(), "depth": depth, "children": kids} for pid, depth, _, kids in steps]
    return {"ok": True, "roots": [p["pid"] for p in procs if p["depth"] == 0], "procs": procs}


def run(args, out=None):
    out = out or sys.stdout
    pid = None if args.pid is None else parse_pid(args.pid)
    snap = proctree.snapshot()
    if pid is None:
        roots = table_roots(snap)
    elif pid in snap:
        roots = [pid]
    else:
        raise CliError(f"no process with pid {pid}", kind="NoSuchProcess", pid=pid)
    steps = walk(snap, roots, everything=pid is None)
    if args.json:
        json.dump(document(snap, steps), out, indent=2)
        out.write("\n")
    else:
        draw(snap, steps, out)
    return 0
