"""The facts' pure parsers (csrc/core/facts_parse.c), table-driven and fuzzed against Python references.

The references are written here from proc(5), never from the C: stat's name sits between the FIRST '(' and
the LAST ')', every field after it is a decimal separated by one space; status is read by line name. Random
and mutated lines must never crash the parsers, and whatever they accept must be what the reference reads.
"""

import errno
import random

import pytest

from proctree._table import binding

ffi, lib = binding.ffi, binding.lib

# proc(5) numbering of the stat fields the facts read.
FIELDS = {"ppid": 4, "tty_nr": 7, "flags": 9, "utime": 14, "stime": 15, "num_threads": 20, "start_time": 22}
FIELDS.update(vsize=23, rss_pages=24)
PF_KTHREAD = 0x00200000
INT64 = 2**63


def stat_line(pid=4242, name=b"python3", state=b"S", **over):
    """A stat line of 52 fields with the named ones set (the rest small numbers, some negative)."""
    values = {n: i * 7 for n, i in FIELDS.items()}
    values.update(over)
    fields = [str(-1 if f == 8 else f).encode() for f in range(4, 53)]  # tpgid (8) is -1 without a terminal
    for n, f in FIELDS.items():
        fields[f - 4] = str(values[n]).encode()
    return b"%d (%s) %s %s\n" % (pid, name, state, b" ".join(fields))


def _int32(v):
    return (v + 2**31) % 2**32 - 2**31  # C's conversion of an int64_t to int32_t, as gcc does it


def ref_stat(line):
    """The reference: a dict of the facts' stat fields, or None if the line is not a stat line.

    Every field from 4 to 24 must be a decimal that fits an int64_t (the kernel prints none larger), separated
    by one space; after field 24 comes a space, a newline or the end."""
    lp, rp = line.find(b"("), line.rfind(b")")
    if lp < 1 or rp < lp or line[lp - 1 : lp] != b" ":
        return None
    head = line[: lp - 1]
    if not head.isdigit() or not 0 < int(head) <= 2**31 - 1:
        return None
    rest = line[rp + 1 :]
    if len(rest) < 3 or rest[0:1] != b" " or rest[2:3] != b" " or not (65 <= rest[1] <= 122):
        return None
    fields = rest[3:].split(b" ")
    if len(fields) < 21:
        return None
    fields[20] = fields[20].split(b"\n", 1)[0]  # the line may end after field 24
    nums = []
    for tok in fields[:21]:
        body = tok[1:] if tok.startswith(b"-") else tok
        if not body.isdigit() or int(body) > INT64 - 1:
            return None
        nums.append(int(tok))
    n = dict(zip(range(4, 25), nums))
    return {
        "pid": int(head),
        "name": line[lp + 1 : rp][:63].split(b"\0")[0],  # a C string: the kernel never prints a NUL there
        "state": rest[1:2],
        "ppid": _int32(n[4]),
        "tty_nr": _int32(n[7]),
        "kthread": int(bool(n[9] & PF_KTHREAD)),
        "utime": n[14] % 2**64,
        "stime": n[15] % 2**64,
        "num_threads": n[20],
        "start_time": n[22] % 2**64,
        "vsize": n[23] % 2**64,
        "rss_pages": max(n[24], 0),
    }


def parse_stat(line):
    out = ffi.new("struct pt_facts *")
    rc = lib.pt_parse_stat_facts(line, len(line), out)
    if rc != 0:
        return rc
    return {
        "pid": out.pid,
        "name": ffi.string(out.name),
        "state": out.state,
        "ppid": out.ppid,
        "tty_nr": out.tty_nr,
        "kthread": out.kthread,
        "utime": out.utime,
        "stime": out.stime,
        "num_threads": out.num_threads,
        "start_time": out.start_time,
        "vsize": out.vsize,
        "rss_pages": out.rss_pages,
    }


KTHREADD = (
    b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 25 0 0 "
    b"18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
)


