"""The only importer of proctree._core (the cffi module).

Turns the core's -errno returns into exceptions and its rows into Proc
records. Nothing here reads ffi.errno: the C functions return the error.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Sequence

try:
    from .. import _core
except ImportError as exc:  # a source checkout without its build, most often: say so, and the ways out
    from .nocore import missing_core_error

    raise missing_core_error(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), exc) from None
from .._errors import AccessDenied, NoSuchProcess
from .model import Proc, Snapshot

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

ffi = _core.ffi
lib = _core.lib

ROW_SIZE = ffi.sizeof("struct pt_proc")
_INTS_PER_ROW = ROW_SIZE // 4
assert ROW_SIZE % 4 == 0 and ffi.offsetof("struct pt_proc", "ppid") == 4


class Incomplete(Exception):
    """The core could not give a complete answer this time (-EAGAIN): retry or scan."""


def check(rc: int, pid: int | None = None) -> int:
    """Return rc if it is not an error; otherwise raise the matching exception."""
    if rc >= 0:
        return rc
    code = -rc
    if code in (errno.ESRCH, errno.ENOENT):
        raise NoSuchProcess(pid)
    if code in (errno.EPERM, errno.EACCES):
        raise AccessDenied(pid)
    if code == errno.EAGAIN:
        raise Incomplete(pid)
    try:
        raise OSError(code, os.strerror(code))
    except OSError as exc:
        if pid is None:
            raise
        raise OSError(code, f"{os.strerror(code)} (pid={pid})") from exc


def _row_to_proc(row: Any) -> Proc:
    return Proc(
        row.pid,
        row.ppid,
        row.pgid,
        row.sid,
        row.uid,
        row.state.decode("ascii", "replace"),
        row.start_time,
        os.fsdecode(ffi.string(row.name)),
    )


def proc(pid: int) -> Proc:
    """One process by pid (already validated). Raises NoSuchProcess/AccessDenied."""
    return proc_row(pid)[0]


def proc_row(pid: int) -> tuple[Proc, Any]:
    """(Proc, raw row) for pid; the row can be handed to verified_children_of() or descendants_of() later."""
    row = ffi.new("struct pt_proc *")
    check(lib.pt_proc(pid, row), pid)
    return _row_to_proc(row), row


# Start from room for the last table seen, so a busy machine rarely retries.
_last_count = 512


def snapshot() -> Snapshot:
    """Every visible process, as a Snapshot (rows stay in C memory until asked for)."""
    global _last_count
    rows, n = _growing("struct pt_proc[]", _last_count + _last_count // 4 + 64, lib.pt_snapshot)
    _last_count = n
    # Rows are 24 int32s each with pid first and ppid second: strided views of
    # the raw buffer give both columns at C speed without touching each row.
    ints = memoryview(ffi.buffer(rows, n * ROW_SIZE)).cast("i")
    pids = ints[0::_INTS_PER_ROW].tolist()
    ppids = ints[1::_INTS_PER_ROW]
    return Snapshot._from_rows(pids, ppids, lambda i: _row_to_proc(rows[i]))


def child_pids(pid: int) -> list[int]:
    """Pids of pid's direct children as the kernel lists them; may raise Incomplete."""
    out, n = _growing("int32_t[]", 256, lambda buf, cap: lib.pt_children(pid, buf, cap), pid)
    return list(out[0:n])


def verified_children_of(row: Any) -> list[Proc]:
    """Procs of the direct children of the process a proc_row() row describes,
    each read back by the core with the same parent; may raise Incomplete."""
    return _verified_rows(lib.pt_verified_children_of, row)


def descendants_of(row: Any) -> list[Proc]:
    """Procs below the process a proc_row() row describes, breadth-first, each
    verified by the core; may raise Incomplete (scan instead)."""
    return _verified_rows(lib.pt_descendants_of, row)


def _verified_rows(call: Callable[[Any, Any, int], int], row: Any) -> list[Proc]:
    rows, n = _growing("struct pt_proc[]", 64, lambda buf, cap: call(row, buf, cap), row.pid)
    # A process that reparented inside the subtree mid-walk can be listed twice.
    seen = {row.pid}
    out = []
    for i in range(n):
        r = rows[i]
        if r.pid not in seen:
            seen.add(r.pid)
            out.append(_row_to_proc(r))
    return out


