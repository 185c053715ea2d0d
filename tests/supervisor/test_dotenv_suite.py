"""python-dotenv's own parser and dotenv_values tests, ported onto proctree's .env reader.

Source: theskumar/python-dotenv at bca6644 (2026-04-20): tests/test_parser.py's
test_parse_stream cases and tests/test_main.py's test_dotenv_values_string_io cases.
python-dotenv's expected Bindings are turned into what dotenv_values() gives (a binding
with an error, or with no value, sets nothing: load_dotenv sets nothing for them either).

USERS_WRITE: the cases foreman and honcho users write (plain, quoted, exported, commented,
multi-line, escaped, CRLF/CR line ends, a BOM, ${...} expansion): proctree must agree.
EXOTIC: cases no foreman or honcho user writes (a key that is not an environment name,
a quoted key) or where proctree keeps foreman's reading; each gives proctree's value,
python-dotenv's, and why; docs/up.md ("`.env` files") lists them.
"""

import pytest

from proctree import ProcfileError
from proctree._procfile.dotenv import parse_dotenv, read_dotenv

P = "tests/test_parser.py::test_parse_stream"
M = "tests/test_main.py::test_dotenv_values_string_io"

# (the original test, the environment, the .env text, what python-dotenv's dotenv_values gives)
USERS_WRITE = [
    (P, {}, "", {}),
    (P, {}, "a=b", {"a": "b"}),
    (P, {}, " a = b ", {"a": "b"}),
    (P, {}, "export a=b", {"a": "b"}),
    (P, {}, "# a=b", {}),
    (P, {}, "a=b#c", {"a": "b#c"}),
    (P, {}, "a=b #c", {"a": "b"}),
    (P, {}, "a=b\t#c", {"a": "b"}),
    (P, {}, "a=b c", {"a": "b c"}),
    (P, {}, "a=b\tc", {"a": "b\tc"}),
    (P, {}, "a=b  c", {"a": "b  c"}),
    (P, {}, "a=b\u00a0 c", {"a": "b\u00a0 c"}),
    (P, {}, "a=b c ", {"a": "b c"}),
    (P, {}, "a='b c '", {"a": "b c "}),
    (P, {}, 'a="b c "', {"a": "b c "}),
    (P, {}, "export export_a=1", {"export_a": "1"}),
    (P, {}, "export port=8000", {"port": "8000"}),
    (P, {}, 'a="b\nc"', {"a": "b\nc"}),
    (P, {}, "a='b\nc'", {"a": "b\nc"}),
    (P, {}, 'a="b\\nc"', {"a": "b\nc"}),
    (P, {}, "a='b\\nc'", {"a": "b\\nc"}),
    (P, {}, 'a="b\\"c"', {"a": 'b"c'}),
    (P, {}, "a='b\\'c'", {"a": "b'c"}),
    (P, {}, "a=à", {"a": "à"}),
    (P, {}, 'a="à"', {"a": "à"}),
    (P, {}, "no_value_var", {}),  # dotenv_values: {"no_value_var": None}; nothing is set
    (P, {}, "a: b", {}),  # an error line: skipped (up warns)
    (P, {}, "a=b\nc=d", {"a": "b", "c": "d"}),
    (P, {}, "a=b\rc=d", {"a": "b", "c": "d"}),
    (P, {}, "a=b\r\nc=d", {"a": "b", "c": "d"}),
    (P, {}, "a=\nb=c", {"a": "", "b": "c"}),
    (P, {}, "\n\n", {}),
    (P, {}, "a=b\n\n", {"a": "b"}),
    (P, {}, "a=b\n\nc=d", {"a": "b", "c": "d"}),
    (P, {}, '# comment\na="b\nc"\nd=e\n', {"a": "b\nc", "d": "e"}),
    (P, {}, "a=b\n# comment 1", {"a": "b"}),
    (P, {}, "# comment 1\n# comment 2", {}),
    (P, {}, "\ufeffa=b", {"a": "b"}),
    (P, {}, "\ufeffa=b\nc=d", {"a": "b", "c": "d"}),
    (M, {"b": "c"}, "a=${b}", {"a": "c"}),
    (M, {"b": "c"}, "a=${b:-d}", {"a": "c"}),
    (M, {}, "b=c\na=${b}", {"a": "c", "b": "c"}),
    (M, {}, "a=${b}", {"a": ""}),
    (M, {}, "a=${b:-d}", {"a": "d"}),
    (M, {"b": "c"}, 'a="${b}"', {"a": "c"}),
    (M, {"b": "c"}, "a=x${b}y", {"a": "xcy"}),
    (M, {"a": "b"}, "a=${a}", {"a": "b"}),
    (M, {}, "a=${a}", {"a": ""}),
    (M, {"a": "b"}, "a=${a:-c}", {"a": "b"}),
    (M, {}, "a=${a:-c}", {"a": "c"}),
    (M, {"b": "c"}, "a=${b}${b}", {"a": "cc"}),
    (M, {"b": "c"}, "b=d\na=${b}", {"a": "d", "b": "d"}),
    (M, {}, "a=b\na=c\nd=${a}", {"a": "c", "d": "c"}),
    (M, {}, "a=b\nc=${a}\nd=e\nc=${d}", {"a": "b", "c": "e", "d": "e"}),
]