@pytest.mark.parametrize(
    "line, expect",
    [
        (stat_line(), {"pid": 4242, "name": b"python3", "state": b"S", "ppid": 28, "num_threads": 140}),
        (KTHREADD, {"pid": 2, "name": b"kthreadd", "kthread": 1, "start_time": 25, "vsize": 0, "rss_pages": 0}),
        # names with spaces, parentheses, newlines, and a whole fake tail of fields
        (stat_line(name=b"a b (c)"), {"name": b"a b (c)", "ppid": 28}),
        (stat_line(name=b") Z 1 1 1 0 -1 2097152 9 9 9 9 9 9"), {"kthread": 0, "state": b"S"}),
        (stat_line(name=b"\n"), {"name": b"\n"}),
        (stat_line(name=b""), {"name": b""}),
        (stat_line(name=b"x" * 64), {"name": b"x" * 63}),  # cut to fit PT_NAME_MAX with its NUL
        (stat_line(state=b"Z", flags=PF_KTHREAD | 64), {"state": b"Z", "kthread": 1}),
        (stat_line(tty_nr=34816, utime=123456789, stime=1), {"tty_nr": 34816, "utime": 123456789, "stime": 1}),
        (stat_line(vsize=2**63 - 1, start_time=2**40, rss_pages=-5), {"vsize": 2**63 - 1, "rss_pages": 0}),
        (stat_line(pid=2**31 - 1), {"pid": 2**31 - 1}),
        # only the fields up to rss are needed: a line that ends right after it still parses
        (b"7 (x) R 1 7 7 0 -1 4 0 0 0 0 5 6 0 0 20 0 3 0 99 4096 2", {"utime": 5, "stime": 6, "rss_pages": 2}),
        (b"7 (x) R 1 7 7 0 -1 4 0 0 0 0 5 6 0 0 20 0 3 0 99 4096 2\n", {"num_threads": 3, "start_time": 99}),
    ],
)
def test_stat_lines_parse(line, expect):
    got = parse_stat(line)
    assert got == ref_stat(line)
    for key, value in expect.items():
        assert got[key] == value, key


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"garbage",
        b"(x) S 1 1 1 0 -1 4 0 0 0 0 5 6 0 0 20 0 3 0 99 4096 2",  # no pid
        b"0 (x) S 1 1 1 0 -1 4 0 0 0 0 5 6 0 0 20 0 3 0 99 4096 2",  # pid 0
        b"2147483648 (x) S 1 1 1 0 -1 4 0 0 0 0 5 6 0 0 20 0 3 0 99 4096 2",  # beyond int32
        b"7(x) S 1 1 1 0 -1 4 0 0 0 0 5 6 0 0 20 0 3 0 99 4096 2",  # no space before the name
        b"7 x) S 1 1 1 0 -1 4 0 0 0 0 5 6 0 0 20 0 3 0 99 4096 2",  # no '('
        b"7 (x S 1 1 1 0 -1 4 0 0 0 0 5 6 0 0 20 0 3 0 99 4096 2",  # no ')'
        b"7 (x) S 1 1 1 0 -1 4 0 0 0 0 5 6 0 0 20 0 3 0 99 4096",  # rss missing
        b"7 (x) S 1 1 1 0 -1 4 0 0 0 0 5 6 0 0 20 0 3 0 99 4096 2x",  # a stray byte after rss
        b"7 (x) S 1 1 1 0 -1 4 0 0 0 0 zz 6 0 0 20 0 3 0 99 4096 2",  # utime not a number
        b"7 (x) S  1 1 1 0 -1 4 0 0 0 0 5 6 0 0 20 0 3 0 99 4096 2",  # two spaces
        b"7 (x) 1 1 1 0 -1 4 0 0 0 0 5 6 0 0 20 0 3 0 99 4096 2",  # no state
        b"7 (x) S 1 1 1 0 -1 4 0 0 0 0 99999999999999999999 6 0 0 20 0 3 0 99 4096 2",  # 20 digits
        b"7 (x) S 1 1 1 0 -1 4 0 0 0 0 - 6 0 0 20 0 3 0 99 4096 2",  # a lone minus
    ],
)
def test_what_is_not_a_stat_line_is_refused_whole(line):
    assert ref_stat(line) is None
    assert parse_stat(line) == -errno.EIO


def status_text(tgid=b"4242", uid=b"1000\t1001\t1002\t1003", extra=b""):
    return (
        b"Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t" + tgid + b"\nNgid:\t0\nPid:\t4242\n"
        b"PPid:\t1\nTracerPid:\t0\nUid:\t" + uid + b"\nGid:\t0\t0\t0\t0\n" + extra + b"NStgid:\t9\n"
    )


def ref_status(text):
    """The reference: (tgid, (real, effective, saved)), -ENODATA or -EIO."""
    lines = {}
    for line in text.split(b"\n"):
        name, colon, value = line.partition(b":")
        if colon and name not in lines:
            lines[name] = value
    if b"Tgid" not in lines or b"Uid" not in lines:
        return -errno.ENODATA
    try:
        tgid = _ids(lines[b"Tgid"], 1)[0]
        uids = _ids(lines[b"Uid"], 3)
    except ValueError:
        return -errno.EIO
    if not 0 < tgid <= 2**31 - 1 or any(u > 2**32 - 1 for u in uids):
        return -errno.EIO
    return tgid, tuple(uids)


def _ids(value, count):
    if value[:1] not in (b"\t", b" "):
        raise ValueError
    toks = value.replace(b"\t", b" ").split(b" ")
    toks = [t for t in toks if t]
    if len(toks) < count or not all(t.isdigit() and len(t) <= 19 for t in toks[:count]):
        raise ValueError
    return [int(t) for t in toks[:count]]


def parse_status(text):
    tgid = ffi.new("int32_t *")
    uids = ffi.new("uint32_t[3]")
    rc = lib.pt_parse_status_ids(text, len(text), tgid, uids)
    return rc if rc != 0 else (tgid[0], tuple(uids))


