"""Helpers shared by the subcommands: strict argument parsing, and one way to report errors.

A subcommand raises CliError for anything it cannot do; the `proctree` entry
point prints it once, as text on stderr or, under --json, as one JSON object
of a fixed shape. Nothing here touches the system.
"""

import argparse
import json
import os
import re

from proctree._validate import PID_MAX, check_signal

# Plain ASCII decimal digits only: int() would also take "1_0", "+5", " 12"
# and Unicode digits like "١٢", none of which a user means as a pid.
_DIGITS = re.compile(r"[0-9]+")
# Seconds: plain decimal, like 2, 0.5, .25 or 3. (no sign, exponent, inf or nan).
_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


class CliError(Exception):
    """An error a command reports and exits on.

    code: the exit status. kind: "UsageError" for a command line that cannot
    be parsed, else the name of the exception behind it ("NoSuchProcess",
    "ValueError", ...). usage/prog: set for argparse's own errors, printed the
    way argparse does.
    """

    # A plain class: dataclasses (and the inspect it imports) would cost every command ~10 ms at start.
    def __init__(self, message, *, code=2, kind="UsageError", pid=None, usage=None, prog="proctree"):
        super().__init__(message)  # str(error) is its message, as for any exception
        self.message, self.code, self.kind = message, code, kind
        self.pid, self.usage, self.prog = pid, usage, prog

    @classmethod
    def from_exception(cls, exc, pid=None, code=2):
        """The CliError that reports a library exception (its type name, message and pid)."""
        return cls(str(exc), code=code, kind=type(exc).__name__, pid=getattr(exc, "pid", None) or pid)

    def document(self):
        """The --json form: {"ok": false, "error": {"type", "message", "pid"}}, pid null when none."""
        return {"ok": False, "error": {"type": self.kind, "message": self.message, "pid": self.pid}}

    def text(self):
        """The text form, for stderr: `proctree SUBCOMMAND: message` (prog), after the usage for a usage error."""
        return f"{self.usage or ''}{self.prog}: {self.message}\n"


def shown(text, limit=40):
    """repr(text), cut short: an error message must stay readable whatever was typed."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def parse_pid(text):
    """A pid from the command line: ASCII decimal digits, no sign, no leading zero, 1..PID_MAX.

    Raises CliError (a usage error) for anything else.
    """
    if not _DIGITS.fullmatch(text):
        raise CliError(f"not a pid: {shown(text)} (a pid is written in plain decimal digits 0-9)")
    if text.strip("0") == "":
        raise CliError(f"not a pid: {shown(text)} (must be a positive integer)")
    if text[0] == "0":
        # Some tools read a leading zero as octal: refuse rather than guess.
        raise CliError(f"not a pid: {shown(text)} (leading zeros are not accepted)")
    if len(text) > len(str(PID_MAX)) or int(text) > PID_MAX:
        raise CliError(f"not a pid: {shown(text)} is larger than any pid the system can assign ({PID_MAX})")
    return int(text)


def parse_seconds(text):
    """An argparse type: seconds as plain decimal >= 0 (2, 0.5), finite. ArgumentTypeError otherwise."""
    if not _SECONDS.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a number of seconds: {shown(text)} (plain decimal >= 0, like 2 or 0.5)")
    seconds = float(text)
    if seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"too many seconds: {shown(text)}")
    return seconds


def parse_signal(text):
    """An argparse type: a stop signal by name (SIGINT, INT, int) or number (2). ArgumentTypeError otherwise."""
    try:
        return check_signal(text, "signal")
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"{exc} (a name such as SIGINT or INT, or a number)") from None


_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text):
    """text with every control, format and undecodable character escaped, for a terminal.

    A process chooses its own name: raw, it could carry terminal escape
    sequences, bidi overrides or bytes stdout cannot encode.
    """
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(_escape(ch) for ch in text)


def _escape(ch):
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    if ch.isprintable():
        return ch
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"  # a byte os.fsdecode could not decode
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


# -- the options and output every command shares ----------------------------------


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that an indented paragraph (the exit-status table) keeps its lines."""

    def _fill_text(self, text, width, indent):
        paragraphs = text.split("\n\n")
        return "\n\n".join(
            p if p.startswith("  ") or "\n  " in p else super(HelpFormatter, self)._fill_text(p, width, indent)
            for p in paragraphs
        )


# Every command ends so on Ctrl+C (cli.main); a command whose 130 means more names it itself.
INTERRUPTED = ("130", "interrupted (Ctrl+C)")


def exit_statuses(*rows):
    """The epilog of a command's --help: its exit statuses, one (code, meaning) row each, wrapped to 79 columns,
    ending with INTERRUPTED unless a row names 130."""
    import textwrap

    if all(code != INTERRUPTED[0] for code, _ in rows):
        rows = (*rows, INTERRUPTED)
    lines = ["exit status:"]
    for code, meaning in rows:
        lines += textwrap.wrap(meaning, 79, initial_indent=f"  {code:<8} ", subsequent_indent=" " * 11)
    return "\n".join(lines)


# Every subcommand, in the order `proctree --help` lists them, with the line it shows for each: the
# top level lists them all while importing only the one that runs.
SUMMARIES = {
    "tree": "draw the process tree (pid, pgid, sid, state, command line)",
    "kill": "end a process and everything it started (TERM once, then KILL after the grace)",
    "run": "run CMD contained in the foreground; nothing it started outlives it",
    "reap": "end processes whose owner is provably gone (PROCTREE_OWNER, leftover cgroups, receipts, rules)",
    "up": "run a Procfile's entries; Ctrl+C (or any entry's end) stops them all, leaving nothing",
    "check": "read and check a Procfile, its .env and settings as up would, starting nothing (honcho's check)",
    "demo": "a short tour on live processes it starts and cleans up",
}


def subcommand(sub, name, *, description, statuses, run):
    """A subcommand's parser, its --help ending with its exit statuses; run(args) is what it runs."""
    p = sub.add_parser(
        name,
        help=SUMMARIES[name],
        description=description,
        epilog=exit_statuses(*statuses),
        formatter_class=HelpFormatter,
    )
    p.set_defaults(run=run)
    return p


def add_output_options(p, *, quiet, verbose=None, json_help=None):
    """-q (and -v, where there is more to show; never both) and --json, with help saying what each means here."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", action="store_true", help=quiet)
    if verbose is not None:
        group.add_argument("-v", "--verbose", action="store_true", help=verbose)
    else:
        p.set_defaults(verbose=False)
    if json_help is not None:
        p.add_argument("--json", action="store_true", help=json_help)
    else:
        p.set_defaults(json=False)


def finish_report(args, report, out, print_text):
    """A kill's or reap's report: --json writes it as one document, else print_text() unless -q.
    The exit status: 0 when report.ok (nothing it should end is left), else 1."""
    if args.json:
        write_json(report.to_dict(), out)
    elif not getattr(args, "quiet", False):
        print_text()
    return 0 if report.ok else 1


def discard_output(stream):
    """Point stream's descriptor at /dev/null: its reader went away (`| head`), and what is still
    written, the interpreter's final flush included, must go nowhere without complaint."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def write_json(doc, out):
    """One JSON document: a single line (what scripts and `jq -c` pipelines expect), indented only for a terminal."""
    try:
        pretty = out.isatty()
    except (AttributeError, ValueError):
        pretty = False
    out.write(json.dumps(doc, indent=2 if pretty else None) + "\n")


def cut(text, width):
    """text cut to width characters (a line of a table on a terminal); width None: whole."""
    return text if width is None or len(text) <= width else text[: max(0, width)]
