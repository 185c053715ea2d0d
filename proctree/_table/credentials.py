"""Whose authority a process runs with: its real, effective and saved uid, read on demand.

The reaper compares them with the kernel's kill(2) rule so that evidence
never lends a process more power than its carrier had. Linux reads the
``Uid:`` line of /proc/<pid>/status; elsewhere (macOS) the table's uid (the
effective one) stands for all three.

Must never: guess. A process whose uids cannot be read is missing from the
answer ("unknown"), never "same as its parent".
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping

from .model import Proc

_LINUX = sys.platform.startswith("linux")
Creds = tuple[int, int, int]  # (real, effective, saved) uid


def read(pid: int) -> Creds | None:
    """(real, effective, saved) uid of pid (Linux), or None when it cannot be read (gone, no /proc)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            data = f.read(8192)
    except OSError:
        return None
    for line in data.split(b"\n"):
        if line.startswith(b"Uid:"):
            fields = line[4:].split()
            if len(fields) < 3:
                return None
            try:
                return int(fields[0]), int(fields[1]), int(fields[2])
            except ValueError:
                return None
    return None


class Lazy(Mapping[int, Creds]):
    """pid -> Creds for the processes of one table, each read the first time it is asked for.

    Only the few processes the reaper considers are read, not the whole table.
    A pid whose uids cannot be read (or that is not in the table) is absent.
    """

    def __init__(self, procs: Mapping[int, Proc]) -> None:
        self._procs = procs
        self._cache: dict[int, Creds | None] = {}

    def __getitem__(self, pid: int) -> Creds:
        if pid not in self._cache:
            p = self._procs.get(pid)
            if p is None:
                self._cache[pid] = None
            elif _LINUX:
                self._cache[pid] = read(pid)
            else:
                self._cache[pid] = (p.uid, p.uid, p.uid)
        got = self._cache[pid]
        if got is None:
            raise KeyError(pid)
        return got

    def __iter__(self) -> Iterator[int]:
        return iter(self._procs)

    def __len__(self) -> int:
        return len(self._procs)
