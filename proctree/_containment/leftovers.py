"""Leftover proctree cgroups: find them, end what is in them, remove them.

A tree cgroup lives at <owner's cgroup>/proctree-<owner pid>-<owner start>/<tag or "tree">-<n>-<hex>.
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

from .._teardown.report import TeardownReport
from . import cgroup as _cgroup
from . import owner as _owner

MAX_DIRS = 20000  # the walk's bound: a hierarchy larger than this is reported, not walked further


@dataclass(frozen=True)
class LeftoverCgroup:
    """One tree cgroup (or an owner's empty parent, path == parent) and what is in it now."""

    path: str
    parent: str  # the proctree-<pid>-<start> directory
    owner: tuple[int, int]
    tag: str | None
    pids: tuple[int, ...]


def _owner_of(name: str) -> tuple[int, int] | None:
    parts = name.split("-")
    if len(parts) != 3 or parts[0] != "proctree" or not (parts[1].isdigit() and parts[2].isdigit()):
        return None
    if len(parts[1]) > 10 or len(parts[2]) > 20:
        return None
    return int(parts[1]), int(parts[2])


def _tag_of(tree_dir: str) -> str | None:
    head = tree_dir.rsplit("-", 2)[0]
    return None if head == "tree" else head


def find(limit: int = MAX_DIRS) -> tuple[list[LeftoverCgroup], list[str]]:
    """Every proctree cgroup in the hierarchy (live owners' too), and warnings.

    A proctree-<pid>-<start> directory with no tree cgroup below it is listed
    once with path == parent and no pids. Returns ([], [why]) where there is
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
            owner = _owner_of(e.name)
            if owner is None:
                stack.append(e.path)
                continue
            try:
                trees = [t for t in os.scandir(e.path) if t.is_dir(follow_symlinks=False)]
            except OSError:
                continue
            if not trees:
                found.append(LeftoverCgroup(e.path, e.path, owner, None, ()))
            for t in trees:
                found.append(LeftoverCgroup(t.path, e.path, owner, _tag_of(t.name), tuple(_cgroup.pids(t.path))))
    return found, warnings


def end(path: str, grace: float, stop_fd: int | None = None) -> TeardownReport:
    """End every process in the tree cgroup at path (TERM, the grace, cgroup.kill) and return the report.

    stop_fd: once readable, the rest of the grace is skipped (SIGKILL at once).
    """
    return _owner.end_cgroup(path, grace, stop_fd=stop_fd)


def remove(leftover: LeftoverCgroup) -> bool:
    """Remove the tree cgroup (and its parent once empty), or an empty parent. True if it is gone."""
    if leftover.path == leftover.parent:
        try:
            os.rmdir(leftover.parent)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True
    return bool(_cgroup.remove(leftover.path))
