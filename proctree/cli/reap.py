"""`proctree reap [--dry-run] [--json] [--grace S] [--tag TAG] [--protect RE] [--within PIDS]`: end orphans whose owner is provably gone.

Prints each candidate with its evidence, then what happened to it. Exit
status: 0 when nothing selected is left (or, with --dry-run, after listing),
1 when something survived, 2 for bad input (nothing was signalled then).
All policy lives in proctree.reap_orphans; this only parses and prints.
"""

import json
import sys

import proctree

from ._common import CliError, parse_pid, parse_seconds, printable


def register(sub):
    p = sub.add_parser(
        "reap",
        help="end processes whose owner is provably gone (PROCTREE_OWNER, leftover cgroups, receipts, rules)",
        description="Find processes whose owner is provably gone and end them (TERM, then KILL after the grace). "
        "A process without evidence, or whose owner is alive or unknown, is never touched. "
        "Exit 0 if nothing is left to reap, 1 if something survived, 2 on bad input.",
    )
    p.add_argument("--dry-run", action="store_true", help="list the candidates and their evidence; signal nothing")
    p.add_argument(
        "--grace", type=parse_seconds, default=2.0, metavar="S", help="seconds between SIGTERM and SIGKILL (default 2)"
    )
    p.add_argument("--tag", metavar="TAG", help="only trees spawned with this tag")
    p.add_argument(
        "--protect",
        action="append",
        default=[],
        metavar="RE",
        help="never a candidate when RE matches its command line (repeatable)",
    )
    p.add_argument(
        "--within",
        type=_parse_pids,
        action="append",
        metavar="PIDS",
        help="only these pids (comma-separated; repeatable, all count) may be candidates; "
        "the evidence is still read machine-wide",
    )
    p.add_argument("--json", action="store_true", help="print the report (or the error) as one JSON object")
    p.set_defaults(run=run)


def _parse_pids(text):
    return frozenset(parse_pid(t) for t in text.split(","))


def _union(scopes):
    return None if scopes is None else frozenset().union(*scopes)


def _print_text(r, out):
    verb = "would reap" if r.dry_run else "reaping"
    out.write(f"{len(r.candidates)} orphan(s){'' if r.candidates else ': nothing to reap'}\n")
    for o in r.candidates:
        out.write(f"  {verb} {o.proc.pid:>7} {printable(o.proc.name)}: {o.reason} via {printable(o.via)}: ")
        out.write(f"{printable(o.evidence)}\n")
    if not r.dry_run and r.candidates:
        out.write(
            f"{len(r.exited)} exited, {len(r.killed)} killed, {len(r.survivors)} survived, "
            f"{len(r.late)} late, in {r.elapsed * 1e3:.1f} ms\n"
        )
        for p in r.survivors:
            out.write(f"  SURVIVOR {p.pid:>7} {printable(p.name)}\n")
    for path in r.cgroups_removed:
        out.write(f"removed cgroup {printable(path)}\n")
    for path in r.receipts_removed:
        out.write(f"removed receipt {printable(path)}\n")
    for s in r.skipped:
        out.write(f"skipped {s.pid if s.pid is not None else '-'}: {printable(s.reason)}\n")
    for w in r.warnings:
        out.write(f"warning: {printable(w)}\n")


def run(args, out=None):
    out = out or sys.stdout
    try:
        report = proctree.reap_orphans(
            dry_run=args.dry_run,
            grace=args.grace,
            tag=args.tag,
            protect=tuple(args.protect),
            within=_union(args.within),
        )
    except (ValueError, TypeError, proctree.Error, OSError) as exc:
        raise CliError.from_exception(exc) from None
    if args.json:
        json.dump(report.to_dict(), out, indent=2)
        out.write("\n")
    else:
        _print_text(report, out)
    return 0 if report.ok else 1
