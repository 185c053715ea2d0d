"""The receipt's own JSON writer (evidence/receipt.py _json) writes exactly what json.dumps writes.

Table-driven on synthetic values: strings that need no escaping (the usual
marker, tree id and cgroup path: written whole) and strings that do (quotes,
backslashes, control characters, DEL, non-ASCII, astral characters: escaped
one character at a time), inside the containers a receipt holds.
"""

import json

import pytest

from proctree._containment.evidence.receipt import _json

STRINGS = [
    "",
    "plain",
    " ~",
    "/sys/fs/cgroup/user.slice/proctree-12-34-4026531836-4026531834/tree-1-abcdef",
    "12:3456789:4026531836:4026531834:0:tag",
    'a"quote',
    "back\\slash",
    "tab\there",
    "new\nline",
    "\x00nul",
    "\x1funit",
    "del\x7f",
    "é",
    "\u2028",
    "\U0001f600",
    'mixed é"\\\t',
]


@pytest.mark.parametrize("value", STRINGS)
def test_a_string_as_json_dumps_writes_it(value):
    assert _json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=True)


@pytest.mark.parametrize(
    "value",
    [None, True, False, 0, -1, 2**63, 1.5, 1e10, [1, 'a"b', None], ("x", 2), {"k": "v", "é": [1, "\n"]}],
)
def test_other_values_as_json_dumps_writes_them(value):
    assert _json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=True)
