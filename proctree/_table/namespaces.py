"""Which pid and time namespaces a process lives in (Linux), so that pids and start times can be compared.

A pid is a number in one pid namespace, and a start time (Linux: clock ticks
since boot) is shifted by the reader's time namespace: a PROCTREE_OWNER
marker, a cgroup name or a receipt written inside a container names its owner
in the container's numbers. Whoever compares them with its own table must
first check that both sides share both namespaces. Elsewhere (macOS) there
are no such namespaces: every process shares the caller's.

Must never: guess. An unreadable namespace is None ("unknown"), never "same".
"""

from __future__ import annotations

import os
import sys

_LINUX = sys.platform.startswith("linux")
Namespaces = tuple[int, int]  # (pid namespace inode, time namespace inode or 0 where the kernel has none)


def of(pid: int | str) -> Namespaces | None:
    """(pid ns, time ns) of pid ("self" for the caller); None when they cannot be read (gone, denied)."""
    if not _LINUX:
        return (0, 0)
    try:
        pidns = os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None
    try:
        timens = os.stat(f"/proc/{pid}/ns/time").st_ino
    except FileNotFoundError:
        timens = 0  # a kernel before 5.6: no time namespaces, every reader sees the same clock
    except OSError:
        return None
    return (pidns, timens)


# The inode numbers the kernel gives the initial pid and time namespaces (include/linux/proc_ns.h).
INITIAL_PID_NS = 0xEFFFFFFC
INITIAL_TIME_NS = 0xEFFFFFFA


def is_initial(ns: Namespaces | None) -> bool:
    """True for the initial pid and time namespaces (a kernel without time namespaces: 0), and everywhere off Linux.

    Only there is no pid namespace above the reader: a process in it cannot
    have been started by an owner whose numbers are another namespace's.
    """
    if not _LINUX:
        return True
    return ns is not None and ns[0] == INITIAL_PID_NS and ns[1] in (0, INITIAL_TIME_NS)


def dead_pid_namespaces(wanted: set[int], pids) -> frozenset[int]:
    """Of the pid namespace inodes in `wanted` (never the reader's own), those no process in `pids` (a snapshot's,
    in the initial pid namespace, where every process is listed) lives in; empty when any one's namespace cannot
    be read.

    A namespace with no process left is dead for good: once its init is gone the kernel creates no process in it
    again (and one whose init never ran named nothing). Its init, if alive, was alive when the snapshot listed
    the pids, so it is among them: one pass over them proves the absence. An inode number the kernel gave to a
    new namespace since makes that one look alive: never the other way.
    """
    if not _LINUX or not wanted:
        return frozenset()
    left = set(wanted)
    for pid in pids:
        if pid == 1:
            continue  # the reader's namespace's own init (which a sandbox may not let even root read)
        try:
            ino = os.stat(f"/proc/{pid}/ns/pid").st_ino
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended: it lives in no namespace
        except OSError:
            return frozenset()  # denied: that process could be in one of them
        left.discard(ino)
        if not left:
            break
    return frozenset(left)
