"""The only importer of proctree._core (the cffi module).

Turns the core's -errno returns into exceptions and its rows into Proc
records. Nothing here reads ffi.errno: the C functions return the error.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable

from .. import _core
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


# ---------------------------------------------------------------------------
# Interim: a pure-Python env_scan with the C core's contract, until the core's
# own (branch env) lands and replaces it. Linux only (/proc/<pid>/environ).

ENV_SCAN_MAX = 1 << 20  # bytes read per process at most

if TYPE_CHECKING:
    from collections.abc import Sequence


def env_scan(key: str, pids: Sequence[int]) -> dict[int, bytes | str]:
    """For every pid: the value bytes of environment variable key when present, else
    "absent", "gone", "denied", "too-long" or "unreadable"."""
    if not isinstance(key, str) or not key or "=" in key or "\0" in key:
        raise ValueError(f"not an environment variable name: {key!r}")
    needle = os.fsencode(key) + b"="
    out: dict[int, bytes | str] = {}
    for pid in pids:
        try:
            with open(f"/proc/{int(pid)}/environ", "rb") as f:
                data = f.read(ENV_SCAN_MAX + 1)
        except (FileNotFoundError, ProcessLookupError):
            out[pid] = "gone"
            continue
        except PermissionError:
            out[pid] = "denied"
            continue
        except OSError:
            out[pid] = "unreadable"
            continue
        if len(data) > ENV_SCAN_MAX:
            out[pid] = "too-long"
            continue
        value: bytes | str = "absent"
        for entry in data.split(b"\0"):
            if entry.startswith(needle):
                value = entry[len(needle) :]
                break
        out[pid] = value
    return out
