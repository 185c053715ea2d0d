"""The core's block parsers (csrc/core/args.c), table-driven and fuzzed against Python references.

pt_block_find (the in-memory search macOS uses) and pt_stream_find (the
streaming search Linux reads /proc/<pid>/environ with) must give the same
answers; both are held to ref_find, written here from the contract in
proctree.h, never from the C. pt_stream_find reads a temporary file through
a scratch buffer made tiny on purpose, so keys and values straddle every
chunk boundary. pt_procargs2_split (macOS's KERN_PROCARGS2 layout) runs on
Linux too: random and mutated areas must never crash or point out of bounds.
"""

import errno
import os
import random
import struct
import tempfile

import pytest

from proctree._table import binding
from proctree._table.model import cmdline_from_block, environ_from_block

ffi, lib = binding.ffi, binding.lib

KEYS = [b"FOO", b"FOOBAR", b"F", b"PROCTREE_OWNER", b"\xff\xfe"]


def ref_find(block, key, valcap, limit=None):
    """The contract: the first entry starting with key= wins; its value must fit valcap with a NUL;
    with a limit, a block longer than it answers only from its first `limit` bytes, else -E2BIG."""
    cut = limit is not None and len(block) > limit
    head = block[:limit] if cut else block
    prefix = key + b"="
    pos = 0
    while pos < len(head):
        nul = head.find(b"\0", pos)
        end = nul if nul >= 0 else len(head)
        entry = head[pos:end]
        if entry.startswith(prefix):
            value = entry[len(prefix) :]
            if len(value) >= valcap:
                return -errno.ENAMETOOLONG
            if nul < 0 and cut:
                return -errno.E2BIG  # the value runs past the limit
            return value
        pos = end + 1
    return -errno.E2BIG if cut else -errno.ENODATA


def block_find(block, key, valcap=256):
    val = ffi.new("char[]", max(valcap, 1))
    rc = lib.pt_block_find(block, len(block), key, len(key), val, valcap)
    return ffi.buffer(val, rc)[:] if rc >= 0 else rc


