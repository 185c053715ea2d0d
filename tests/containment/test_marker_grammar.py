"""The markers' grammar, the receipt's JSON and the winsize packing, checked by hand-written code on a start's
path (no re, json or struct there), agree with the reference each replaces: tables and fuzzing."""

from __future__ import annotations

import json
import random
import re
import struct

import pytest

from proctree import _lazyimport
from proctree._containment import terminal
from proctree._containment.evidence import marker, receipt

# The grammar as the docs state it (marker.py's comment): the reference the hand-written checks must agree with.
TAG = r"[A-Za-z0-9_.-]{1,64}"
TREE = r"[0-9a-f]{32}"
VALUE = r"([1-9][0-9]{0,9}):([0-9]{1,20})(?::([A-Za-z0-9_.-]{1,64}))?(?:@([0-9]{1,20})\.([0-9]{1,20})\.([0-9]{1,10}))?"


def reference_marker(value: str):
    m = re.fullmatch(VALUE, value)
    if not m:
        return None
    if m.group(4) is None:
        return (int(m.group(1)), int(m.group(2)), m.group(3), None, None, None)
    place = int(m.group(4)), int(m.group(5)), int(m.group(6))
    if place[0] >= 1 << 64 or place[1] >= 1 << 64 or place[2] >= 1 << 32:
        return None
    return (int(m.group(1)), int(m.group(2)), m.group(3), *place)


def as_tuple(parsed):
    return None if parsed is None else tuple(parsed)


MARKERS = [
    "1:2",
    "12:0:web",
    "4194304:18446744073709551615:a.b-c_d@4026531836.4026531834.1000",
    "1:2@0.0.0",
    "1:2:t@1.2.4294967295",
    "1:2:t@1.2.4294967296",  # uid out of range
    "1:2@18446744073709551616.1.1",  # pidns out of range
    "0:2",
    "01:2",
    "12345678901:2",  # 11 digits
    "1:",
    ":2",
    "1:2:",
    "1:2:t:u",
    "1:2@",
    "1:2@1.2",
    "1:2@1.2.3.4",
    "1:2@1.2.3@4.5.6",
    "1:2:t@1..3",
    "1:2:" + "t" * 64,
    "1:2:" + "t" * 65,
    "1:2:tag with space",
    "1:2:t/g",
    "١:2",  # an Arabic-Indic digit: str.isdigit takes it, the grammar does not
    "1:²",
    "1:2:t@1.2.٣",
    "",
    "@",
    "1:2\n",
    " 1:2",
]


@pytest.mark.parametrize("value", MARKERS)
def test_marker_values_parse_as_the_grammar_says(value):
    assert as_tuple(marker.parse_marker(value)) == reference_marker(value)
    assert as_tuple(marker.parse_marker(value.encode("utf-8"))) == (
        reference_marker(value) if value.isascii() else None
    )


@pytest.mark.parametrize(
    "tag", ["a", "A-z_0.9", "t" * 64, "t" * 65, "", "a b", "a:b", "a@b", "é", "a\0", "ab\n", "-", "..", 7, None, b"a"]
)
def test_tags_are_checked_as_the_grammar_says(tag):
    assert marker.is_tag(tag) == (isinstance(tag, str) and re.fullmatch(TAG, tag) is not None)


@pytest.mark.parametrize(
    "value", ["0" * 32, "0123456789abcdef" * 2, "0123456789ABCDEF" * 2, "0" * 31, "0" * 33, "g" * 32, "٠" * 32, ""]
)
def test_tree_ids_are_checked_as_the_grammar_says(value):
    expected = value if re.fullmatch(TREE, value) else None
    assert marker.parse_tree_id(value) == expected
    chain = f"{value}:{'a' * 32}"
    assert marker.parse_tree_chain(chain) == (None if expected is None else (value, "a" * 32))


def _random_text(rng: random.Random) -> str:
    alphabet = "0123456789:@.-_abcXYZ \n\0é١" + "0123456789" * 3
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))


def _mutated(rng: random.Random) -> str:
    value = list(rng.choice(MARKERS[:5]))
    for _ in range(rng.randrange(1, 4)):
        i = rng.randrange(0, len(value) + 1)
        op = rng.randrange(3)
        if op == 0 and value:
            del value[min(i, len(value) - 1)]
        elif op == 1:
            value.insert(i, rng.choice("0123456789:@.a-\0١"))
        elif value:
            value[min(i, len(value) - 1)] = rng.choice("0123456789:@.")
    return "".join(value)


