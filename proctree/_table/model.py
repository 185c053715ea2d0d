"""Process records, snapshot tree walks, and environment/argv decoding: pure Python, no system calls.

A Snapshot is the process table at one moment. It is built either from rows
the C core read (lazily turned into Proc records, so a snapshot of 10,000
processes stays small) or from Proc records given directly (tests, tools).
"""

from __future__ import annotations

import os
from _bisect import bisect_left  # bisect.py only re-exports it, at an import's cost
from collections import deque, namedtuple
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from .._errors import NoSuchProcess

# typing costs ~3 ms of every `import proctree`: only type checkers read it
# (they treat a name TYPE_CHECKING as true, whatever it is bound to).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple

# Linux's one-letter states; macOS states are mapped onto these by the core.
STATES = frozenset("RSDZTtXIWPKw")


if TYPE_CHECKING:

    class _ProcFields(NamedTuple):
        pid: int
        ppid: int
        pgid: int
        sid: int
        uid: int
        state: str
        start_time: int
        name: str

else:
    _ProcFields = namedtuple("Proc", "pid ppid pgid sid uid state start_time name")


class Proc(_ProcFields):
    """One process at one moment: pid, ppid, pgid, sid, uid, state, start_time, name.

    An immutable tuple. (pid, start_time) is its identity. (collections.namedtuple
    at run time, not typing.NamedTuple: typing costs import time.)
    """

    __slots__ = ()

    @property
    def is_zombie(self) -> bool:
        """True for a process that exited and waits to be reaped (or is being)."""
        return self.state in ("Z", "X")

    @property
    def identity(self) -> tuple[int, int]:
        """(pid, start_time): equal only for the very same process."""
        return (self.pid, self.start_time)


class _NotInSnapshot(NoSuchProcess, KeyError):
    """snap[pid] for a pid the snapshot does not hold: NoSuchProcess as documented, and a KeyError
    as a Mapping's lookup must raise (so Mapping.get, `except KeyError` and dict-like code work)."""


def _check_key(pid: object) -> int:
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise TypeError(f"pid must be an int, not {type(pid).__name__}")
    if pid < 0:
        raise ValueError(f"pid must be >= 0, got {pid}")
    return pid


