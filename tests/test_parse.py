"""An independent pure-Python reader of /proc/<pid>/stat, and its table-driven tests.

The cross-checks in test_snapshot.py compare the C core against this parser,
so it is written from proc(5), not from csrc/: the name (field 2) sits
between the FIRST '(' and the LAST ')' and may hold spaces, parentheses and
newlines; every other field is a decimal after it, separated by one space.
It must never share code with the core, or the cross-check proves nothing.
"""
import os
import sys

import pytest

# proc(5) numbering: 1 pid, 2 comm, 3 state, 4 ppid, 5 pgrp, 6 session,
# 20 num_threads, 22 starttime.
FIELDS_AFTER_NAME = 52 - 2  # fields 3..52 on current kernels; older ones have fewer


class StatParseError(ValueError):
    """The line is not a /proc/<pid>/stat line."""


def parse_stat(raw):
    """Parse one stat line (bytes) into a dict; raise StatParseError if it is malformed.

    Keys: pid, name (bytes, exactly what the kernel shows), state (str),
    ppid, pgid, sid, num_threads, start_time.
    """
    if not isinstance(raw, bytes):
        raise TypeError("parse_stat takes bytes")
    line = raw[:-1] if raw.endswith(b"\n") else raw
    lp = line.find(b"(")
    rp = line.rfind(b")")
    if lp < 0 or rp < lp:
        raise StatParseError(f"no (name) in {raw!r}")
    head = line[:lp]
    if not head.endswith(b" ") or not head[:-1].isdigit():
        raise StatParseError(f"bad pid field in {raw!r}")
    pid = int(head[:-1])
    name = line[lp + 1 : rp]
    rest = line[rp + 1 :]
    if not rest.startswith(b" "):
        raise StatParseError(f"no space after the name in {raw!r}")
    fields = rest[1:].split(b" ")
    # fields[0] is field 3 (state); we need up to field 22.
    if len(fields) < 22 - 2:
        raise StatParseError(f"only {len(fields) + 2} fields in {raw!r}")
    state = fields[0]
    if len(state) != 1 or not state.isalpha():
        raise StatParseError(f"bad state {state!r} in {raw!r}")

    def num(field_no):
        tok = fields[field_no - 3]
        body = tok[1:] if tok.startswith(b"-") else tok
        if not body.isdigit():
            raise StatParseError(f"field {field_no} is {tok!r} in {raw!r}")
        return int(tok)

    for field_no in range(4, len(fields) + 3):
        num(field_no)  # every field after the state is a decimal
    return {
        "pid": pid,
        "name": name,
        "state": state.decode("ascii"),
        "ppid": num(4),
        "pgid": num(5),
        "sid": num(6),
        "num_threads": num(20),
        "start_time": num(22),
    }


def read_proc(pid, root="/proc"):
    """Parse root/<pid>/stat plus the owner of the root/<pid> directory; None if the process is gone.

    Returns a tuple ordered like proctree.Proc:
    (pid, ppid, pgid, sid, uid, state, start_time, name-as-str).
    """
    # The owner of the /proc/<pid> DIRECTORY is the euid (procfs special-cases
    # it); files inside are root's when the process is not dumpable.
    try:
        uid = os.stat(f"{root}/{pid}").st_uid
        fd = os.open(f"{root}/{pid}/stat", os.O_RDONLY)
    except (FileNotFoundError, ProcessLookupError):
        return None
    try:
        raw = os.read(fd, 65536)
    except (FileNotFoundError, ProcessLookupError):
        return None
    finally:
        os.close(fd)
    if not raw:
        return None
    f = parse_stat(raw)
    return (f["pid"], f["ppid"], f["pgid"], f["sid"], uid, f["state"], f["start_time"], os.fsdecode(f["name"]))


def read_all(root="/proc"):
    """{pid: tuple} for every process visible under root (processes may vanish meanwhile)."""
    out = {}
    for entry in os.listdir(root):
        if entry.isdigit():
            row = read_proc(int(entry), root)
            if row is not None:
                out[row[0]] = row
    return out


# ---------------------------------------------------------------------------
# Tests of the parser itself, on synthetic lines.

# A real-looking tail: fields 4..52 for a process with ppid 1, pgrp 100,
# session 100, 1 thread, starttime 123456.
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
