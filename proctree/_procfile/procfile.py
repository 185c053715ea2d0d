"""Procfile parsing: `name: command` lines, the format foreman, honcho and overmind read.

Pure: text in, entries out (read_procfile only reads the file). A line is an
entry, a comment (`#` first), or blank; anything else is an error naming the
file and line number, where foreman and honcho would silently skip it (a
typo there means a service that never starts and nobody is told). Read
leniently (a `skipped` list given), what honcho skips is skipped and said in
that list, with the file and line: a line that is not an entry, an empty
command, a file with no entries; and a name starting with '-' is taken, as
honcho takes it.

Must never: run, expand or split the commands (the shell does that, with the
service's environment), or return part of a Procfile that has an error.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass

from .._errors import ProcfileError
from .._validate import check_command

# The process-type names foreman and honcho accept. '.' is not among them:
# it separates the instance number (web.1, web.2) when an entry is scaled.
NAME = re.compile(r"[A-Za-z0-9_-]+")
_ENTRY = re.compile(r"([A-Za-z0-9_-]+):[ \t]*(.*)")
_LINE_ENDS = re.compile(r"\r\n|\r|\n")
# Past this a Procfile is not a Procfile; refusing early keeps a mistake
# (-f pointing at a log file) from being read whole.
MAX_BYTES = 1 << 20
# A service name is at most 64 characters (spec.check_name), and an instance adds up to ".100".
MAX_NAME = 60


@dataclass(frozen=True)
class ProcfileEntry:
    """One `name: command` line. index: its position among the entries (0-based), which sets its PORT."""

    name: str
    command: str
    line: int
    index: int


RESERVED_NAME = "all"  # -m all=N


def parse_procfile(
    text: str, source: str = "Procfile", *, skipped: list[str] | None = None
) -> tuple[ProcfileEntry, ...]:
    """The entries of a Procfile's text, in file order.

    Raises ProcfileError for a line that is not an entry, a comment or blank;
    a name that is too long, or `all` (reserved by -m all=N); an empty
    command; a duplicate name (both lines named); a NUL character or a
    carriage return inside a line (only CRLF line ends are read as such); or
    a Procfile with no entries at all.
    skipped: read leniently, as honcho does: a line that is not an entry, an
    empty command and an empty file are noted there (`file:line: why`)
    instead of refused, and a name may start with '-'. The rest is refused.
    """
    if not isinstance(text, str):
        raise TypeError(f"Procfile text must be a str, not {type(text).__name__}")
    entries: list[ProcfileEntry] = []
    first_line: dict[str, int] = {}
    # Split on "\n" only: str.splitlines() would also split on form feeds and
    # Unicode separators, and the line numbers would not be an editor's. Read
    # leniently, a lone CR (old Mac line ends) ends a line too, as honcho's
    # splitlines() reads it, instead of being refused.
    lines = text.split("\n") if skipped is None else _LINE_ENDS.split(text)
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "\0" in line:
            raise ProcfileError("a NUL character cannot be part of a command", source=source, line=number)
        if "\r" in line:  # a CRLF's CR was stripped with the line's end: this one is inside it
            raise ProcfileError(
                "a carriage return inside the line (old Mac line ends, or a stray CR): "
                "it would join what follows into this command; use \\n or \\r\\n line ends",
                source=source,
                line=number,
            )
        match = _ENTRY.fullmatch(line)
        if match is None:
            problem = ProcfileError(_why_not_an_entry(line), source=source, line=number)
            if skipped is None:
                raise problem
            skipped.append(f"{problem}: skipped")
            continue
        name, command = match.group(1), match.group(2).strip()
        if not command and skipped is not None:
            skipped.append(f"{source}:{number}: {name!r} has no command after the colon: skipped")
            continue
        if name.startswith("-") and skipped is None:
            raise ProcfileError(f"{name!r}: a name starts with a letter, a digit or '_'", source=source, line=number)
        if len(name) > MAX_NAME:
            raise ProcfileError(
                f"the name {name[:20]!r}... is longer than {MAX_NAME} characters", source=source, line=number
            )
        if name == RESERVED_NAME:
            raise ProcfileError(
                f"{name!r} cannot name an entry: `-m {name}=N` sets every entry's count", source=source, line=number
            )
        if not command:
            raise ProcfileError(f"{name!r} has no command after the colon", source=source, line=number)
        try:
            check_command(command)
        except ValueError as exc:
            raise ProcfileError(f"{name!r}: {exc}", source=source, line=number) from None
        if name in first_line:
            raise ProcfileError(
                f"{name!r} is defined twice (first on line {first_line[name]})", source=source, line=number
            )
        first_line[name] = number
        entries.append(ProcfileEntry(name=name, command=command, line=number, index=len(entries)))
    if not entries:
        problem = ProcfileError("no entries (each line is `name: command`; # starts a comment)", source=source)
        if skipped is None:
            raise problem
        skipped.append(f"{problem}: nothing to run")
    return tuple(entries)


def _why_not_an_entry(line: str) -> str:
    shown = line if len(line) <= 40 else line[:40] + "..."
    name, colon, _ = line.partition(":")
    if not colon:
        return f"not a `name: command` line (no colon): {shown!r}"
    if not name.strip():
        return f"an entry needs a name before the colon: {shown!r}"
    return f"{name.strip()[:40]!r} is not a valid name (letters, digits, '_' and '-' only, no spaces): {shown!r}"


def read_procfile(path: str | os.PathLike[str], *, skipped: list[str] | None = None) -> tuple[ProcfileEntry, ...]:
    """parse_procfile() on a file. Raises ProcfileError for a missing, unreadable,
    oversized or non-UTF-8 file too (never a bare OSError or UnicodeDecodeError)."""
    source = os.fspath(path)
    return parse_procfile(read_text(source, what="Procfile"), source=source, skipped=skipped)


def read_text(path: str, *, what: str) -> str:
    """A small UTF-8 text file (a BOM allowed), or ProcfileError saying why not.

    A regular file, or a pipe (`-f <(make-procfile)`); never a device or a
    socket, which an open alone can act on (/dev/ptmx makes a terminal) or
    block in. A FIFO is opened without waiting for a writer: with none, it
    reads as empty.
    """
    try:
        kind = os.stat(path).st_mode
        if not (stat.S_ISREG(kind) or stat.S_ISFIFO(kind) or stat.S_ISDIR(kind)):
            raise ProcfileError(f"not a regular file (a device or a socket): not a {what}", source=path)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode) and not stat.S_ISFIFO(os.fstat(fd).st_mode):
                raise ProcfileError(f"not a regular file: not a {what}", source=path)
            os.set_blocking(fd, True)  # a pipe's writer may be slower than us
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ProcfileError(f"no such {what}", source=path) from None
    except IsADirectoryError:
        raise ProcfileError(f"is a directory, not a {what}", source=path) from None
    except OSError as exc:
        raise ProcfileError(f"cannot read the {what}: {exc.strerror or exc}", source=path) from None
    if len(data) > MAX_BYTES:
        raise ProcfileError(f"larger than {MAX_BYTES // 1024} KiB: not a {what}", source=path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ProcfileError(f"not UTF-8 text (byte {exc.start})", source=path, line=line) from None
