"""`proctree kill PID [--grace S] [--json]`: end a process and its whole tree, print the report.

Exit status: 0 when nothing of the tree survived, 1 when something did (see
"survivors"), 2 for bad input or a pid that is not there. All policy lives in
proctree.terminate_tree; this only parses and prints.
"""
import json
import sys

import proctree

from ._common import fail, parse_pid


def register(sub):
    p = sub.add_parser("kill", help="end a process and everything it started (TERM, then KILL after the grace)")
    p.add_argument("pid", help="root of the tree to end")
    p.add_argument("--grace", type=float, default=2.0, metavar="S", help="seconds between SIGTERM and SIGKILL (default 2)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(run=run)


def _line(p):
    return f"{p.pid:>7}  {p.state}  {p.name}".replace("\n", "\\n")


def _print_text(report, out):
    r = report
    out.write(
        f"tree of {r.root.pid} ({r.root.name}): {len(r.found)} found, {len(r.exited)} exited, "
        f"{len(r.killed)} killed, {len(r.survivors)} survived, {len(r.late)} late"
        f"{', TRUNCATED' if r.truncated else ''} in {r.elapsed * 1e3:.1f} ms\n"
    )
    for title, procs in (("killed (needed SIGKILL)", r.killed), ("denied", r.denied), ("SURVIVORS", r.survivors)):
        if procs:
            out.write(f"{title}:\n")
            for p in procs:
                out.write(f"  {_line(p)}\n")
    if r.extra.get("spared"):
        out.write(f"spared (the caller or its ancestors): {r.extra['spared']}\n")


def run(args, out=None):
    out = out or sys.stdout
    pid = parse_pid(args.pid)
    try:
        report = proctree.terminate_tree(pid, grace=args.grace)
    except proctree.NoSuchProcess:
        return fail(f"no process with pid {pid}")
    except (ValueError, TypeError) as exc:
        return fail(str(exc))
    if args.json:
        json.dump(report.to_dict(), out, indent=2)
        out.write("\n")
    else:
        _print_text(report, out)
    return 0 if report.ok else 1
