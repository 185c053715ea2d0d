"""`proctree check [-f Procfile] [-d DIR] [-e .env] [-m web=2,worker=1] [-p N] [--strict] [-q] [--json] [NAME...]`

honcho's `check`, with everything `proctree up` reads: the Procfile, its .env files, the scale, the ports and the
settings in pyproject.toml or proctree.toml are read and checked exactly as up reads them (cli/_plan.py, then the
supervisor's ServiceSpec for each instance), and nothing is started. On stdout, one line per instance up would
start (its name, port and command, then the settings it runs with). The values of the environment an instance
gets are never printed (.env files hold secrets), only the names of the variables. What honcho would skip
is a warning naming the file and line (an error under --strict). The last line, on stderr as honcho prints it:
`Valid procfile detected (web, worker)`. Exit 0 when up would start this plan, 2 (the error, with its file and
line) when it would refuse it.
"""

from __future__ import annotations

import sys
from typing import Any

from proctree._validate import signal_name

from ._common import CliError, printable, subcommand, write_json
from ._plan import add_plan_options, add_strict_option, load_plan

# What up sets in every instance's environment: the text names only the variables the .env files and settings add.
ADDED_BY_UP = frozenset({"PORT", "PS", "HONCHO_PROCESS_NAME", "PROCTREE_SERVICE"})
MOST_NAMES = 6


def register(sub):
    p = subcommand(
        sub,
        "check",
        run=run,
        description="Read and check a Procfile, its .env files, scale, ports and settings exactly as "
        "`proctree up` would, and start nothing (honcho's check). Prints each instance up would start; what "
        "honcho skips is a warning (an error with --strict); the last line, on stderr: "
        "'Valid procfile detected (NAMES)'.",
        statuses=[("0", "up would start this plan"), ("2", "up would refuse it: the error names the file and line")],
    )
    add_plan_options(p)
    add_strict_option(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but warnings and errors")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the plan as one JSON object (environment names only, never their values)",
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="check only these entries (and what they depend on)")


def run(args):
    plan = load_plan(args)
    # Imported here, as proctree's own names load on first use: every command builds its parser.
    from proctree.procfile import service_specs

    try:
        service_specs(plan)  # the settings the supervisor itself would refuse (ready, restart, stop_signal, ...)
    except (TypeError, ValueError) as exc:
        raise CliError(str(exc), kind=type(exc).__name__) from None
    if args.json:
        write_json(plan_document(plan), sys.stdout)
    else:
        for warning in plan.warnings:
            sys.stderr.write(f"proctree check: warning: {warning}\n")
        if not args.quiet:
            for line in plan_lines(plan):
                sys.stdout.write(line + "\n")
            sys.stdout.flush()
            names = ", ".join(printable(e.name) for e in plan.entries)
            sys.stderr.write(f"Valid procfile detected ({names})\n")
    return 0


def plan_lines(plan) -> list[str]:
    """One line per instance: name, port, command, then each setting that differs from up's defaults."""
    width = max((len(printable(s.name)) for s in plan.services), default=0)
    lines = []
    for s in plan.services:
        line = f"{printable(s.name):<{width}}  port {s.port}  {printable(s.command)}"
        lines.append(line + "".join(f"  [{part}]" for part in _settings(s)))
    return lines


def _settings(s) -> list[str]:
    parts = []
    if s.ready is not None:
        parts.append(f"ready: {printable(_ready_text(s.ready))}")
    if s.depends_on:
        parts.append("after " + ", ".join(f"{printable(n)} {c}" for n, c in s.depends_on.items()))
    if s.restart != "no" or s.max_restarts is not None:
        limit = "" if s.max_restarts is None else f" (at most {s.max_restarts})"
        parts.append(f"restart: {s.restart}{limit}")
    if s.can_die:
        parts.append("can die")
    if s.stop_signal is not None:
        parts.append(f"stop signal: {signal_name(s.stop_signal)}")
    own = sorted(k for k in s.env if k not in ADDED_BY_UP)
    if own:
        shown = ", ".join(printable(k) for k in own[:MOST_NAMES])
        parts.append(f"env: {shown}" + (f" and {len(own) - MOST_NAMES} more" if len(own) > MOST_NAMES else ""))
    return parts


def _ready_text(ready: Any) -> str:
    if isinstance(ready, str):
        return ready
    return ", ".join(f"{k}={v}" for k, v in ready.items())


def plan_document(plan) -> dict[str, Any]:
    """The --json form: where the plan came from, what was skipped, and each instance (env names only)."""
    return {
        "ok": True,
        "procfile": plan.procfile,
        "env_files": list(plan.env_files),
        "settings_file": plan.settings_file,
        "base_port": plan.base_port,
        "warnings": list(plan.warnings),
        "entries": [e.name for e in plan.entries],
        "services": [
            {
                "name": s.name,
                "entry": s.entry,
                "instance": s.instance,
                "command": s.command,
                "port": s.port,
                "cwd": s.cwd,
                "ready": s.ready if s.ready is None or isinstance(s.ready, str) else dict(s.ready),
                "depends_on": dict(s.depends_on),
                "restart": s.restart,
                "max_restarts": s.max_restarts,
                "can_die": s.can_die,
                "stop_signal": None if s.stop_signal is None else signal_name(s.stop_signal),
                "env": sorted(s.env),
            }
            for s in plan.services
        ],
    }
