"""A set of processes' summed usage: how many there are, their memory and their CPU times, as one Usage record.

The sum is taken over one pass of the core, the one facts_of() makes with no attrs (each process's stat file
only, through its own /proc/<pid> directory, pinned to its start time), so a process gone or whose pid was
reused since it was listed is left out of every field at once: counted nowhere, never half-counted.
Usage.of_facts() sums Facts a caller already holds, by the same rules.

Zombies count as gone, as everywhere in proctree (they hold no memory): one that became a zombie since it was
listed is left out too, by its stat's state (a whole zombie has one thread left, the leader's record; a process
whose leader exited but whose other threads run has more and stays counted).

Must never: raise for a member that vanished mid-read; count a process twice (a set's duplicates are one).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable

from .model import Proc

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import NamedTuple

    from .facts import Facts

    class _UsageFields(NamedTuple):
        processes: int
        rss: int
        vms: int
        cpu_user: float
        cpu_system: float

else:
    _UsageFields = namedtuple("Usage", "processes rss vms cpu_user cpu_system")


class Usage(_UsageFields):
    """A set of processes' summed usage at one moment: an immutable tuple.

    processes: how many were read (the ones gone mid-read are not); rss and vms: bytes, summed (a page two
    members share counts twice, as psutil's sums and `ps` columns count it); cpu_user and cpu_system: CPU
    seconds each member has used so far, summed (a member that exited took its seconds with it).
    """

    __slots__ = ()

    @property
    def cpu_total(self) -> float:
        """cpu_user + cpu_system, seconds."""
        return self.cpu_user + self.cpu_system

    @classmethod
    def of_facts(cls, facts: Iterable[Facts]) -> Usage:
        """The Usage of these Facts (read once, by the caller), each process (by identity) counted once and
        zombies not at all. Pure: no system calls."""
        return summed(facts)

    def to_dict(self) -> dict[str, float]:
        """A JSON-ready dict of the five fields and cpu_total (the form `proctree up --json` prints)."""
        return {**self._asdict(), "cpu_total": self.cpu_total}


EMPTY = Usage(0, 0, 0, 0.0, 0.0)


def summed(facts: Iterable[Facts]) -> Usage:
    """The Usage of these facts, each process (by identity) counted once, zombies not. Pure: no system calls."""
    seen: set[tuple[int, int]] = set()
    rss = vms = 0
    user = system = 0.0
    for f in facts:
        key = (f.pid, f.start_time)
        if key in seen or _whole_zombie(f.status == "zombie", f.num_threads):
            continue
        seen.add(key)
        rss += f.rss
        vms += f.vms
        user += f.cpu_user
        system += f.cpu_system
    return Usage(len(seen), rss, vms, user, system)


def _whole_zombie(zombie: bool, threads: int) -> bool:
    """Whether a process whose stat reads zombie is gone: one thread left (the leader's record), not a leader
    that exited while other threads run."""
    return zombie and threads <= 1


def usage_of(procs: list[Proc]) -> Usage:
    """procs' summed usage, read now in one pass; those gone (or whose pid was reused) are left out.

    Summed from the core's rows in its units (pages, clock ticks) and converted once at the end: the numbers
    summed() gives over facts_of()'s records, without building a record per member (about a fifth of the
    cost over the kernel's, benchmarks/bench_usage.py).
    """
    from . import binding as _binding

    if not procs:
        return EMPTY
    from .facts import _Units, raise_if_short

    rows = _binding.facts_scan([p.pid for p in procs], [p.start_time for p in procs], _binding.FACT_STAT)
    seen: set[tuple[int, int]] = set()
    pages = vms = user_ticks = system_ticks = 0
    for (status, pid, _, _, _, _, state, _, _, _, _,
         start, utime, stime, vsize, rss, threads, *_) in rows:  # fmt: skip
        key = (pid, start)
        if status != 0:
            raise_if_short((status, pid))  # out of descriptors or memory is an error, not "gone"
            continue
        if key in seen or _whole_zombie(state == b"Z", threads):
            continue
        seen.add(key)
        pages += rss
        vms += vsize
        user_ticks += utime
        system_ticks += stime
    units = _Units()
    return Usage(len(seen), pages * units.rss_unit, vms, user_ticks / units.cpu_hz, system_ticks / units.cpu_hz)
