"""`proctree kill PID [--grace S] [--signal SIG] [--hangup] [-q|-v] [--json]`: end a process and its whole tree, print the report.

Exit status: 0 when nothing of the tree survived, 1 when something did (see
"survivors"), 2 for bad input, a pid that is not there or a refused pid (pid 1,
the caller or its ancestors, a kernel thread): nothing was signalled then.
All policy lives in proctree.terminate_tree; this only parses and prints.
"""

import sys

import proctree

from ._common import (
    CliError,
    add_output_options,
    finish_report,
    parse_pid,
    parse_seconds,
    parse_signal,
    printable,
    subcommand,
)

STATUSES = [
    ("0", "nothing of the tree survived"),
    ("1", "something survived (listed as SURVIVORS)"),
    (
        "2",
        "bad input, no process PID, or a refused pid (1, this command, its ancestors, a kernel thread): "
        "nothing was signalled",
    ),
]


def register(sub):
    p = subcommand(
        sub,
        "kill",
        run=run,
        description="End PID and everything it started, and nothing else; print the report.",
        statuses=STATUSES,
    )
    p.add_argument("pid", metavar="PID", help="root of the tree to end (decimal digits)")
    p.add_argument(
        "--grace", type=parse_seconds, default=2.0, metavar="S", help="seconds between SIGTERM and SIGKILL (default 2)"
    )
    p.add_argument(
        "--signal",
        "-s",
        type=parse_signal,
        default="SIGTERM",
        metavar="SIG",
        help="the stop signal each member gets once, by name or number (default SIGTERM; not KILL, STOP or CONT)",
    )
    p.add_argument(
        "--hangup",
        action="store_true",
        help="also hang up the root's process group first (SIGHUP, as a closing terminal would)",
    )
    add_output_options(
        p,
        quiet="print nothing but errors (the exit status says whether anything survived)",
        verbose="also list every process found, with how it ended",
        json_help="print the report (or the error) as one JSON object",
    )


def _line(p):
    return f"{p.pid:>7}  {p.state}  {printable(p.name)}"


def _print_text(report, out, verbose=False):
    r = report
    out.write(
        f"tree of {r.root.pid} ({printable(r.root.name)}): {len(r.found)} found, {len(r.exited)} exited, "
        f"{len(r.killed)} killed, {len(r.survivors)} survived, {len(r.late)} late"
        f"{', TRUNCATED' if r.truncated else ''} in {r.elapsed * 1e3:.1f} ms\n"
    )
    if verbose:
        _print_fates(r, out)
    for title, procs in (("killed (needed SIGKILL)", r.killed), ("denied", r.denied), ("SURVIVORS", r.survivors)):
        if procs:
            out.write(f"{title}:\n")
            for p in procs:
                out.write(f"  {_line(p)}\n")
    if r.extra.get("spared"):
        out.write(f"spared (the caller or its ancestors): {r.extra['spared']}\n")


def _print_fates(r, out):
    fates: dict[int, str] = {}
    for fate, procs in (
        ("exited", r.exited),
        ("late, exited", r.late),
        ("killed", r.killed),
        ("SURVIVED", r.survivors),
    ):
        for p in procs:
            fates.setdefault(p.pid, fate)
    out.write("found:\n")
    for p in r.found:
        out.write(f"  {_line(p)}  ({fates.get(p.pid, 'gone')})\n")


def run(args, out=None):
    out = out or sys.stdout
    pid = parse_pid(args.pid)
    try:
        report = proctree.terminate_tree(pid, grace=args.grace, signal=args.signal, hangup=args.hangup)
    except proctree.NoSuchProcess:
        raise CliError(f"no process with pid {pid}", kind="NoSuchProcess", pid=pid) from None
    except (ValueError, TypeError, proctree.Error, OSError) as exc:
        # Refusals (pid 1, the caller, a kernel thread) and failures to read the
        # root, which come before any signal; a system error mid-teardown too.
        raise CliError.from_exception(exc, pid) from None
    return finish_report(args, report, out, lambda: _print_text(report, out, getattr(args, "verbose", False)))