# (the original test, the environment, the .env text, proctree's values, python-dotenv's, why)
EXOTIC = [
    (P, {}, "'a'=b", {}, {"a": "b"}, "a quoted key: not an environment name as written; skipped with a warning"),
    (P, {}, " export 'a'=b", {}, {"a": "b"}, "a quoted key, exported: skipped with a warning"),
    (P, {}, "[=b", {}, {"[": "b"}, "'[' is no environment name (no shell can read it): skipped with a warning"),
    (
        P,
        {},
        'uglyKey[%$="S3cr3t_P4ssw#rD" #\na=b',
        {"a": "b"},
        {"uglyKey[%$": "S3cr3t_P4ssw#rD", "a": "b"},
        "'uglyKey[%$' is no environment name: that line is skipped with a warning, the rest read",
    ),
    (
        M,
        {"b": "c"},
        "a=$b",
        {"a": "c"},
        {"a": "$b"},
        "$NAME expands without braces, as foreman (the dotenv gem) and the shell expand it",
    ),
    (
        M,
        {"b": "c"},
        "a='${b}'",
        {"a": "${b}"},
        {"a": "c"},
        "single quotes are literal, as in foreman and the shell: a '$' in a quoted password stays",
    ),
]


def _id(case):
    return f"{case[0].split('::')[1]}:{case[2]!r}"


@pytest.mark.parametrize("origin, env, text, theirs", USERS_WRITE, ids=[_id(c) for c in USERS_WRITE])
def test_agrees_with_python_dotenv(origin, env, text, theirs):
    assert parse_dotenv(text, base=env, skipped=[]) == theirs


@pytest.mark.parametrize("origin, env, text, ours, theirs, why", EXOTIC, ids=[_id(c) for c in EXOTIC])
def test_exotic_cases_differ_as_documented(origin, env, text, ours, theirs, why):
    skipped: list[str] = []
    assert parse_dotenv(text, base=env, skipped=skipped) == ours != theirs
    if "skipped" in why:
        assert skipped and skipped[0].startswith(".env:1: ")


def test_parse_stream_unclosed_quote_is_refused_not_skipped():
    """tests/test_parser.py::test_parse_stream: 'a="\\nb=c'. python-dotenv skips line 1 (an
    error binding) and reads b=c; proctree refuses the file naming the line, as honcho's
    shlex reader fails on it (No closing quotation): half a file read is half a config."""
    with pytest.raises(ProcfileError, match=r'^\.env:1: the " quote opened here is never closed'):
        parse_dotenv('a="\nb=c', skipped=[])


def test_a_bom_in_a_file_is_dropped_too(tmp_path):
    """tests/test_parser.py::test_parse_stream's BOM cases, read from a file as up reads it."""
    path = tmp_path / ".env"
    path.write_bytes("\ufeffa=b\nc=d".encode())
    assert read_dotenv(path) == {"a": "b", "c": "d"}
