"""Table-driven tests of the independent /proc/<pid>/stat parser (tests/support/procfs.py).

The cross-checks in test_snapshot.py compare the C core against this parser,
so it is written from proc(5), not from csrc/: the name (field 2) sits
between the FIRST '(' and the LAST ')' and may hold spaces, parentheses and
newlines; every other field is a decimal after it, separated by one space.
It must never share code with the core, or the cross-check proves nothing.
"""

import os
import sys

import pytest

from support.procfs import FIELDS_AFTER_NAME, StatParseError, parse_stat, read_all, read_proc  # noqa: F401


def _tail(ppid=1, pgrp=100, session=100, threads=1, start=123456, prio="20"):
    f = ["0"] * (52 - 3)  # fields 4..52
    f[4 - 4] = str(ppid)
    f[5 - 4] = str(pgrp)
    f[6 - 4] = str(session)
    f[7 - 4] = "34816"  # tty_nr
    f[8 - 4] = "-1"  # tpgid: -1 when there is no controlling terminal
    f[18 - 4] = prio  # priority: negative for real-time tasks
    f[20 - 4] = str(threads)
    f[22 - 4] = str(start)
    return " ".join(f).encode()


def _line(pid, name, state=b"S", **kw):
    return b"%d (%s) %s %s\n" % (pid, name, state, _tail(**kw))


GOOD = [
    # (id, line, expected subset)
    ("plain", _line(42, b"bash"), dict(pid=42, name=b"bash", state="S", ppid=1, pgid=100, sid=100)),
    ("spaces", _line(7, b":-) 1 2 3"), dict(name=b":-) 1 2 3", ppid=1)),
    ("parens", _line(7, b"a) b) c"), dict(name=b"a) b) c", ppid=1, pgid=100)),
    ("fake-fields", _line(7, b") Z 99 99 99 ("), dict(name=b") Z 99 99 99 (", state="S", ppid=1)),
    ("newline", _line(7, b"new\nline"), dict(name=b"new\nline", ppid=1)),
    ("empty", _line(7, b""), dict(name=b"", ppid=1)),
    ("only-parens", _line(7, b")("), dict(name=b")(")),
    ("nested", _line(7, b"((x))"), dict(name=b"((x))")),
    ("trailing-paren", _line(7, b"x)"), dict(name=b"x)")),
    ("non-utf8", _line(7, b"\xff\xfe"), dict(name=b"\xff\xfe")),
    ("zombie", _line(9, b"sh", b"Z"), dict(state="Z")),
    ("stopped", _line(9, b"sh", b"T"), dict(state="T")),
    ("idle-kthread", _line(11, b"kworker/0:1-events", b"I", ppid=2, pgrp=0, session=0), dict(ppid=2, pgid=0, sid=0)),
    ("init", _line(1, b"init", ppid=0, pgrp=1, session=1), dict(pid=1, ppid=0)),
    ("rt-priority", _line(7, b"rt", prio="-51"), dict(name=b"rt")),
    ("threads-start", _line(7, b"x", threads=17, start=2**40), dict(num_threads=17, start_time=2**40)),
    ("64-byte-kthread-name", _line(7, b"k" * 63), dict(name=b"k" * 63)),
    ("no-trailing-newline", _line(7, b"x").rstrip(b"\n"), dict(name=b"x")),
    ("old-kernel-fewer-fields", b"5 (x) S 1 5 5 " + b" ".join([b"0"] * 13) + b" 1 0 777", dict(ppid=1, start_time=777)),
]


@pytest.mark.parametrize("line,expected", [g[1:] for g in GOOD], ids=[g[0] for g in GOOD])
def test_parses(line, expected):
    got = parse_stat(line)
    for key, value in expected.items():
        assert got[key] == value, key


BAD = [
    ("empty", b""),
    ("no-open-paren", b"42 bash) S 1 2 3"),
    ("no-close-paren", b"42 (bash S 1 2 3"),
    ("close-before-open", b"42 )bash( S 1 2 3"),
    ("pid-not-number", b"4x2 (bash) " + b"S " + _tail()),
    ("no-pid", b"(bash) S " + _tail()),
    ("negative-pid", b"-4 (bash) S " + _tail()),
    ("cut-after-name", b"42 (bash)"),
    ("cut-mid-line", _line(42, b"bash")[:40]),
    ("no-space-after-name", b"42 (bash)S " + _tail()),
    ("two-letter-state", b"42 (bash) SS " + _tail()),
    ("garbage-field", b"42 (bash) S 1 2 x " + _tail()[6:]),
    ("double-space", b"42 (bash) S  1 " + _tail()),
]


@pytest.mark.parametrize("line", [b[1] for b in BAD], ids=[b[0] for b in BAD])
def test_rejects(line):
    with pytest.raises(StatParseError):
        parse_stat(line)


def test_rejects_str():
    with pytest.raises(TypeError):
        parse_stat("1 (x) S " + _tail().decode())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_parses_own_stat():
    row = read_proc(os.getpid())
    assert row[0] == os.getpid()
    assert row[1] == os.getppid()
    assert row[2] == os.getpgrp()
    assert row[3] == os.getsid(0)
    assert row[4] == os.geteuid()
    assert row[5] == "R"  # we are running while we read it
    with open("/proc/self/comm", "rb") as f:
        assert row[7] == os.fsdecode(f.read().rstrip(b"\n"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_parses_every_live_process():
    table = read_all()
    assert os.getpid() in table and 1 in table
    for pid, row in table.items():
        assert row[0] == pid