class Streamer:
    """pt_stream_find over a block written to a temporary file."""

    def __init__(self):
        self.f = tempfile.TemporaryFile()

    def find(self, block, key, valcap=256, scratchcap=4096, limit=1 << 20):
        fd = self.f.fileno()
        os.ftruncate(fd, 0)
        os.pwrite(fd, block, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        val = ffi.new("char[]", max(valcap, 1))
        scratch = ffi.new("char[]", max(scratchcap, 1))
        rc = lib.pt_stream_find(fd, key, len(key), val, valcap, scratch, scratchcap, limit)
        return ffi.buffer(val, rc)[:] if rc >= 0 else rc


@pytest.fixture
def streamer():
    s = Streamer()
    yield s
    s.f.close()


BASE = b"A=1\0FOO=bar\0FOOBAR=baz\0X=FOO=no\0EMPTY=\0NOEQUALS\0FOO=second\0"

CASES = [
    # (block, key, expected)
    (BASE, b"FOO", b"bar"),  # the first of two wins
    (BASE, b"FOOBAR", b"baz"),  # a longer name is not FOO
    (BASE, b"FO", -errno.ENODATA),  # nor is a prefix of one
    (BASE, b"X", b"FOO=no"),  # a value may hold '='
    (BASE, b"EMPTY", b""),
    (BASE, b"NOEQUALS", -errno.ENODATA),  # a bare name is no variable
    (b"SUB=xxFOO=inside\0", b"FOO", -errno.ENODATA),  # never inside a value
    (b"xFOO=1\0", b"FOO", -errno.ENODATA),
    (b"FOO=tail", b"FOO", b"tail"),  # a last entry without its NUL still counts
    (b"FOO", b"FOO", -errno.ENODATA),
    (b"FOO=", b"FOO", b""),
    (b"", b"FOO", -errno.ENODATA),
    (b"\0\0\0FOO=after-empties\0", b"FOO", b"after-empties"),
    (b"K=\xff\xfe\x80\0", b"K", b"\xff\xfe\x80"),  # bytes, not text
    (b"\xff\xfe=raw\0", b"\xff\xfe", b"raw"),
]


@pytest.mark.parametrize("block,key,expected", CASES)
def test_find_table(block, key, expected, streamer):
    assert ref_find(block, key, 256) == expected
    assert block_find(block, key) == expected
    for scratchcap in (1, 2, 3, 5, 4096):
        assert streamer.find(block, key, scratchcap=scratchcap) == expected


def test_find_value_room(streamer):
    # The value needs room for its NUL: "bar" fits 4, not 3.
    for find in (block_find, streamer.find):
        assert find(BASE, b"FOO", valcap=4) == b"bar"
        assert find(BASE, b"FOO", valcap=3) == -errno.ENAMETOOLONG
        assert find(BASE, b"EMPTY", valcap=1) == b""


@pytest.mark.parametrize("key", [b"", b"A=B", b"=", b"A\0B"])
def test_find_bad_key(key, streamer):
    assert block_find(BASE, key) == -errno.EINVAL
    assert streamer.find(BASE, key) == -errno.EINVAL


def test_find_bad_room(streamer):
    assert block_find(BASE, b"FOO", valcap=0) == -errno.EINVAL
    assert streamer.find(BASE, b"FOO", valcap=0) == -errno.EINVAL
    assert streamer.find(BASE, b"FOO", scratchcap=0) == -errno.EINVAL


def test_stream_limit(streamer):
    big = b"FOO=first\0" + b"PAD=" + b"x" * 5000 + b"\0" + b"LAST=end\0"
    limit = 1000
    assert streamer.find(big, b"FOO", limit=limit) == b"first"  # found within the limit: exact
    assert streamer.find(big, b"LAST", limit=limit) == -errno.E2BIG  # might be past it: never "absent"
    assert streamer.find(big, b"NONE", limit=limit) == -errno.E2BIG
    assert streamer.find(big, b"LAST", limit=len(big)) == b"end"  # exactly the limit is not over it
    assert streamer.find(big, b"NONE", limit=len(big)) == -errno.ENODATA
    assert streamer.find(big, b"PAD", limit=limit, valcap=100) == -errno.ENAMETOOLONG
    assert streamer.find(big, b"PAD", limit=limit, valcap=10000) == -errno.E2BIG
    assert streamer.find(b"", b"FOO", limit=0) == -errno.ENODATA
    assert streamer.find(b"A", b"FOO", limit=0) == -errno.E2BIG


def random_block(rng):
    """An environment-like block with the keys' names, prefixes and values mixed in, sometimes mutated."""
    pieces = []
    for _ in range(rng.randrange(0, 12)):
        kind = rng.randrange(8)
        key = rng.choice(KEYS)
        if kind == 0:
            pieces.append(key + b"=" + bytes(rng.randrange(256) for _ in range(rng.randrange(6))))
        elif kind == 1:
            pieces.append(key[: rng.randrange(len(key) + 1)] + b"=v")
        elif kind == 2:
            pieces.append(b"X" + key + b"=inner")
        elif kind == 3:
            pieces.append(b"V=" + key + b"=" + key)
        elif kind == 4:
            pieces.append(key)  # no '='
        elif kind == 5:
            pieces.append(key + b"=" + b"L" * rng.choice((40, 255, 256, 300)))  # around the value room
        elif kind == 6:
            pieces.append(b"")
        else:
            pieces.append(bytes(rng.randrange(1, 256) for _ in range(rng.randrange(20))))
    block = b"\0".join(pieces)
    if pieces and rng.random() < 0.7:
        block += b"\0"
    if block and rng.random() < 0.3:  # mutate: flip, insert or drop a byte
        b = bytearray(block)
        i = rng.randrange(len(b))
        op = rng.randrange(3)
        if op == 0:
            b[i] = rng.choice((0, ord("="), ord("F"), rng.randrange(256)))
        elif op == 1:
            b.insert(i, rng.choice((0, ord("="))))
        else:
            del b[i]
        block = bytes(b)
    return block


def test_find_fuzz(streamer):
    rng = random.Random(20260301)
    for _ in range(4000):
        block = random_block(rng)
        key = rng.choice(KEYS)
        valcap = rng.choice((1, 4, 64, 256))
        scratchcap = rng.choice((1, 2, 3, 7, 16, 4096))
        want = ref_find(block, key, valcap)
        assert block_find(block, key, valcap) == want, (block, key, valcap)
        assert streamer.find(block, key, valcap, scratchcap) == want, (block, key, valcap, scratchcap)
        limit = rng.randrange(len(block) + 3)
        assert streamer.find(block, key, valcap, scratchcap, limit) == ref_find(block, key, valcap, limit), (
            block,
            key,
            valcap,
            scratchcap,
            limit,
        )


def test_find_huge_entries(streamer):
    # Entries far longer than the scratch, keys placed across every boundary of a 7-byte scratch.
    rng = random.Random(7)
    for _ in range(200):
        pad = rng.randrange(0, 64)
        block = (
            b"P=" + b"y" * (pad + rng.randrange(5000)) + b"\0" + b"Z" * (pad + 1) + b"FOO=no\0FOO=" + b"v" * pad + b"\0"
        )
        want = ref_find(block, b"FOO", 256)
        assert want == b"v" * pad
        assert streamer.find(block, b"FOO", scratchcap=7) == want
        assert block_find(block, b"FOO") == want


def split(area):
    buf = ffi.new("char[]", area or b"\0")
    outs = [ffi.new("size_t *") for _ in range(4)]
    rc = lib.pt_procargs2_split(buf, len(area), *outs)
    return rc, [o[0] for o in outs]


def area(argc, strings):
    return struct.pack("i", argc) + strings


SPLIT_CASES = [
    # (area, argv, env) or (area, None, None) for -EINVAL
    (area(2, b"/bin/x\0\0\0\0x\0-v\0A=1\0B=2\0\0ptr_munge=\0"), b"x\0-v\0", b"A=1\0B=2\0"),
    (area(2, b"/bin/x\0\0\0\0x\0-v\0"), b"x\0-v\0", b""),  # restricted: no environment
    (area(1, b"/p\0p\0A=1\0"), b"p\0", b"A=1\0"),
    (area(0, b"/p\0\0\0A=1\0"), b"", b"A=1\0"),
    (area(3, b"/p\0p\0\0x\0E=1\0"), b"p\0\0x\0", b"E=1\0"),  # an empty argv string inside
    (area(1, b"/p\0p\0"), b"p\0", b""),
    (area(2, b"/p\0p\0"), None, None),  # fewer strings than argc
    (area(-1, b"/p\0p\0"), None, None),
    (area(1 << 30, b"/p\0p\0"), None, None),
    (area(0, b"/no-nul"), None, None),
    (area(1, b"/p\0p\0A=cut"), None, None),  # an entry cut short
    (b"\x01\0\0", None, None),  # shorter than argc
    (b"", None, None),
]


@pytest.mark.parametrize("blk,argv,env", SPLIT_CASES)
def test_procargs2_split_table(blk, argv, env):
    rc, (ao, al, eo, el) = split(blk)
    if argv is None:
        assert rc == -errno.EINVAL
    else:
        assert rc == 0
        assert blk[ao : ao + al] == argv
        assert blk[eo : eo + el] == env


def test_procargs2_split_fuzz():
    rng = random.Random(11)
    for _ in range(5000):
        if rng.random() < 0.5:
            blk = bytes(rng.choice((0, 0, 0, 65, 61, 255, rng.randrange(256))) for _ in range(rng.randrange(40)))
        else:
            strings = b"\0".join(bytes(rng.randrange(1, 256) for _ in range(rng.randrange(6))) for _ in range(6))
            blk = area(rng.randrange(-2, 8), b"/p" + b"\0" * rng.randrange(4) + strings)
            if blk and rng.random() < 0.5:
                cut = rng.randrange(len(blk))
                blk = blk[:cut]
        rc, (ao, al, eo, el) = split(blk)
        assert rc in (0, -errno.EINVAL)
        if rc == 0:
            assert 4 <= ao and ao + al == eo and eo + el <= len(blk)
            assert al == 0 or blk[ao + al - 1] == 0
            assert el == 0 or blk[eo + el - 1] == 0
            assert b"\0\0" not in b"\0" + blk[eo : eo + el]  # no empty entry inside the environment


def test_environ_from_block():
    assert environ_from_block(BASE) == {"A": "1", "FOO": "bar", "FOOBAR": "baz", "X": "FOO=no", "EMPTY": ""}
    assert environ_from_block(b"") == {}
    assert environ_from_block(b"K=\xff\0") == {"K": os.fsdecode(b"\xff")}
    assert os.fsencode(environ_from_block(b"K=\xff\0")["K"]) == b"\xff"
    assert environ_from_block(b"FOO=tail") == {"FOO": "tail"}
    assert environ_from_block(b"=x\0") == {"": "x"}  # a name may be empty, as in os.environ


def test_cmdline_from_block():
    assert cmdline_from_block(b"") == []
    assert cmdline_from_block(b"a\0\0b\0") == ["a", "", "b"]
    assert cmdline_from_block(b"\0") == [""]
    assert cmdline_from_block(b"a\0b") == ["a", "b"]  # rewritten in place, no final NUL
    assert os.fsencode(cmdline_from_block(b"\xff\0")[0]) == b"\xff"
