"""`proctree tree [PID] [--names] [--stats] [-k] [-q|-v] [--json]`: draw the process tree like pstree.

Each process is shown with its command line (argv, escaped like names, cut to
the terminal's width as ps cuts it; -v never cuts), or its name in brackets
where it has none to read (kernel threads, zombies, another user's process
the system will not show); --names shows names only, as before.

The walk is iterative (a chain thousands deep draws like any other tree),
and the JSON form is flat, one record per process in drawing order with its
depth and child pids: nested JSON as deep as the tree is more than common
parsers accept (Python's json.loads stops near 500 levels of processes).

Kernel threads (PF_KTHREAD in their stat flags, read with the facts; never
guessed from a parent pid of 2, which an ordinary process has in a pid
namespace) are left out unless -k asks for them, or PID is one. --stats adds
each process's rss and CPU time, and below a process with children the summed
usage of its subtree, from one facts read pinned to the snapshot's start times
(a process gone by then shows "-" and counts nowhere).
Reads one snapshot; never signals anything.
"""

import os
import sys

import proctree

from . import _usageview
from ._common import CliError, add_output_options, cut, parse_pid, printable, subcommand, write_json


def register(sub):
    p = subcommand(
        sub,
        "tree",
        run=run,
        description="Draw the process tree below PID (default: every process), each process with its "
        "command line, cut to the terminal's width.",
        statuses=[("0", "drawn"), ("2", "bad input, or no process PID")],
    )
    p.add_argument("pid", nargs="?", metavar="PID", help="root of the tree to draw (default: the whole table)")
    p.add_argument("--names", action="store_true", help="show process names, not command lines")
    p.add_argument(
        "--stats",
        action="store_true",
        help="add each process's rss and CPU time (user+system), and each subtree's summed usage (Linux)",
    )
    p.add_argument(
        "-k", "--kernel", action="store_true", help="show kernel threads too (hidden unless PID is one of them)"
    )
    add_output_options(
        p,
        quiet="print only the pids, one per line, in drawing order",
        verbose="never cut command lines to the terminal's width",
        json_help='print {"ok": true, "roots": [...], "procs": [...]} (one record per process, in drawing '
        "order, with its argv)",
    )


def table_roots(snap):
    """Pids whose parent is not in the snapshot (or is themselves), ascending: the roots of the whole table."""
    return [pid for pid, p in snap.items() if p.ppid == pid or p.ppid not in snap]


def walk(snap, roots, everything=False, hidden=frozenset()):
    """Yield (pid, depth, is_last_child, child_pids) in drawing order, each pid once.

    Pre-order, children in pid order, with an explicit stack (no recursion
    limit). child_pids are the children drawn below pid. With everything=True,
    processes no root reaches (a parent-link cycle) follow, from their lowest pid.
    hidden: pids not drawn, nor anything below them.
    """
    seen = set(hidden)

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


def argv_of(pid):
    """pid's argv; [] for a kernel thread or a zombie; None when it cannot be read (gone, or not ours to read)."""
    try:
        return proctree.cmdline(pid)
    except (proctree.Error, OSError):
        return None


def argvs_of(snap, steps):
    """pid -> argv for every pid drawn, None where it cannot be vouched for.

    argv is read by pid after the snapshot, so a pid may have been reused
    meanwhile: a second snapshot keeps only the argvs whose pid still names
    the same process (same start time); the others show their names.
    """
    argvs = {pid: argv_of(pid) for pid, _, _, _ in steps}
    again = proctree.snapshot()
    for pid in argvs:
        now = again.get(pid)
        if now is None or now.start_time != snap[pid].start_time:
            argvs[pid] = None
    return argvs


def shown_command(p, argv):
    """What a line shows for p: its argv joined by spaces and escaped, else its name in brackets (as ps does)."""
    if argv:
        return printable(" ".join(argv))
    return f"[{printable(p.name)}]"


def label(p, argv=None, names=True, stats=None):
    """One process's line; stats: its --stats columns, put before the command, which a width cuts."""
    what = printable(p.name) if names else shown_command(p, argv)
    columns = "" if stats is None else f"{stats} "
    return f"{p.pid} [pgid {p.pgid} sid {p.sid} {p.state}] {columns}{what}"


