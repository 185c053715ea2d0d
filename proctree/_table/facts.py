"""Process facts: what a psutil user reads about a process (argv, exe, cwd, create time, status, owner,
threads, memory, CPU times, terminal, kernel thread), read by the core and turned into Facts records.

The core gives the kernel's units (clock ticks since boot, pages, raw bytes); this module converts them the
way psutil does on Linux, so the two agree: create_time is /proc/stat's btime plus the start ticks over
CLK_TCK, rss is pages times the page size, names are decoded like file names, and the user name is the real
uid's, or the uid as a string where no account has it.

Must never: raise for a process that is gone or refused in an iteration (all_facts, facts_of): such a process
is left out, and a refused file leaves its fields None with their names in Facts.denied (macOS's refused
task counters of another user's process read 0, named there too).
"""

from __future__ import annotations

import errno
import os
import sys
from collections import namedtuple
from collections.abc import Iterable, Iterator

from . import binding as _binding
from .model import Proc

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import NamedTuple

    class MemoryInfo(NamedTuple):
        rss: int
        vms: int

    class CpuTimes(NamedTuple):
        user: float
        system: float

    class _FactsFields(NamedTuple):
        pid: int
        ppid: int
        name: str
        status: str
        create_time: float
        start_time: int
        cmdline: list[str] | None
        exe: str | None
        cwd: str | None
        uids: tuple[int, int, int] | None
        username: str | None
        num_threads: int
        rss: int
        vms: int
        cpu_user: float
        cpu_system: float
        terminal: str | None
        kernel_thread: bool
        denied: frozenset[str]

else:
    MemoryInfo = namedtuple("MemoryInfo", "rss vms")
    CpuTimes = namedtuple("CpuTimes", "user system")
    _FactsFields = namedtuple(
        "Facts",
        "pid ppid name status create_time start_time cmdline exe cwd uids username num_threads rss vms "
        "cpu_user cpu_system terminal kernel_thread denied",
    )


class Facts(_FactsFields):
    """What one process was at one moment, as psutil names it: an immutable tuple.

    Always read (one stat file): pid, ppid, name, status, create_time (seconds since the epoch), start_time
    (the identity's opaque ticks, as Proc's), num_threads, rss and vms (bytes), cpu_user and cpu_system
    (seconds), terminal (a /dev path, or None), kernel_thread. Read when asked for (attrs): cmdline, exe, cwd,
    uids (real, effective, saved) and username; None when not asked for, or refused (then named in denied).
    """

    __slots__ = ()

    @property
    def memory_info(self) -> MemoryInfo:
        """(rss, vms) in bytes, as psutil's memory_info() names them."""
        return MemoryInfo(self.rss, self.vms)

    @property
    def cpu_times(self) -> CpuTimes:
        """(user, system) CPU seconds, as psutil's cpu_times() names them."""
        return CpuTimes(self.cpu_user, self.cpu_system)

    @property
    def identity(self) -> tuple[int, int]:
        """(pid, start_time): equal only for the very same process (as Proc.identity)."""
        return (self.pid, self.start_time)


# attrs name -> the core's bit that reads it (the stat ones cost nothing more: stat is always read).
_B = _binding  # short: the table below names a bit per line
ATTR_BITS = {
    "ppid": 0,
    "name": 0,
    "status": 0,
    "create_time": 0,
    "start_time": 0,
    "num_threads": 0,
    "rss": 0,
    "vms": 0,
    "memory_info": 0,
    "cpu_user": 0,
    "cpu_system": 0,
    "cpu_times": 0,
    "terminal": 0,
    "kernel_thread": 0,
    "cmdline": _B.FACT_CMDLINE,
    "exe": _B.FACT_EXE,
    "cwd": _B.FACT_CWD,
    "uids": _B.FACT_UIDS,
    "username": _B.FACT_UIDS,
}
# The core's bit -> the fields a refusal of it leaves None.
_DENIED_NAMES = {
    # macOS refuses another user's task counters (its BSD record is read): they read 0, named here
    _B.FACT_STAT: ("num_threads", "rss", "vms", "memory_info", "cpu_user", "cpu_system", "cpu_times"),
    _B.FACT_CMDLINE: ("cmdline",),
    _B.FACT_EXE: ("exe",),
    _B.FACT_CWD: ("cwd",),
    _B.FACT_UIDS: ("uids", "username"),
}

# psutil's status names (psutil/_pslinux.py PROC_STATUSES), by stat's letter.
STATUS_NAMES = {
    "R": "running",
    "S": "sleeping",
    "D": "disk-sleep",
    "T": "stopped",
    "t": "tracing-stop",
    "Z": "zombie",
    "X": "dead",
    "x": "dead",
    "K": "wake-kill",
    "W": "waking",
    "I": "idle",
    "P": "parked",
}


def want_of(attrs: object) -> int:
    """The core's FACT_* mask for attrs (None: everything), or TypeError/ValueError for bad attrs."""
    if attrs is None:
        return _B.FACT_ALL
    if isinstance(attrs, (str, bytes)) or not isinstance(attrs, Iterable):
        raise TypeError(f"attrs must be a list of fact names, not {type(attrs).__name__}")
    want = _B.FACT_STAT
    for name in attrs:
        if not isinstance(name, str):
            raise TypeError(f"attrs must hold str names, not {type(name).__name__}")
        if name == "pid":
            continue
        bit = ATTR_BITS.get(name)
        if bit is None:
            raise ValueError(f"unknown fact {name!r}; known: {', '.join(sorted(ATTR_BITS))}")
        want |= bit
    return want


