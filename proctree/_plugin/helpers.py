"""Processes that are never a test's leak, by identity: helpers that live as long as pytest does, whichever
test, fixture, conftest or plugin first needed them, and pytest-xdist's workers as the controller sees them.

- multiprocessing's per-interpreter helpers: the resource tracker and the forkserver;
- proctree.Popen's holding tree (its keeper and ``proctree-enter hold``), started by a process's first
  proctree.Popen: popenhold.held_pids() names it, in this process only;
- the containment's own watchdog is never a member (Containment excludes it);
- pytest-xdist's workers: the processes this controller itself started through execnet (a gateway's Popen,
  our own child), never recognized by their command line, which any process could carry.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

import proctree

from .describe import Identity, identity


def helper_pids() -> set[int]:
    """Pids of this process's long-lived helpers (see the module's docstring)."""
    # Imported here, not at the top: the plugin stays inert (and cheap) until a run enables it.
    from proctree._containment.popenhold import held_pids as popen_holder_pids

    out = set(popen_holder_pids())
    rt = sys.modules.get("multiprocessing.resource_tracker")
    pid = getattr(getattr(rt, "_resource_tracker", None), "_pid", None)
    if isinstance(pid, int):
        out.add(pid)
    fs = sys.modules.get("multiprocessing.forkserver")
    pid = getattr(getattr(fs, "_forkserver", None), "_forkserver_pid", None)
    if isinstance(pid, int):
        out.add(pid)
    return out


def with_descendants(roots: set[Identity], members: Iterable[proctree.Proc]) -> set[Identity]:
    """roots and every member below one of them (by the members' parent links)."""
    if not roots:
        return set()
    members = list(members)
    by_pid = {p.pid: p for p in members}
    out = set(roots)
    for p in members:
        chain: list[Identity] = []
        q: proctree.Proc | None = p
        for _ in range(64):
            if q is None:
                break
            if identity(q) in out:
                out.update(chain)
                break
            chain.append(identity(q))
            q = by_pid.get(q.ppid)
    return out


def not_counted(members: list[proctree.Proc], also: set[Identity]) -> set[Identity]:
    """Identities among members that no check counts: the helpers, also (xdist's workers), and what they started."""
    pids = helper_pids()
    roots = {identity(p) for p in members if p.pid in pids} | also
    return with_descendants(roots, members)


def gateway_identity(gateway: Any) -> Identity | None:
    """The identity of the worker process this controller started for an execnet gateway, or None (a remote
    gateway, or one whose process is not our own child)."""
    popen = getattr(getattr(gateway, "_io", None), "popen", None)
    pid = getattr(popen, "pid", None)
    if getattr(popen, "returncode", None) is not None:
        return None
    if not isinstance(pid, int) and getattr(getattr(gateway, "spec", None), "popen", False):
        try:  # the worker's own word for its pid (one round trip, once a gateway), checked by lineage below
            pid = gateway._rinfo().pid
        except Exception:  # noqa: BLE001 - a gateway that cannot answer is simply not known
            return None
    if not isinstance(pid, int):
        return None
    try:
        p = proctree.proc(pid)
    except proctree.NoSuchProcess:
        return None
    if p.ppid != os.getpid():
        return None
    return identity(p)
