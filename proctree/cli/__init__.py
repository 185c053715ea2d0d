"""The `proctree` command: thin subcommands over the library, no logic of their own.

Each subcommand lives in its own module with register(subparsers), which adds
its parser and sets `run` (a function of the parsed args returning an exit
code, raising CliError for anything it cannot do). This module parses the
command line, runs the subcommand and reports its errors: as text on stderr,
or under --json as one JSON object {"ok": false, "error": {...}} where that
command prints its JSON (stdout; stderr for `run`, whose stdout is CMD's).
It must never print a traceback for bad input, nor two JSON documents.
"""

import argparse
import importlib
import os
import sys

from ._common import SUMMARIES, CliError, HelpFormatter, discard_output, exit_statuses, write_json

# Subcommand modules, in the order `proctree --help` lists them.
SUBCOMMANDS = list(SUMMARIES)

# Options whose value is the next argument (so it is not taken for a command).
_TAKES_VALUE = {"--grace", "--contain", "--tag", "--protect", "--within"}
# `proctree up`'s (no other command has short options).
_TAKES_VALUE |= {"-f", "--procfile", "-e", "--env", "-m", "--formation", "-c", "--concurrency", "-p", "--port"}
_TAKES_VALUE |= {"-t", "--timeout", "--exit-with", "--ready-timeout"}


class _Parser(argparse.ArgumentParser):
    """argparse with exact option names only (no prefix matching: `--js` is not `--json`,
    and a new option can never change what an old abbreviation meant), whose
    errors become CliError so that --json can report them too."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise CliError(message, usage=self.format_usage(), prog=self.prog)


def version():
    """proctree's version, as the installed distribution says (pyproject.toml is its one source)."""
    import proctree

    return proctree.__version__


class _VersionAction(argparse.Action):
    """--version, reading the version only when asked (importlib.metadata costs import time)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(f"proctree {version()}\n")
        sys.stdout.flush()
        parser.exit(0)


def build_parser(argv=None):
    """The parser for argv: every subcommand listed, only the one argv names loaded (none when argv is None)."""
    parser = _Parser(
        prog="proctree",
        description="Stop a process and everything it started, and nothing else.",
        epilog=exit_statuses(
            ("0", "done (each command's --help lists its own statuses)"),
            (
                "1",
                "proctree's compiled core is missing (a source checkout that is not built: the message says "
                "what to do)",
            ),
            ("2", "a command line that cannot be parsed"),
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction, help="print proctree's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    wanted = command_of(argv)
    for name in SUBCOMMANDS:
        if wanted == name:
            importlib.import_module(f"proctree.cli.{name}").register(sub)
        else:
            # Listed with its summary, never parsed: `up` alone imports asyncio and the
            # Procfile readers, which `proctree tree` must not pay for.
            sub.add_parser(name, help=SUMMARIES[name], add_help=False)
    parser.set_defaults(commands=sub.choices)
    return parser


def command_of(argv):
    """The subcommand argv names (its first word that is not an option), or None when it names none we have
    (`proctree --help`, `proctree bogus`: the summaries are all argparse needs then)."""
    if argv is None:
        return None
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg if arg in SUMMARIES else None
    return None


def parse(parser, argv):
    """parser.parse_args(argv), except that an argument the subcommand does not know is
    reported with the subcommand's usage (argparse would show the top-level one)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        try:  # `proctree --bogus tree` is the top level's error, `proctree tree --bogus` tree's
            before_command = argv.index(extra[0]) < argv.index(args.command)
        except ValueError:
            before_command = False
        where = parser if before_command else args.commands[args.command]
        where.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def json_stream_of(argv):
    """Where a --json error goes when argv itself could not be parsed: None when
    --json was not asked for, else stdout (stderr for `run`).

    Only options before CMD count for `run` (CMD's own --json is CMD's), and
    nothing after `--`.
    """
    command = None
    wants_json = False
    skip_value = False
    for arg in argv:
        if skip_value:
            skip_value = False
        elif arg == "--":
            break
        elif arg == "--json" or arg.startswith("--json="):
            wants_json = True  # `--json=yes` is refused, but JSON was plainly what was asked for
        elif arg in _TAKES_VALUE:
            skip_value = True
        elif not arg.startswith("-"):
            if command is None:
                command = arg
            elif command == "run":
                break
    if not wants_json or command == "demo":  # demo has no JSON form: its errors are text
        return None
    return sys.stderr if command == "run" else sys.stdout


def _json_stream_of(args):
    if not getattr(args, "json", False):
        return None
    return sys.stderr if getattr(args, "json_on_stderr", False) else sys.stdout


def report(error, stream):
    """Print error once (JSON on stream, or text on stderr); return its exit code."""
    if stream is None:
        sys.stderr.write(error.text())
    else:
        write_json(error.document(), stream)
    return error.code


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] != ["run"]:
        return _main(argv)
    # Before anything slow: a signal sent while `proctree run` starts is held for CMD, neither lost nor fatal,
    # and the parent -p watches is the one we started with.
    parent = os.getppid()
    from . import run as run_command
    from ._native import hand_over

    started = run_command.hold_signals()
    run_command.PARENT_AT_START = parent
    try:
        # The native runner, where it can run this command line (it does not return then): what is held stays
        # pending across the exec, and the runner, which blocks every signal at its first line, forwards it.
        hand_over(argv[1:], parent)
        return _main(argv)
    finally:
        run_command.release_signals(started)


def _main(argv):
    if sys.stdout is None:
        # Started with stdout closed (`proctree kill PID >&-`): do the work, drop the output.
        sys.stdout = open(os.devnull, "w")
    try:
        args = parse(build_parser(argv), argv)  # imports the subcommand: a Ctrl+C may land here
    except CliError as error:
        command = command_of(argv)
        if error.usage is None and command is not None:  # an option's value refused while parsing (--within x)
            error.prog = f"proctree {command}"
        return report(error, json_stream_of(argv))
    except KeyboardInterrupt:
        return report(CliError("interrupted", code=130, kind="KeyboardInterrupt"), json_stream_of(argv))
    stream = _json_stream_of(args)
    prog = f"proctree {args.command}"  # every error a subcommand reports is named after it
    try:
        return args.run(args)
    except CliError as error:
        if error.usage is None:
            error.prog = prog
        return report(error, stream)
    except KeyboardInterrupt:
        return report(CliError("interrupted", code=130, kind="KeyboardInterrupt", prog=prog), stream)
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except ImportError as exc:
        if exc.name != "proctree._core":
            raise
        # A source checkout without its build: the message says why and the ways out; no traceback. proctree's
        # own (the installation's), not the subcommand's.
        return report(CliError(str(exc), code=1, kind="ImportError"), stream)
    except Exception as exc:
        import proctree  # here: a command's start-up imports nothing for the errors it may never meet

        if not isinstance(exc, (proctree.Error, OSError)):
            raise
        # A library error or an OSError the subcommand did not expect: said in one line, not a traceback.
        return report(_unexpected(exc, prog), stream)


def _unexpected(exc, prog):
    """The CliError for a library error or an OSError a subcommand let through (status 2)."""
    error = CliError.from_exception(exc)
    import proctree

    if isinstance(exc, proctree.AccessDenied) and getattr(exc, "pid", None) is None:
        error.message = "the process table cannot be read: access denied (is /proc mounted with hidepid=?)"
    error.prog = prog
    return error


def _quiet_broken_pipe():
    """The reader went away (`proctree tree | head`): not an error, and nothing more is said."""
    discard_output(sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
