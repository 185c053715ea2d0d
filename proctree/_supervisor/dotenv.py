"""`.env` files, read the way foreman (the dotenv gem) and honcho read them.

    # a comment
    export NAME=value          # `export ` is allowed and ignored
    PLAIN = value # comment    # spaces around '=' and a trailing comment dropped
    URL=http://host/#frag      # '#' starts a comment only after whitespace
    SINGLE='kept $AS is'       # single quotes: literal, may span lines
    DOUBLE="a\\nb ${PLAIN}"     # double quotes: \\n \\t \\" \\\\ \\$ escapes, may span lines
    EXPANDED=$PLAIN/x          # $NAME and ${NAME} expand in unquoted and double-quoted values

Expansion looks up names set earlier in the same files first, then the base
environment, and an unknown name expands to "" (as a shell does). Pure: text
in, a dict out.

Must never: run anything (no `$(command)` substitution: a .env file is data),
or return part of a file that has an error; every error names the line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from .procfile import ProcfileError, read_text

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_EXPORT = re.compile(r"export[ \t]+")
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_DOUBLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "$": "$"}
_EXPAND_MARK = "\0"  # stands for a '$' that was escaped, until expansion is done


def parse_dotenv(text: str, source: str = ".env", base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The assignments of a .env file's text, in file order (a later one of a name wins).

    base: the environment names expand against after the file's own
    (default: none; pass os.environ for foreman's behaviour).
    Raises ProcfileError with the line number for a line that is not an
    assignment, a comment or blank; an unterminated quote; text after a
    closing quote; a NUL character.
    """
    if not isinstance(text, str):
        raise TypeError(f".env text must be a str, not {type(text).__name__}")
    return _Reader(text, source, base or {}).read()


def read_dotenv(
    path: str | os.PathLike[str], base: Mapping[str, str] | None = None, known: Mapping[str, str] | None = None
) -> dict[str, str]:
    """parse_dotenv() on a file; known: values from earlier files, looked up before base."""
    source = os.fspath(path)
    lookup: dict[str, str] = dict(base or {})
    lookup.update(known or {})
    return parse_dotenv(read_text(source, what=".env file"), source=source, base=lookup)


class _Reader:
    """One pass over the text, keeping the line number for errors."""

    def __init__(self, text: str, source: str, base: Mapping[str, str]) -> None:
        self.text = text.replace("\r\n", "\n")
        self.source = source
        self.base = base
        self.values: dict[str, str] = {}
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
        end = self.text.find("\n", self.pos)
        end = len(self.text) if end < 0 else end
        chunk = self.text[self.pos : end]
        self.pos = end + 1
        self.line += 1
        return chunk

    def statement(self) -> None:
        start_line = self.line
        end = self.text.find("\n", self.pos)
        head = self.text[self.pos : len(self.text) if end < 0 else end]
        stripped = head.lstrip()
        if not stripped or stripped.startswith("#"):
            self.rest_of_line()
            return
        self.pos += len(head) - len(stripped)
        export = _EXPORT.match(self.text, self.pos)
        if export:
            self.pos = export.end()
        key = _KEY.match(self.text, self.pos)
        if key is None:
            raise self.fail(f"not a NAME=value line: {_shown(stripped)}")
        self.pos = key.end()
        self.skip_blanks()
        if self.text.startswith("=", self.pos):
            self.pos += 1
        else:
            raise self.fail(f"{key.group()!r} has no '=' after it: {_shown(stripped)}")
        self.skip_blanks()
        quote = self.text[self.pos : self.pos + 1]
        if quote in ("'", '"'):
            value = self.quoted(quote, start_line)
        else:
            value = self.unquoted()
        self.values[key.group()] = value

    def skip_blanks(self) -> None:
        while self.text.startswith((" ", "\t"), self.pos):
            self.pos += 1

    def unquoted(self) -> str:
        chunk = self.rest_of_line()
        comment = re.search(r"[ \t]#", chunk)
        if comment:
            chunk = chunk[: comment.start()]
        return self.expand(chunk.strip().replace("\\$", _EXPAND_MARK))

    def quoted(self, quote: str, start_line: int) -> str:
        self.pos += 1
        out: list[str] = []
        while True:
            if self.pos >= len(self.text):
                raise self.fail(f"the {quote} quote opened here is never closed", start_line)
            ch = self.text[self.pos]
            if ch == quote:
                self.pos += 1
                break
            if ch == "\n":
                self.line += 1
            if ch == "\\" and quote == '"' and self.pos + 1 < len(self.text):
                nxt = self.text[self.pos + 1]
                if nxt in _DOUBLE_ESCAPES:
                    out.append(_EXPAND_MARK if nxt == "$" else _DOUBLE_ESCAPES[nxt])
                    self.pos += 2
                    continue
            out.append(ch)
            self.pos += 1
        closing_line = self.line
        after = self.rest_of_line().strip()
        if after and not after.startswith("#"):
            raise self.fail(f"unexpected text after the closing quote: {_shown(after)}", closing_line)
        value = "".join(out)
        return self.expand(value) if quote == '"' else value

    def expand(self, value: str) -> str:
        def lookup(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            if name in self.values:
                return self.values[name]
            return self.base.get(name, "")

        return _VAR.sub(lookup, value).replace(_EXPAND_MARK, "$")


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:40] + "...")