def stats_columns(steps, facts):
    """pid -> the --stats columns of each drawn process: its own rss and CPU ("-" where it was gone), and,
    below a process with children, its subtree's summed usage in braces."""
    sums = _usageview.subtree_usage(steps, facts)
    out = {}
    for pid, _, _, kids in steps:
        f = facts.get(pid)
        own = "rss - cpu -" if f is None else _usageview.proc_columns(f)
        out[pid] = f"{own} {{{_usageview.summary(sums[pid])}}}" if kids else own
    return out


def draw(snap, steps, out, argvs=None, width=None, stats=None):
    """Write the walk as a pstree-like drawing, one line per process.

    argvs: pid -> argv to show command lines (names without it); width: cut each line to it;
    stats: pid -> --stats columns (stats_columns()).
    """
    rails: list[str] = []  # rails[d]: what runs down the column of depth d+1 below the current line
    for pid, depth, last, _ in steps:
        columns = None if stats is None else stats[pid]
        text = label(snap[pid], None if argvs is None else argvs.get(pid), names=argvs is None, stats=columns)
        if depth == 0:
            out.write(cut(text, width) + "\n")
            rails.clear()
            continue
        del rails[depth - 1 :]
        out.write(cut("".join(rails) + ("└─ " if last else "├─ ") + text, width) + "\n")
        rails.append("   " if last else "│  ")


def document(snap, steps, argvs=None, facts=None):
    """The --json form: {"ok": true, "roots": [...], "procs": [{Proc fields, argv, depth, children}, ...]}.

    argv is [] for a kernel thread or a zombie, null where it could not be read. With facts (--stats) each
    record also has "usage" (its own: rss, vms, cpu_user, cpu_system; null where it was gone) and
    "subtree" (the Usage of it and everything below it, as a dict).
    """
    argvs = {} if argvs is None else argvs
    procs = [
        {**snap[pid]._asdict(), "argv": argvs.get(pid), "depth": depth, "children": kids}
        for pid, depth, _, kids in steps
    ]
    if facts is not None:
        sums = _usageview.subtree_usage(steps, facts)
        for record in procs:
            f = facts.get(record["pid"])
            record["usage"] = (
                None if f is None else {k: getattr(f, k) for k in ("rss", "vms", "cpu_user", "cpu_system")}
            )
            record["subtree"] = sums[record["pid"]].to_dict()
    return {"ok": True, "roots": [p["pid"] for p in procs if p["depth"] == 0], "procs": procs}


def terminal_width(out):
    """The width to cut lines to: the terminal's when out is one, else $COLUMNS if set, else None (no cut)."""
    try:
        if out.isatty():
            return os.get_terminal_size(out.fileno()).columns
    except (AttributeError, ValueError, OSError):
        pass
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isascii() and columns.isdigit() and int(columns) > 0 else None


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
    want_stats = getattr(args, "stats", False)
    if want_stats:
        _usageview.require_facts()
    steps = list(walk(snap, roots, everything=pid is None))
    facts = _usageview.facts_by_pid([snap[p] for p, _, _, _ in steps])  # only what is drawn: a subtree's, not all
    if not getattr(args, "kernel", False) and not (pid is not None and _kernel_thread(facts, pid)):
        hidden = {p for p, f in facts.items() if f.kernel_thread}
        if hidden:
            steps = list(walk(snap, roots, everything=pid is None, hidden=hidden))
    if getattr(args, "quiet", False) and not args.json:
        out.write("".join(f"{pid}\n" for pid, _, _, _ in steps))
        return 0
    argvs = None if getattr(args, "names", False) and not args.json else argvs_of(snap, steps)
    if args.json:
        write_json(document(snap, steps, argvs, facts if want_stats else None), out)
    else:
        stats = stats_columns(steps, facts) if want_stats else None
        width = None if getattr(args, "verbose", False) else terminal_width(out)
        draw(snap, steps, out, argvs, width=width, stats=stats)
    return 0


def _kernel_thread(facts, pid):
    f = facts.get(pid)
    return f is not None and f.kernel_thread
