"""`.env` files, read the way python-dotenv and foreman (the dotenv gem) read them.

    # a comment
    export NAME=value          # `export ` is allowed and ignored
    PLAIN = value # comment    # spaces around '=' and a trailing comment dropped
    URL=http://host/#frag      # '#' starts a comment only after whitespace
    EMPTY= # a note            # ... so this value is empty (python-dotenv's)
    SINGLE='kept $AS is'       # single quotes: literal but for \\' and \\\\, may span lines
    DOUBLE="a\\nb ${PLAIN}"     # double quotes: python-dotenv's escapes and \\$, may span lines
    EXPANDED=$PLAIN/x          # $NAME, ${NAME}, ${NAME:-default} expand in unquoted and double-quoted values

A line ends with \\n, \\r\\n or a lone \\r, as python-dotenv reads it. Where
python-dotenv differs from foreman and the shell (it expands in single
quotes, not $NAME, and keeps \\$), foreman's reading is kept: see
tests/supervisor/test_dotenv_table.py for every case beside python-dotenv's.

Expansion looks up names set earlier in the same files first, then the base
environment, and an unknown name expands to "" (as a shell does). It is
bounded by what the kernel would accept anyway: one NAME=value string of at
most 128 KiB, and the file's strings together at most ARG_MAX, each refused
with the line that passes the bound (values that reference each other could
otherwise double on every line: 317 bytes asking for 42 GB). Pure: text in,
a dict out.

Read leniently (a `skipped` list given), a line that is not an assignment
is skipped and noted there with its line, as honcho and python-dotenv skip
it; an unclosed quote or text after one is refused either way.

Must never: run anything (no `$(command)` substitution: a .env file is data),
or return part of a file that has an error; every error names the line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from .._validate import ENV_NAME
from .procfile import ProcfileError, read_text

_EXPORT = re.compile(r"export[ \t]+")
# $NAME, ${NAME}, and python-dotenv's ${NAME:-default} (the default when NAME is unset, taken as written).
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
# python-dotenv's escapes in double quotes, and proctree's \$ (a literal '$', never expanded).
_DOUBLE_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    '"': '"',
    "'": "'",
    "\\": "\\",
    "$": "$",
}
_SINGLE_ESCAPES = {"'": "'", "\\": "\\"}  # python-dotenv's: 'it\'s' is it's
_LINE_END = re.compile(r"[\r\n]")  # a lone CR ends a line too, as python-dotenv reads it
_EXPAND_MARK = "\0"  # stands for a '$' that was escaped, until expansion is done
# The kernel's bound on one environment string, NAME=value and its NUL (MAX_ARG_STRLEN: 32 pages).
MAX_STRING = 128 * 1024


def _arg_max() -> int:
    """The kernel's bound on argv and the environment together (ARG_MAX), or 2 MiB where it is not known."""
    try:
        value = os.sysconf("SC_ARG_MAX")
    except (AttributeError, ValueError, OSError):
        value = -1
    return value if value > 0 else 2 * 1024 * 1024


def parse_dotenv(
    text: str, source: str = ".env", base: Mapping[str, str] | None = None, *, skipped: list[str] | None = None
) -> dict[str, str]:
    """The assignments of a .env file's text, in file order (a later one of a name wins).

    base: the environment names expand against after the file's own
    (default: none; pass os.environ for foreman's behaviour).
    Raises ProcfileError with the line number for a line that is not an
    assignment, a comment or blank; an unterminated quote; text after a
    closing quote; a NUL character. skipped: a line that is not an
    assignment is noted there (`file:line: why`) instead of refused.
    """
    if not isinstance(text, str):
        raise TypeError(f".env text must be a str, not {type(text).__name__}")
    # A leading BOM (Notepad writes one) is not part of the first name: read_text drops it from
    # a file, and python-dotenv's parse_stream from its text; so does this.
    return _Reader(text.removeprefix("\ufeff"), source, base or {}, skipped).read()


def read_dotenv(
    path: str | os.PathLike[str],
    base: Mapping[str, str] | None = None,
    known: Mapping[str, str] | None = None,
    *,
    skipped: list[str] | None = None,
) -> dict[str, str]:
    """parse_dotenv() on a file; known: values from earlier files, looked up before base."""
    source = os.fspath(path)
    lookup: dict[str, str] = dict(base or {})
    lookup.update(known or {})
    return parse_dotenv(read_text(source, what=".env file"), source=source, base=lookup, skipped=skipped)


def _before_value(line: str) -> str:
    """What a message may quote of a line that is no assignment: its start, up to a '=', ':' or blank (what
    follows may be a value, and a .env file's values are secrets)."""
    end = len(line)
    for mark in ("=", ":", " ", "\t"):
        at = line.find(mark)
        if at != -1:
            end = min(end, at)
    return line[: min(end, 40)]


