"""The options that say which Procfile plan to read (`-f`, `-d`, `-e`, `-m`, `-p`, `--strict`), and reading it:
what `proctree up` runs and `proctree check` checks, read the same way."""

from __future__ import annotations

from typing import Any

from proctree._validate import port_from_text

from ._common import CliError, shown


def add_plan_options(p):
    """-f, -d, -e, -m and -p: the Procfile, its folder, its .env files, the scale and the base port."""
    p.add_argument(
        "-f",
        "--procfile",
        metavar="FILE",
        help="the Procfile (default: PROCFILE from .env or the environment, else ./Procfile)",
    )
    p.add_argument(
        "-d",
        "--app-root",
        metavar="DIR",
        help="the folder a relative -f and -e are read from (honcho's; default: the current folder)",
    )
    p.add_argument(
        "-e",
        "--env",
        action="append",
        metavar="FILE",
        help="a .env file to read (repeat, or separate with commas; default: .env beside the Procfile, if any)",
    )
    p.add_argument(
        "-m",
        "--formation",
        "-c",
        "--concurrency",
        dest="formation",
        action="append",
        metavar="NAME=N,...",
        help="how many of each entry to run: web=2,worker=1 (all=N sets the rest; default 1 each)",
    )
    p.add_argument("-p", "--port", type=parse_port, metavar="N", help="base port (default: PORT, else 5000)")


def add_strict_option(p):
    """--strict: refuse what honcho skips or reads loosely."""
    p.add_argument(
        "--strict",
        action="store_true",
        help="refuse what honcho skips or reads loosely (a Procfile or .env line it cannot read, a missing -e "
        "file, an empty Procfile, a name starting with '-', a lone CR in the Procfile) instead of reading it as "
        "honcho does, with a warning",
    )


def parse_port(text):
    import argparse

    port = port_from_text(text)
    if port is None:
        raise argparse.ArgumentTypeError(f"not a port: {shown(text)} (a whole number 1-65535)")
    return port


def _env_files(values):
    if values is None:
        return None
    files = [f.strip() for value in values for f in value.split(",")]
    if any(not f for f in files):
        raise CliError("-e: an empty file name")
    return files


def load_plan(args) -> Any:
    """The checked plan for args, or CliError saying what is wrong and where (as args.command's: up or check)."""
    # Imported here, as proctree's own names load on first use: every command builds its parser.
    from proctree import procfile as procfiles

    exit_with = getattr(args, "exit_with", None)
    names = list(args.names)
    if exit_with is not None and exit_with not in names and names:
        names.append(exit_with)  # it must run for the run to end with it
    try:
        plan = procfiles.load(
            args.procfile,
            env_files=_env_files(args.env),
            app_root=args.app_root,
            strict=args.strict,
            scale=",".join(args.formation) if args.formation else None,
            names=names,
            base_port=args.port,
        )
    except ValueError as exc:
        raise CliError(str(exc), kind=type(exc).__name__) from None
    if exit_with is not None and not plan.instances_of(exit_with):
        known = {e.name for e in plan.entries}
        why = "is scaled to 0" if exit_with in known else "is not an entry of the Procfile"
        raise CliError(f"--exit-with {shown(exit_with)} {why}")
    return plan


def read_env_files(paths) -> dict[str, str]:
    """The assignments of these .env files (honcho's reading, as `proctree up -e` reads them), later files winning,
    values expanded against the environment and the earlier files: `proctree run --env-file` (honcho's `run`).
    CliError for a file that cannot be read or a line that is not an assignment."""
    from proctree import procfile as procfiles

    try:
        return procfiles.read_env_files(paths)
    except (OSError, ValueError) as exc:
        raise CliError(f"--env-file: {exc}", kind=type(exc).__name__) from None
