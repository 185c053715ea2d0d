"""Leftover proctree cgroups: find them, end what is in them, remove them.

A tree cgroup lives at <owner's cgroup>/proctree-<owner pid>-<owner start>-<pid ns>-<time ns>/<tag or "tree">-<n>-<hex>
(older versions named the parent proctree-<owner pid>-<owner start>, without the namespaces).
Its owner normally removes it; an owner SIGKILLed together with its keeper
leaves it behind, with whatever still runs in it. The reaper decides whether
the owner is gone; this module only reads the hierarchy and acts on the
directories it found, through cgroup.py (which refuses anything that is not
a proctree cgroup inside the cgroup v2 mount).

Must never: decide that an owner is gone (the reaper's job), or touch a
directory that is not a proctree cgroup.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..._teardown.ladder import Ladder
from .. import cgroup as _cgroup
from .. import cgroupworld as _cgroupworld

MAX_DIRS = 20000  # the walk's bound: a hierarchy larger than this is reported, not walked further


@dataclass(frozen=True)
class LeftoverCgroup:
    """One tree cgroup (or an owner's empty parent, path == parent) and what is in it now.

    ns:     the owner's (pid ns, time ns) from the parent's name; None for a
            legacy name, which does not say where its numbers belong
    uid:    the owner of the parent directory (who made it); None if unknown
    hidden: members cgroup.procs lists as 0 (in a pid namespace the reader
            cannot see): such a cgroup is never empty and never ended whole
    """

    path: str
    parent: str  # the proctree-<pid>-<start>[-<pid ns>-<time ns>] directory
    owner: tuple[int, int]
    tag: str | None
    pids: tuple[int, ...]
    ns: tuple[int, int] | None = None
    uid: int | None = None
    hidden: int = 0


def parse_parent_name(name: str) -> tuple[tuple[int, int], tuple[int, int] | None] | None:
    """((owner pid, owner start), (pid ns, time ns) or None for a legacy name), or None if name is not a parent's."""
    parts = name.split("-")
    if len(parts) not in (3, 5) or parts[0] != "proctree" or not all(p.isdigit() for p in parts[1:]):
        return None
    if len(parts[1]) > 10 or any(len(p) > 20 for p in parts[2:]):
        return None
    owner = (int(parts[1]), int(parts[2]))
    return owner, ((int(parts[3]), int(parts[4])) if len(parts) == 5 else None)


def _unpopulated(path: str) -> bool:
    """True only when cgroup.events says nothing runs in the cgroup or below it (a failed read: False)."""
    # One unbuffered read: a walk makes one per leftover parent, and cgroup.events is a few dozen bytes, far
    # under one page, which the kernel hands over whole in the first read.
    try:
        fd = os.open(os.path.join(path, "cgroup.events"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return b"populated 0\n" in os.read(fd, 4096)
    except OSError:
        return False
    finally:
        os.close(fd)


def _tag_of(tree_dir: str) -> str | None:
    head = tree_dir.rsplit("-", 2)[0]
    return None if head == "tree" else head


def find(limit: int = MAX_DIRS) -> tuple[list[LeftoverCgroup], list[str]]:
    """Every proctree cgroup in the hierarchy (live owners' too), and warnings.

    A proctree-<pid>-<start> directory with no process in it or below it
    (cgroup.events says so) is listed once with path == parent and no pids. Returns ([], [why]) where there is
    no cgroup v2 mount.
    """
    mount = _cgroup.find_mount()
    if mount is None:
        return [], []
    found: list[LeftoverCgroup] = []
    warnings: list[str] = []
    stack = [mount]
    seen = 0
    while stack:
        d = stack.pop()
        seen += 1
        if seen > limit:
            warnings.append(f"cgroup hierarchy under {mount} has more than {limit} directories: not all were read")
            break
        try:
            entries = [e for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for e in entries:
            named = parse_parent_name(e.name)
            if named is None:
                stack.append(e.path)
                continue
            owner, ns = named
            # One read says whether anything runs below the parent: most leftovers are empty, and
            # an empty one is listed whole (path == parent), without reading its tree cgroups.
            if _unpopulated(e.path):
                found.append(LeftoverCgroup(e.path, e.path, owner, None, (), ns))
                continue
            try:
                uid: int | None = e.stat(follow_symlinks=False).st_uid
                trees = [t for t in os.scandir(e.path) if t.is_dir(follow_symlinks=False)]
            except OSError:
                continue
            if not trees:
                found.append(LeftoverCgroup(e.path, e.path, owner, None, (), ns, uid))
            for t in trees:
                pids, hidden = _cgroup.members(t.path)
                found.append(LeftoverCgroup(t.path, e.path, owner, _tag_of(t.name), tuple(pids), ns, uid, hidden))
    return found, warnings


def teardown(path: str, grace: float) -> Ladder:
    """A not yet started teardown of every process in the tree cgroup at path (TERM, the grace, cgroup.kill).

    For the teardown engine's blocking driver, beside other teardowns
    (engine.run_blocking_many); its report has root None and mode "cgroup".
    """
    return _cgroupworld.ladder(path, grace)


def remove(leftover: LeftoverCgroup) -> bool:
    """Remove the tree cgroup (and its parent once empty), or an empty parent with the empty cgroups below it.

    True if it is gone. Only empty cgroups can be removed (rmdir fails on one
    that holds a process), so nothing that runs is ever touched.
    """
    if leftover.path == leftover.parent:
        if not _cgroup.is_ours(os.path.join(leftover.parent, "x")):
            return False
        for top, dirs, _ in os.walk(leftover.parent, topdown=False):
            for d in dirs:
                try:
                    os.rmdir(os.path.join(top, d))
                except OSError:
                    pass
        try:
            os.rmdir(leftover.parent)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True
    return bool(_cgroup.remove(leftover.path))