class _Reader:
    """One pass over the text, keeping the line number for errors."""

    def __init__(self, text: str, source: str, base: Mapping[str, str], skipped: list[str] | None = None) -> None:
        self.skipped = skipped
        self.text = text.replace("\r\n", "\n")
        self.source = source
        self.base = base
        self.values: dict[str, str] = {}
        self.sizes: dict[str, int] = {}  # bytes of each value's NAME=value\0 string, for the ARG_MAX bound
        self.arg_max = _arg_max()
        self.pos = 0
        self.line = 1

    def fail(self, message: str, line: int | None = None) -> ProcfileError:
        return ProcfileError(message, source=self.source, line=line or self.line)

    def read(self) -> dict[str, str]:
        if "\0" in self.text:
            line = self.text.count("\n", 0, self.text.index("\0")) + 1
            raise self.fail("a NUL character cannot be part of an environment", line)
        while self.pos < len(self.text):
            self.statement()
        return self.values

    def rest_of_line(self) -> str:
        end = self.line_end(self.pos)
        chunk = self.text[self.pos : end]
        self.pos = end + 1
        self.line += 1
        return chunk

    def statement(self) -> None:
        start_line = self.line
        head = self.text[self.pos : self.line_end(self.pos)]
        stripped = head.lstrip()
        if not stripped or stripped.startswith("#"):
            self.rest_of_line()
            return
        self.pos += len(head) - len(stripped)
        export = _EXPORT.match(self.text, self.pos)
        if export:
            self.pos = export.end()
        key = ENV_NAME.match(self.text, self.pos)
        if key is None:
            self.not_an_assignment(f"not a NAME=value line (it begins {_shown(_before_value(stripped))})")
            return
        self.pos = key.end()
        self.skip_blanks()
        if self.text.startswith("=", self.pos):
            self.pos += 1
        else:
            self.not_an_assignment(f"{key.group()!r} has no '=' after it")
            return
        after_equals = self.pos
        self.skip_blanks()
        quote = self.text[self.pos : self.pos + 1]
        name = key.group()
        if quote == "#" and self.pos > after_equals:  # `NAME= # note`: empty, the rest a comment (python-dotenv)
            self.rest_of_line()
            value = ""
        elif quote in ("'", '"'):
            value = self.quoted(quote, start_line, name)
        else:
            value = self.unquoted(start_line, name)
        size = len(name) + 2 + len(value.encode("utf-8", "surrogatepass"))
        if size > MAX_STRING:
            raise self.fail(
                f"{name}'s value is {size - len(name) - 2} bytes: the kernel refuses an environment string "
                f"over {MAX_STRING // 1024} KiB",
                start_line,
            )
        self.values.pop(name, None)
        self.sizes[name] = size
        self.values[name] = value
        total = sum(self.sizes.values())
        if total > self.arg_max:
            raise self.fail(
                f"the file's environment reaches {total} bytes here, over the kernel's limit for the "
                f"environment and arguments together (ARG_MAX, {self.arg_max} bytes)",
                start_line,
            )

    def not_an_assignment(self, why: str) -> None:
        """Refuse the line, or (read leniently) note it and go on after it."""
        if self.skipped is None:
            raise self.fail(why)
        self.skipped.append(f"{self.fail(why)}: skipped")
        self.rest_of_line()

    def line_end(self, pos: int) -> int:
        found = _LINE_END.search(self.text, pos)
        return len(self.text) if found is None else found.start()

    def skip_blanks(self) -> None:
        while self.text.startswith((" ", "\t"), self.pos):
            self.pos += 1

    def unquoted(self, start_line: int, name: str) -> str:
        chunk = self.rest_of_line()
        comment = re.search(r"[ \t]#", chunk)
        if comment:
            chunk = chunk[: comment.start()]
        return self.expand(chunk.strip().replace("\\$", _EXPAND_MARK), start_line, name)

    def quoted(self, quote: str, start_line: int, name: str) -> str:
        self.pos += 1
        out: list[str] = []
        while True:
            if self.pos >= len(self.text):
                raise self.fail(f"the {quote} quote opened here is never closed", start_line)
            ch = self.text[self.pos]
            if ch == quote:
                self.pos += 1
                break
            if ch in "\r\n":
                self.line += 1
            if ch == "\\" and self.pos + 1 < len(self.text):
                nxt = self.text[self.pos + 1]
                escapes = _DOUBLE_ESCAPES if quote == '"' else _SINGLE_ESCAPES
                if nxt in escapes:
                    out.append(_EXPAND_MARK if nxt == "$" else escapes[nxt])
                    self.pos += 2
                    continue
            out.append(ch)
            self.pos += 1
        closing_line = self.line
        after = self.rest_of_line().strip()
        if after and not after.startswith("#"):
            raise self.fail("unexpected text after the closing quote (not shown: it may be a secret)", closing_line)
        value = "".join(out)
        return self.expand(value, start_line, name) if quote == '"' else value

    def expand(self, value: str, line: int, name: str) -> str:
        """value with $NAME / ${NAME} replaced; refused, before it is built, once it would pass MAX_STRING."""
        pieces: list[str] = []
        length = len(name) + 2
        pos = 0
        for match in _VAR.finditer(value):
            ref = match.group(1) or match.group(3)
            unset = "" if match.group(2) is None else match.group(2)
            found = self.values[ref] if ref in self.values else self.base.get(ref, unset)
            length += match.start() - pos + len(found)
            if length > MAX_STRING:
                raise self.fail(
                    f"{name}'s value expands past {MAX_STRING // 1024} KiB (the kernel's bound on one "
                    "environment string): values that reference each other grow on every line",
                    line,
                )
            pieces += [value[pos : match.start()], found]
            pos = match.end()
        pieces.append(value[pos:])
        return "".join(pieces).replace(_EXPAND_MARK, "$")


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:40] + "...")