def _growing(ctype: str, cap: int, call: Callable[[Any, int], int], pid: int | None = None) -> tuple[Any, int]:
    """(buffer, count) from call(buffer, cap), with a ctype[cap] buffer grown while the core says -ENOBUFS."""
    while True:
        buf = ffi.new(ctype, cap)
        n = call(buf, cap)
        if n != -errno.ENOBUFS:
            return buf, check(n, pid)
        cap *= 4


def now() -> int:
    """The current time in start_time units."""
    out = ffi.new("uint64_t *")
    check(lib.pt_now(out))
    return out[0]


# Environments and argument lists. A block is read into a buffer that starts
# modest and grows while the core says -E2BIG, up to BLOCK_MAX (also the
# core's PT_ENV_SCAN_MAX: the Linux scan's bound); beyond it the block is
# refused, never cut. On macOS the buffer holds the whole KERN_PROCARGS2 area
# (path, argv and environment), whose size KERN_ARGMAX bounds (1 MiB).
BLOCK_MAX = 1 << 20
_BLOCK_START = 64 * 1024
# env_scan: room for one value (with its NUL), and the read buffer. Linux
# streams /proc/<pid>/environ through it a page at a time; macOS reads the
# whole area into it, so it gets KERN_ARGMAX.
ENV_SLOT = 256
_LINUX = sys.platform.startswith("linux")


def _scan_scratch_size() -> int:
    if _LINUX:
        return 16 * 1024
    try:
        argmax = os.sysconf("SC_ARG_MAX")  # sysctl kern.argmax on macOS
    except (ValueError, OSError):
        argmax = BLOCK_MAX
    return max(_BLOCK_START, min(argmax, BLOCK_MAX))


def _read_block(call: Callable[[int, Any, int], int], pid: int, what: str) -> bytes:
    cap = _BLOCK_START
    while True:
        buf = ffi.new("char[]", cap)
        n = call(pid, buf, cap)
        if n != -errno.E2BIG:
            check(n, pid)
            return ffi.buffer(buf, n)[:]
        if cap >= BLOCK_MAX:
            raise OSError(errno.E2BIG, f"the {what} of pid {pid} is longer than {BLOCK_MAX} bytes")
        cap = min(cap * 4, BLOCK_MAX)


def environ_block(pid: int) -> bytes:
    """pid's environment as the kernel holds it: NUL-separated entries, undecoded (pid already validated).

    b"" for a zombie or a kernel thread (and on macOS for a restricted
    process, whose environment the kernel withholds: unknown, not empty).
    Raises NoSuchProcess, AccessDenied, OSError(E2BIG) past BLOCK_MAX, or OSError.
    """
    return _read_block(lib.pt_environ, pid, "environment")


def cmdline_block(pid: int) -> bytes:
    """pid's argv as NUL-separated strings, undecoded; otherwise as environ_block()."""
    return _read_block(lib.pt_cmdline, pid, "argument list")


# What env_scan says for a pid whose value it could not give, by errno.
_SCAN_WORDS = {
    errno.ENODATA: "absent",
    errno.ESRCH: "gone",
    errno.ENOENT: "gone",
    errno.EPERM: "denied",
    errno.EACCES: "denied",
    errno.ENAMETOOLONG: "too-long",
}


def env_key(key: object) -> bytes:
    """key as the bytes of a variable name, or TypeError/ValueError (empty, or holding '=' or NUL)."""
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, not {type(key).__name__}")
    raw = os.fsencode(key)
    if not raw or b"=" in raw or b"\0" in raw:
        raise ValueError(f"not an environment variable name: {key!r}")
    return raw


