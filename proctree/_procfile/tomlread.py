"""Reading a TOML settings file (proctree.toml, pyproject.toml) with bounded nesting.

tomllib recurses once per level of nested arrays and inline tables, so a
file of a few KiB of '[' (in proctree.toml, or in another tool's table of
pyproject.toml, which we parse whole) ends in a RecursionError. The text is
scanned first for its deepest nesting, and refused past MAX_DEPTH with the
file and line named; the parsed document is measured again (dotted keys and
table headers nest too). Pure but for reading the file it is given.
"""

from __future__ import annotations

import sys
from typing import Any

from .procfile import ProcfileError, read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

__all__ = ["MAX_DEPTH", "nesting_depth", "parse_toml", "read_toml"]

# Deeper than any settings file needs (proctree's own go 5 levels deep), far below the recursion limit.
MAX_DEPTH = 100


def nesting_depth(text: str, limit: int = MAX_DEPTH) -> tuple[int, int]:
    """(deepest nesting of [ and { outside strings and comments, the line where it passed limit or 0).

    A scan, not a parser: unbalanced or invalid text is left to tomllib.
    """
    depth = deepest = 0
    line = 1
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
        elif ch == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif ch in "\"'":
            triple = text.startswith(ch * 3, i)
            quote = ch * 3 if triple else ch
            j = i + len(quote)
            while j < n:
                if text[j] == "\\" and ch == '"':
                    j += 2
                    continue
                if text.startswith(quote, j):
                    break
                if text[j] == "\n":
                    if not triple:
                        break  # an unterminated string: tomllib says so
                    line += 1
                j += 1
            i = j + len(quote)
            continue
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if depth > limit:
                    return deepest, line
        elif ch in "]}":
            depth = max(0, depth - 1)
        i += 1
    return deepest, 0


def _document_depth(document: dict[str, Any]) -> int:
    """How deeply the parsed document nests (tables and arrays), measured without recursion."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(document, 1)]
    while todo:
        value, depth = todo.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break
        if isinstance(value, dict):
            todo.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            todo.extend((v, depth + 1) for v in value)
    return deepest


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """The TOML document of text, or ProcfileError naming source (and the line, when it nests too deeply)."""
    deepest, line = nesting_depth(text)
    if line:
        raise ProcfileError(f"nested more than {MAX_DEPTH} levels deep: not a settings file", source=source, line=line)
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProcfileError(f"not valid TOML: {exc}", source=source) from None
    except RecursionError:  # what the scan missed: still a clear refusal, never a traceback
        raise ProcfileError(f"nested too deeply (more than {MAX_DEPTH} levels)", source=source) from None
    if _document_depth(document) > MAX_DEPTH:
        raise ProcfileError(f"nested more than {MAX_DEPTH} levels deep: not a settings file", source=source)
    return document


def read_toml(path: str) -> dict[str, Any]:
    """parse_toml() of a small UTF-8 file (see procfile.read_text)."""
    return parse_toml(read_text(path, what="TOML file"), path)
