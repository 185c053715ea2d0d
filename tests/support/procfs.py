"""An independent pure-Python reader of /proc/<pid>/stat: the reference the C core is checked against.

Written from proc(5), not from csrc/: the name (field 2) sits between the
FIRST '(' and the LAST ')' and may hold spaces, parentheses and newlines;
every other field is a decimal after it, separated by one space. It must
never share code with the core, or the cross-check proves nothing.
"""

import os

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