def env_scan(key: str, pids: Sequence[int]) -> dict[int, bytes | str]:
    """The value of variable key in each of pids' environments, in one call into the core.

    For each pid: the value (bytes) of the first entry named key, or
    "absent" (the environment was read and has no such entry; also an empty
    one: a zombie's, a kernel thread's, a restricted macOS process's),
    "gone" (no such process), "denied" (not ours to read), "too-long" (the
    value is longer than ENV_SLOT - 1 bytes), or "unreadable" (anything
    else, including an environment over BLOCK_MAX whose first BLOCK_MAX bytes
    do not hold the variable). pids are already validated.
    """
    raw = env_key(key)
    n = len(pids)
    if n == 0:
        return {}
    pid_arr = ffi.new("int32_t[]", list(pids))
    status = ffi.new("int32_t[]", n)
    vals = ffi.new("char[]", n * ENV_SLOT)
    size = _scan_scratch_size()
    scratch = ffi.new("char[]", size)
    rc = lib.pt_env_scan(pid_arr, n, raw, len(raw), status, vals, ENV_SLOT, scratch, size)
    if rc < 0:
        raise OSError(-rc, os.strerror(-rc))
    out: dict[int, bytes | str] = {}
    values = ffi.buffer(vals, n * ENV_SLOT)
    for i in range(n):
        st = status[i]
        if st >= 0:
            out[pid_arr[i]] = values[i * ENV_SLOT : i * ENV_SLOT + st]
        else:
            out[pid_arr[i]] = _SCAN_WORDS.get(-st, "unreadable")
    return out


# PF_KTHREAD in the kernel's task flags: set only on kernel threads, and not
# settable from user space. A parent pid of 2 or an empty command line is no
# proof: a process in its own PID namespace can have either.
PF_KTHREAD = 0x00200000


def stat_flags(stat: bytes) -> int:
    """The flags field (field 9) of a /proc/<pid>/stat line (bytes).

    Fields are counted after the LAST ')': the name before it may hold
    spaces and parentheses, even a whole fake tail of fields. ValueError if
    the line is not one.
    """
    head, paren, tail = stat.rpartition(b")")
    fields = tail.split()
    if not paren or b"(" not in head or len(fields) < 7:
        raise ValueError(f"not a /proc/<pid>/stat line: {stat[:80]!r}")
    return int(fields[6])


def is_kernel_thread(pid: int) -> bool:
    """True if pid is a kernel thread (not a process tree anyone can tear down).

    pid already validated. Linux: PF_KTHREAD in /proc/<pid>/stat. macOS: only
    pid 0 (kernel_task) is the kernel. Raises NoSuchProcess/AccessDenied.
    """
    if not sys.platform.startswith("linux"):
        return pid == 0
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError) as exc:
        raise NoSuchProcess(pid) from exc
    except PermissionError as exc:
        raise AccessDenied(pid) from exc
    try:
        return bool(stat_flags(stat) & PF_KTHREAD)
    except ValueError as exc:
        raise OSError(errno.EIO, f"unreadable /proc/{pid}/stat") from exc


# Process facts (csrc/core/facts_linux.c). The PT_FACT_* bits of proctree.h, mirrored: cffi's header reader
# gives the module no constants. tests/table/test_facts_parsers.py holds the two to the same values.
FACT_STAT, FACT_UIDS, FACT_CMDLINE, FACT_EXE, FACT_CWD = 1, 2, 4, 8, 16
FACT_ALL = 31
FACTS_ROW_SIZE = ffi.sizeof("struct pt_facts")
# Room for one process's strings (argv, exe, cwd) before a row is read again alone with more.
_FACTS_STRINGS_PER_ROW = 1024
# A row's status after the C call: facts_table() gives these back as they are.
ROW_GONE, ROW_NO_ROOM = -errno.ESRCH, -errno.ENOBUFS

# One row as raw values: (status, pid, ppid, tty_nr, have, denied, state, kthread, ruid, euid, suid,
# start_time, utime, stime, vsize, rss_pages, num_threads, cmdline, exe, cwd, name); the three strings are bytes
# or None (not read), the name bytes.
RawFacts = tuple


def _facts_rows(rows: Any, n: int, arena: Any) -> list[RawFacts]:
    """The first n pt_facts rows as RawFacts, each string sliced from arena."""
    from struct import iter_unpack  # the facts' own cost: `import proctree` does not pay for struct

    strings = ffi.buffer(arena)  # sliced per string: no copy of the whole buffer
    out = []
    for (
        pid, status, ppid, tty, have, denied, state, kthread, ruid, euid, suid,
        start, utime, stime, vsize, rss, threads, c_off, c_len, e_off, e_len, w_off, w_len, name,
    ) in iter_unpack(_FACTS_LAYOUT, ffi.buffer(rows, n * FACTS_ROW_SIZE)):  # fmt: skip
        out.append(
            (
                status, pid, ppid, tty, have, denied, state, kthread, ruid, euid, suid,
                start, utime, stime, vsize, rss, threads,
                strings[c_off : c_off + c_len] if have & FACT_CMDLINE else None,
                strings[e_off : e_off + e_len] if have & FACT_EXE else None,
                strings[w_off : w_off + w_len] if have & FACT_CWD else None,
                name.split(b"\0", 1)[0],
            )
        )  # fmt: skip
    return out


