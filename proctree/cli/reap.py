"""`proctree reap [--dry-run] [-q|-v] [--json] [--grace S] [--tag TAG] [--protect RE] [--within PIDS]`: end orphans whose owner is provably gone.

Prints each candidate with its evidence, then what happened to it. The
sweep's warnings (evidence it could not use: another namespace's receipts,
unreadable markers) go to stderr, one line per kind with its count (a shared
host can have dozens of one kind); -v lists each, -q none. Exit
status: 0 when nothing selected is left (or, with --dry-run, after listing),
1 when something survived, 2 for bad input (nothing was signalled then).
All policy lives in proctree.reap_orphans; this only parses and prints.
"""

import re
import sys

import proctree

from ._common import CliError, add_output_options, finish_report, parse_pid, parse_seconds, printable, subcommand

STATUSES = [
    ("0", "nothing selected is left running (always, with --dry-run)"),
    ("1", "something selected survived (listed as SURVIVOR)"),
    ("2", "bad input: nothing was signalled"),
]


def register(sub):
    p = subcommand(
        sub,
        "reap",
        run=run,
        description="Find processes whose owner is provably gone and end them (TERM, then KILL after the grace). "
        "A process without evidence, or whose owner is alive or unknown, is never touched.",
        statuses=STATUSES,
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
    add_output_options(
        p,
        quiet="print nothing but errors, not even warnings (the exit status says whether anything survived)",
        verbose="list every warning and every skipped process on its own line, not one line per kind",
        json_help="print the report (or the error) as one JSON object, warnings included",
    )


def _parse_pids(text):
    return frozenset(parse_pid(t) for t in text.split(","))


def _union(scopes):
    return None if scopes is None else frozenset().union(*scopes)


# What varies between two warnings of one kind: paths, and numbers (pids, counts, start times).
_PATH = re.compile(r"(?<![\w.])/[^\s:,;()]+")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)*(?!\w)")  # 42, 0.5, and namespace ids like 4026531836.4026531834.0


def kind_of(line):
    """The kind of a warning or skip reason: the line with its paths and numbers taken out."""
    return _NUMBER.sub("N", _PATH.sub("PATH", line))


def aggregated(lines):
    """One (text, count) per kind, in first-seen order: the line itself when it is its kind's only one,
    else the kind with PATH and N where the lines differ."""
    kinds: dict[str, list[str]] = {}
    for line in lines:
        kinds.setdefault(kind_of(line), []).append(line)
    return [(group[0], 1) if len(group) == 1 else (kind, len(group)) for kind, group in kinds.items()]


def _print_text(r, out, err, verbose=False, tag=None):
    """The report as text. With a tag and without -v, only what names that tag is said among the skips and
    warnings: the rest is about other trees."""
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
    removed = "would remove" if r.dry_run else "removed"
    for path in r.cgroups_removed:
        out.write(f"{removed} cgroup {printable(path)}\n")
    for path in r.receipts_removed:
        out.write(f"{removed} receipt {printable(path)}\n")
    groups: dict[str, list] = {}
    ours = (lambda text: True) if verbose or tag is None else (lambda text: tag in text)
    for s in (s for s in r.skipped if ours(s.reason)):
        groups.setdefault(s.reason if verbose else kind_of(s.reason), []).append(s)
    for kind, group in groups.items():
        if len(group) == 1 or verbose:
            for s in group:
                out.write(f"skipped {s.pid if s.pid is not None else '-'}: {printable(s.reason)}\n")
            continue
        pids = [str(s.pid) for s in group if s.pid is not None]
        listed = f" (pids {', '.join(pids[:8])}{', ...' if len(pids) > 8 else ''})" if pids else ""
        out.write(f"skipped {len(group)}: {printable(kind)}{listed}; -v lists each\n")
    warnings = [w for w in r.warnings if ours(w)]
    for text, n in [(w, 1) for w in warnings] if verbose else aggregated(warnings):
        err.write(f"proctree reap: warning: {printable(text)}{_times(n)}\n")


def _times(n):
    return "" if n == 1 else f" ({n} times; -v lists each)"


def run(args, out=None, err=None):
    out = out or sys.stdout
    err = err or sys.stderr
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
    return finish_report(
        args, report, out, lambda: _print_text(report, out, err, getattr(args, "verbose", False), args.tag)
    )