class Snapshot(Mapping[int, Proc]):
    """An immutable Mapping[int, Proc] of every process visible at one moment.

    Snapshot(procs) builds one from Proc records (pids must be unique).
    Tree queries accept 0 as the parent of the table's roots (init, kthreadd).
    """

    __slots__ = ("_pids", "_ppids", "_row_at", "_kids")

    _pids: list[int]
    _ppids: Sequence[int]
    _row_at: Callable[[int], Proc]
    _kids: dict[int, list[int]] | None

    def __init__(self, procs: Iterable[Proc] = ()) -> None:
        procs = sorted(procs, key=lambda p: p.pid)
        pids = [p.pid for p in procs]
        for a, b in zip(pids, pids[1:]):
            if a == b:
                raise ValueError(f"pid {a} appears twice")
        self._init(pids, [p.ppid for p in procs], procs.__getitem__)

    def __reduce__(self):
        # A live snapshot reads its rows from C memory through a memoryview and a
        # closure, neither of which pickles: travel as the Proc records instead.
        return (_snapshot_of, (type(self), tuple(self.values())))

    @classmethod
    def _from_rows(cls, pids: list[int], ppids: Sequence[int], row_at: Callable[[int], Proc]) -> Snapshot:
        """For the binding: pids ascending; ppids a parallel sequence; row_at(i) -> Proc."""
        self = cls.__new__(cls)
        self._init(pids, ppids, row_at)
        return self

    def _init(self, pids: list[int], ppids: Sequence[int], row_at: Callable[[int], Proc]) -> None:
        self._pids = pids
        self._ppids = ppids
        self._row_at = row_at
        self._kids = None

    # Mapping protocol
    def _find(self, pid: int) -> int:
        i = bisect_left(self._pids, pid)
        if i < len(self._pids) and self._pids[i] == pid:
            return i
        return -1

    def __getitem__(self, pid: int) -> Proc:
        if not isinstance(pid, int) or isinstance(pid, bool):
            raise KeyError(pid)  # not a pid at all: a plain Mapping miss
        i = self._find(pid)
        if i < 0:
            raise _NotInSnapshot(pid, msg="process not in this snapshot")
        return self._row_at(i)

    def __contains__(self, pid: object) -> bool:
        return isinstance(pid, int) and not isinstance(pid, bool) and self._find(pid) >= 0

    def __iter__(self) -> Iterator[int]:
        return iter(self._pids)

    def __len__(self) -> int:
        return len(self._pids)

    def __repr__(self) -> str:
        return f"<proctree.Snapshot of {len(self)} processes>"

    def procs(self) -> list[Proc]:
        """Every Proc, in pid order: what list(values()) gives, without a lookup per process."""
        row_at = self._row_at
        return [row_at(i) for i in range(len(self._pids))]

    # Tree walks
    def _children_index(self) -> dict[int, list[int]]:
        if self._kids is None:
            kids: dict[int, list[int]] = {}
            for pid, ppid in zip(self._pids, self._ppids):
                kids.setdefault(ppid, []).append(pid)
            self._kids = kids
        return self._kids

    def _require(self, pid: int) -> None:
        _check_key(pid)
        if pid != 0 and pid not in self:
            raise NoSuchProcess(pid, msg="process not in this snapshot")

    def child_pids(self, pid: int) -> list[int]:
        """Pids whose parent is pid, ascending."""
        self._require(pid)
        return [c for c in self._children_index().get(pid, ()) if c != pid]

    def children(self, pid: int) -> list[Proc]:
        """Direct children of pid, as Proc records in pid order."""
        return [self[c] for c in self.child_pids(pid)]

    def descendant_pids(self, pid: int) -> list[int]:
        """Pids below pid, breadth-first, pid itself excluded; safe against cycles."""
        self._require(pid)
        kids = self._children_index()
        seen = {pid}
        out: list[int] = []
        queue = deque([pid])
        while queue:
            for c in kids.get(queue.popleft(), ()):
                if c not in seen:
                    seen.add(c)
                    out.append(c)
                    queue.append(c)
        return out

    def descendants(self, pid: int) -> list[Proc]:
        """Every process below pid, breadth-first, as Proc records; pid itself excluded."""
        return [self[c] for c in self.descendant_pids(pid)]

    def ancestors(self, pid: int) -> list[Proc]:
        """pid's parent, its parent, and so on up to the table's root; stops at a gap or cycle."""
        self._require(pid)
        if pid == 0:
            return []
        out: list[Proc] = []
        seen = {pid}
        cur = self[pid].ppid
        while cur not in seen and cur in self:
            seen.add(cur)
            p = self[cur]
            out.append(p)
            cur = p.ppid
        return out


def _snapshot_of(cls: type[Snapshot], procs: Iterable[Proc]) -> Snapshot:
    """Rebuild a pickled or copied Snapshot (of cls, a subclass perhaps) from its Proc records."""
    self = cls.__new__(cls)
    Snapshot.__init__(self, procs)
    return self


def proc_list(procs: Iterable[Proc], one_proc_hint: str) -> list[Proc]:
    """procs as a list, or TypeError: for the calls that take many Proc records (one_proc_hint: what to pass instead of one)."""
    if isinstance(procs, Proc):
        raise TypeError(f"procs must be an iterable of Proc, not one Proc ({one_proc_hint})")
    listed = list(procs)
    for p in listed:
        if not isinstance(p, Proc):
            raise TypeError(f"procs must hold Proc records, not {type(p).__name__}")
    return listed


def environ_from_block(block: bytes) -> dict[str, str]:
    """An environment block (NUL-separated NAME=value entries) as a dict.

    Decoded like file names (os.fsdecode: undecodable bytes survive as
    surrogate escapes). Entries without '=' are skipped; the value runs from
    the first '=' on; the first entry with a name wins, as the core's search
    and getenv(3) read it. A last entry without its NUL still counts.
    """
    out: dict[str, str] = {}
    for entry in block.split(b"\0"):
        name, eq, value = entry.partition(b"=")
        if eq:
            out.setdefault(os.fsdecode(name), os.fsdecode(value))
    return out


def cmdline_from_block(block: bytes) -> list[str]:
    """An argv block (NUL-terminated strings) as a list, decoded like file names.

    Empty strings are kept; a last string without its NUL (a process that
    rewrote its argv area) still counts. b"" (a zombie, a kernel thread) is [].
    """
    if not block:
        return []
    parts = block.split(b"\0")
    if block.endswith(b"\0"):
        parts.pop()
    return [os.fsdecode(p) for p in parts]