# struct pt_facts as the struct module reads it: standard sizes, no padding added (the C layout has none but _pad).
_FACTS_LAYOUT = "=iiiiIIcB2xIIIQQQQQqIIIIII64s"


def facts_one(pid: int, want: int, start_time: int | None = None) -> RawFacts:
    """pid's facts (want: FACT_* bits); NoSuchProcess if it is gone or (start_time given) another process has
    its pid, AccessDenied if its stat is refused, OSError otherwise. pid already validated."""
    row = ffi.new("struct pt_facts *")
    start = ffi.NULL if start_time is None else ffi.new("uint64_t *", start_time)
    cap = 64 * 1024
    while True:
        arena = ffi.new("char[]", cap)
        rc = lib.pt_facts(pid, start, want, row, arena, cap)
        if rc != -errno.ENOBUFS:
            check(rc, pid)
            return _facts_rows(row, 1, arena)[0]
        if cap >= 3 * BLOCK_MAX:
            raise OSError(errno.E2BIG, f"the argv, exe and cwd of pid {pid} are longer than {3 * BLOCK_MAX} bytes")
        cap = min(cap * 4, 3 * BLOCK_MAX)


def _fill_in(rows: list[RawFacts], want: int) -> list[RawFacts]:
    """rows, each whose strings did not fit the shared buffer read again alone, pinned to the start time the
    pass read for it (a -ENOBUFS row keeps its stat fields): a process that exited or was replaced since is
    ROW_GONE, never another process's facts."""
    for i, raw in enumerate(rows):
        if raw[0] == ROW_NO_ROOM:
            pid, start = raw[1], raw[11]
            try:
                rows[i] = facts_one(pid, want, start)
            except NoSuchProcess:
                rows[i] = (ROW_GONE, *raw[1:])
            except AccessDenied:
                rows[i] = (-errno.EACCES, *raw[1:])
            except OSError as exc:
                rows[i] = (-(exc.errno or errno.EIO), *raw[1:])
    return rows


_last_facts_count = 512


def facts_table(want: int) -> list[RawFacts]:
    """Every process's facts in one pass over /proc (those that exit meanwhile left out); a row that could not be
    read keeps its -errno status (AccessDenied ones, say); ROW_NO_ROOM rows are already read again alone."""
    global _last_facts_count
    cap = _last_facts_count + _last_facts_count // 4 + 64
    strings_per_row = _FACTS_STRINGS_PER_ROW if want & (FACT_CMDLINE | FACT_EXE | FACT_CWD) else 0
    while True:
        rows = ffi.new("struct pt_facts[]", cap)
        arena = ffi.new("char[]", max(cap * strings_per_row, 1))
        n = lib.pt_facts_table(want, rows, cap, arena, cap * strings_per_row)
        if n != -errno.ENOBUFS:
            break
        cap *= 4
    check(n)
    _last_facts_count = n
    return _fill_in(_facts_rows(rows, n, arena), want)


def facts_scan(pids: Sequence[int], starts: Sequence[int] | None, want: int) -> list[RawFacts]:
    """The facts of each of pids (each pinned to starts[i], if starts is given) in one C call, a row each in
    order; a row that could not be read keeps its -errno status (ROW_GONE for a process that is gone or was
    replaced). pids already validated."""
    n = len(pids)
    if n == 0:
        return []
    pid_arr = ffi.new("int32_t[]", list(pids))
    start_arr = ffi.NULL if starts is None else ffi.new("uint64_t[]", list(starts))
    rows = ffi.new("struct pt_facts[]", n)
    size = n * _FACTS_STRINGS_PER_ROW if want & (FACT_CMDLINE | FACT_EXE | FACT_CWD) else 0
    arena = ffi.new("char[]", max(size, 1))
    check(lib.pt_facts_scan(pid_arr, start_arr, n, want, rows, arena, size))
    return _fill_in(_facts_rows(rows, n, arena), want)