def test_fuzzed_values_parse_as_the_grammar_says():
    rng = random.Random(20261206)
    for _ in range(20000):
        value = _random_text(rng) if rng.random() < 0.5 else _mutated(rng)
        assert as_tuple(marker.parse_marker(value)) == reference_marker(value), value
        assert marker.is_tag(value) == (re.fullmatch(TAG, value) is not None), value
        assert (marker.parse_tree_id(value) is not None) == (re.fullmatch(TREE, value) is not None), value


JSON_VALUES = [
    None,
    True,
    False,
    0,
    -1,
    1 << 64,
    0.0,
    1.5,
    1e300,
    1764000000.123456,
    float("nan"),
    float("inf"),
    float("-inf"),
    "",
    'quote " and backslash \\',
    "\b\f\n\r\t\0\x1f\x7f",
    "é😀\u2028\ud800",
    "/sys/fs/cgroup/unified/proctree-1-2/popen 3",
    [1, [2, None], "x"],
    (1, 2),
    {"a": [1, 2], "b": {"c": None}},
]


@pytest.mark.parametrize("value", JSON_VALUES, ids=range(len(JSON_VALUES)))
def test_receipt_json_is_what_json_dumps_writes(value):
    assert receipt._json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=True)


def test_fuzzed_strings_encode_as_json_dumps_does():
    rng = random.Random(6)
    for _ in range(3000):
        text = "".join(chr(rng.choice([rng.randrange(0, 0x80), rng.randrange(0, 0x110000)])) for _ in range(20))
        assert receipt._json(text) == json.dumps(text, ensure_ascii=True), repr(text)


def test_receipt_json_refuses_other_types():
    with pytest.raises(TypeError):
        receipt._json({"x": object()})


def test_an_encoded_receipt_reads_back_whole():
    owner = (4242, 777)
    tag = "web"
    data = receipt.encode(
        owner=owner,
        keeper=(4243, 778),
        command=(4244, 779),
        sid=4243,
        pgid=4243,
        cgroup='/proctree-1-2/tree "q" é',
        tag=tag,
        mode="cgroup",
        marker=marker.format_marker(*owner, tag, (1, 2, 0)),
        tree="0" * 32,
    )
    parsed = receipt.parse(data, "/nowhere/" + receipt.file_name(4243, 778))
    assert not isinstance(parsed, str), parsed
    assert parsed.cgroup == '/proctree-1-2/tree "q" é'
    assert json.loads(data) == json.loads(data.decode("ascii"))


@pytest.mark.parametrize("size", [(0, 0, 0, 0), (24, 80, 0, 0), (65535, 1, 640, 480)])
def test_winsize_packs_as_struct_does(size):
    assert terminal._pack(size) == struct.pack("HHHH", *size)
    assert terminal._unpack(struct.pack("HHHH", *size)) == size


@pytest.mark.parametrize(
    ("name", "package", "expected"),
    [
        ("json", "", "json"),
        ("proctree._teardown.many", "", "proctree._teardown.many"),
        (".owner", "proctree._containment", "proctree._containment.owner"),
        ("..x", "a.b.c", "a.b.x"),
        ("...x", "a.b.c", "a.x"),
        (".", "a.b", "a.b"),
        ("..", "a.b", "a"),
    ],
)
def test_lazy_names_resolve_as_importlib_does(name, package, expected):
    import importlib.util

    assert _lazyimport.absolute(name, package) == expected
    assert importlib.util.resolve_name(name, package) == expected


@pytest.mark.parametrize(("name", "package", "error"), [("..x", "proctree", ImportError), (".x", "", TypeError)])
def test_lazy_names_importlib_refuses_are_refused(name, package, error):
    import importlib.util

    with pytest.raises(error):
        _lazyimport.absolute(name, package)
    with pytest.raises((ImportError, ValueError)):
        importlib.util.resolve_name(name, package)


def test_receipt_json_refuses_keys_json_would_rename():
    for key in (None, True, 1):
        with pytest.raises(TypeError):
            receipt._json({key: 1})
