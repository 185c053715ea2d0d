"""How a leaked process is named in a report, and whether it still runs (read afresh: names after exec)."""

from __future__ import annotations

import os
import time

import proctree

Identity = tuple[int, int]


def identity(p: proctree.Proc) -> Identity:
    return (p.pid, p.start_time)


def fresh(p: proctree.Proc) -> proctree.Proc | None:
    """p read again (its name and state now: it may have exec'd since), or None once it is gone or a zombie."""
    try:
        now = proctree.proc(p.pid)
    except proctree.NoSuchProcess:
        return None
    if now.start_time != p.start_time or now.is_zombie:
        return None
    return now


def settled(procs: list[proctree.Proc], seconds: float) -> list[proctree.Proc]:
    """Those of procs still running after up to seconds, read afresh (a process the test just killed is
    exiting; a zombie has exited, and its owner reaps it)."""
    deadline = time.monotonic() + seconds
    while True:
        procs = [q for q in (fresh(p) for p in procs) if q is not None]
        if not procs or time.monotonic() >= deadline:
            return procs
        time.sleep(0.01)


def describe(p: proctree.Proc, who: str) -> str:
    """One report line: pid, name and command line as they are now (after any exec), age, and who left it."""
    q = fresh(p) or p
    try:
        argv = proctree.cmdline(q.pid)
    except (proctree.Error, OSError):
        argv = []
    line = " ".join(argv) if argv else f"[{q.name}]"
    if len(line) > 200:
        line = line[:197] + "..."
    return f"pid {q.pid} ({q.name}), running {_age(q)}: {line!r}, left by {who}"


def _age(p: proctree.Proc) -> str:
    try:
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        seconds = max(0.0, up - p.start_time / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return "?"
    return f"{seconds:.1f} s"