@pytest.mark.parametrize(
    "text, expect",
    [
        (status_text(), (4242, (1000, 1001, 1002))),
        (status_text(uid=b"0 0 0 0"), (4242, (0, 0, 0))),
        (status_text(uid=b"4294967295\t0\t1\t1"), (4242, (4294967295, 0, 1))),
        (status_text(uid=b"4294967296\t0\t1\t1"), -errno.EIO),
        (status_text(uid=b"5\t6"), -errno.EIO),
        (status_text(uid=b"-1\t6\t7\t7"), -errno.EIO),
        (status_text(uid=b"5x\t6\t7\t7"), -errno.EIO),
        (status_text(tgid=b"0"), -errno.EIO),
        (status_text(tgid=b""), -errno.EIO),
        (b"Name:\tx\nUid:\t1\t2\t3\t4\n", -errno.ENODATA),  # no Tgid line
        (b"Name:\tx\nTgid:\t5\n", -errno.ENODATA),  # no Uid line
        (b"Name:\tx\nNStgid:\t5\nRUid:\t1\t2\t3\n", -errno.ENODATA),  # a name must start its line
        (b"Tgid:\t5\nUid:\t1\t2\t3", (5, (1, 2, 3))),  # the last line without its newline
        (b"", -errno.ENODATA),
    ],
)
def test_status_lines_parse(text, expect):
    assert parse_status(text) == expect
    assert ref_status(text) == expect


ALPHABET = b"0123456789 ()-\nSZRxab\t:" + bytes([0, 255])


def _mutate(rng, line):
    b = bytearray(line)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        pos = rng.randrange(len(b) + 1)
        if op == 0 and b:
            del b[min(pos, len(b) - 1)]
        elif op == 1:
            b.insert(pos, rng.choice(ALPHABET))
        elif op == 2 and b:
            b[min(pos, len(b) - 1)] = rng.choice(ALPHABET)
        else:
            b = b[:pos]
    return bytes(b)


def test_fuzzed_stat_lines_never_crash_and_agree_with_the_reference():
    rng = random.Random(31)
    accepted = 0
    for i in range(20000):
        if i % 3 == 0:
            line = bytes(rng.choice(ALPHABET) for _ in range(rng.randrange(80)))
        else:
            name = bytes(rng.choice(ALPHABET) for _ in range(rng.randrange(12)))
            nums = {k: rng.choice([0, 1, rng.randrange(2**40), 2**63 - 1]) for k in FIELDS}
            line = _mutate(rng, stat_line(pid=rng.randrange(1, 2**31), name=name, **nums))
        got = parse_stat(line)
        ref = ref_stat(line)
        if ref is None:
            assert got == -errno.EIO, line
        else:
            accepted += 1
            assert got == ref, line
    assert accepted > 1000  # the mutations left enough valid lines to compare


def test_fuzzed_status_texts_never_crash_and_agree_with_the_reference():
    rng = random.Random(32)
    for i in range(20000):
        if i % 3 == 0:
            text = bytes(rng.choice(ALPHABET) for _ in range(rng.randrange(120)))
        else:
            text = _mutate(rng, status_text(uid=b"\t".join(str(rng.randrange(70000)).encode() for _ in range(4))))
        assert parse_status(text) == ref_status(text), text


def test_the_bits_mirror_the_header():
    import pathlib

    header = (pathlib.Path(__file__).parents[2] / "csrc" / "include" / "proctree.h").read_text()
    for name, value in [("STAT", 1), ("UIDS", 2), ("CMDLINE", 4), ("EXE", 8), ("CWD", 16), ("ALL", 31)]:
        assert f"#define PT_FACT_{name} " in header
        line = next(x for x in header.splitlines() if x.startswith(f"#define PT_FACT_{name} "))
        assert int(line.split()[2]) == value == getattr(binding, f"FACT_{name}")


def test_the_python_layout_matches_the_c_struct():
    import struct

    layout = binding._FACTS_LAYOUT
    assert struct.calcsize(layout) == binding.FACTS_ROW_SIZE == ffi.sizeof("struct pt_facts")
    row = ffi.new("struct pt_facts *")
    row.pid, row.status, row.ppid, row.tty_nr, row.have, row.denied = 7, -3, 1, 34816, 31, 2
    row.state, row.kthread, row.ruid, row.euid, row.suid = b"S", 1, 1000, 0, 2**32 - 1
    row.start_time, row.utime, row.stime, row.vsize, row.rss_pages, row.num_threads = 2**40, 5, 6, 2**50, 9, -1
    row.cmdline_off, row.cmdline_len, row.exe_off, row.exe_len, row.cwd_off, row.cwd_len = 1, 2, 3, 4, 5, 6
    row.name = b"x" * 63
    got = struct.unpack(layout, ffi.buffer(row))
    assert got[:-1] == (
        7,
        -3,
        1,
        34816,
        31,
        2,
        b"S",
        1,
        1000,
        0,
        2**32 - 1,
        2**40,
        5,
        6,
        2**50,
        9,
        -1,
        1,
        2,
        3,
        4,
        5,
        6,
    )
    assert got[-1] == b"x" * 63 + b"\0"