class _Units:
    """What converting a batch of rows needs, read once per call: the platform's units (start time and CPU
    time per second, bytes per rss unit, the boot time start times count from), and the user names and
    terminals met so far.

    Linux's core gives clock ticks since boot and pages; macOS's gives microseconds since the epoch,
    nanoseconds of CPU and bytes (csrc/core/facts_macos_row.c).
    """

    def __init__(self, linux: bool | None = None) -> None:
        if _LINUX if linux is None else linux:
            self.start_hz = self.cpu_hz = float(os.sysconf("SC_CLK_TCK"))
            self.rss_unit = os.sysconf("SC_PAGE_SIZE")
            self.boot = boot_time()
        else:
            self.start_hz, self.cpu_hz, self.rss_unit, self.boot = 1e6, 1e9, 1, 0.0
        self.users: dict[int, str] = {}
        self.terminals: dict[int, str] | None = None

    def username(self, uid: int) -> str:
        name = self.users.get(uid)
        if name is None:
            import pwd

            try:
                name = pwd.getpwuid(uid).pw_name
            except KeyError:
                name = str(uid)  # psutil's answer for a uid no account has
            self.users[uid] = name
        return name

    def terminal(self, tty_nr: int) -> str | None:
        if tty_nr == 0:
            return None
        if self.terminals is None:
            self.terminals = terminal_map()
        return self.terminals.get(tty_nr)


_boot_time: float | None = None
_LINUX = sys.platform.startswith("linux")


def boot_time() -> float:
    """The boot time psutil adds to start ticks on Linux: /proc/stat's btime (whole seconds), read once."""
    global _boot_time
    if not _LINUX:  # macOS's rows count from the epoch: nothing there asks for this
        raise OSError(errno.ENOSYS, "the boot time is read on Linux only")
    if _boot_time is None:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    _boot_time = float(line.split()[1])
                    break
            else:
                raise OSError("no btime line in /proc/stat")
    return _boot_time


def terminal_map() -> dict[int, str]:
    """{device number: /dev path} of the terminals in /dev and /dev/pts, as psutil finds them."""
    out: dict[int, str] = {}
    for folder, keep in (("/dev", lambda n: n.startswith("tty")), ("/dev/pts", lambda n: True)):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if keep(name):
                path = os.path.join(folder, name)
                try:
                    out[os.stat(path).st_rdev] = path
                except OSError:
                    pass
    return out


def _link(raw: bytes | None) -> str | None:
    """A readlink answer as psutil gives it: decoded, and " (deleted)" dropped when no such path exists."""
    if raw is None:
        return None
    path = os.fsdecode(raw)
    if path.endswith(" (deleted)") and not os.path.exists(path):
        path = path[:-10]
    return path


def to_facts(raw: _binding.RawFacts, units: _Units) -> Facts:
    """One core row (status 0) as Facts."""
    (_, pid, ppid, tty, have, denied_bits, state, kthread, ruid, euid, suid,
     start, utime, stime, vsize, rss, threads, cmdline, exe, cwd, name) = raw  # fmt: skip
    letter = state.decode("ascii", "replace")
    uids = (ruid, euid, suid) if have & _B.FACT_UIDS else None
    denied: frozenset[str] = frozenset()
    if denied_bits:
        denied = frozenset(n for bit, names in _DENIED_NAMES.items() if denied_bits & bit for n in names)
    return Facts(
        pid,
        ppid,
        os.fsdecode(name),
        STATUS_NAMES.get(letter, letter),
        units.boot + start / units.start_hz,
        start,
        None if cmdline is None else _argv(cmdline),
        _link(exe),
        _link(cwd),
        uids,
        None if uids is None else units.username(ruid),
        threads,
        rss * units.rss_unit,
        vsize,
        utime / units.cpu_hz,
        stime / units.cpu_hz,
        units.terminal(tty),
        bool(kthread),
        denied,
    )


def _argv(block: bytes) -> list[str]:
    from .model import cmdline_from_block

    return cmdline_from_block(block)


# Row statuses that say nothing about the process but that this one ran short (of descriptors, of memory): an
# iteration that left such rows out would pass off "no facts read" as "no such process".
_SHORT = frozenset((-errno.EMFILE, -errno.ENFILE, -errno.ENOMEM))


def raise_if_short(raw: _binding.RawFacts) -> None:
    """OSError if the core could not read this row for want of descriptors or memory (status -EMFILE, ...)."""
    if raw[0] in _SHORT:
        err = -raw[0]
        raise OSError(err, f"process facts of pid {raw[1]}: {os.strerror(err)}")


def _readable(rows: list[_binding.RawFacts], units: _Units) -> Iterator[Facts]:
    """The rows read whole, as Facts (the callers take them all: a raise drops the rows already made)."""
    for raw in rows:
        if raw[0] == 0:
            yield to_facts(raw, units)
        else:
            raise_if_short(raw)


def facts(pid: int, want: int) -> Facts:
    """pid's facts (pid validated); NoSuchProcess, AccessDenied (its stat refused) or OSError."""
    return to_facts(_binding.facts_one(pid, want), _Units())


def all_facts(want: int) -> list[Facts]:
    """Every process's facts, in pid order of /proc; gone and unreadable processes left out."""
    return list(_readable(_binding.facts_table(want), _Units()))


def facts_of(procs: list[Proc], want: int) -> list[Facts]:
    """The facts of procs still there as the same processes (pid and start time), in their order."""
    rows = _binding.facts_scan([p.pid for p in procs], [p.start_time for p in procs], want)
    return list(_readable(rows, _Units()))
