"""Processes a live object still holds at the session's end: listed for the late check after pytest exits.

A library may end its processes only as the interpreter exits, in an atexit
handler (execnet's default group ends its gateways so). pytest's session end
comes before that, so such processes are not leaks yet there: the plugin
spares them, and the run's subreaper (reaper.py) checks them once pytest's
interpreter has exited, after every atexit handler, wherever it was
registered. Whatever still runs then is a leak, reported on stderr and ended
there. This module is pytest's side: the list, written to the file that
PROCTREE_PYTEST_LATE names (the subreaper made it). An xdist worker hands
its list to the controller (its workeroutput), which writes them all.

Without the subreaper above pytest (pytest.main() in a program, a debugger,
proctree_subreaper = false, macOS) nothing outlives pytest to check them:
they are reported at the session's end, as before.

Must never: end anything (the guard ends leaks; the subreaper ends what is
still running after the exit).
"""

from __future__ import annotations

import json
import os
from typing import Any

import proctree

from .reaper import LATE_ENV
from .settings import Settings

Entry = tuple[int, int, str]  # (pid, start time, its report line)


def path() -> str | None:
    """The file the run's subreaper reads once pytest has exited, or None (no subreaper above this pytest)."""
    return os.environ.get(LATE_ENV) or None


def entry(p: proctree.Proc, line: str) -> Entry:
    return (p.pid, p.start_time, line)


def from_worker(value: Any) -> list[Entry]:
    """A worker's list as it came through execnet (lists, not tuples); malformed items are dropped."""
    out: list[Entry] = []
    for item in value or ():
        try:
            pid, start, line = item
            out.append((int(pid), int(start), str(line)))
        except (TypeError, ValueError):
            continue
    return out


def write(where: str, entries: list[Entry], settings: Settings) -> bool:
    """The list, with what the check needs (the mode, the settle, the grace), for the subreaper; False if it
    could not be written."""
    listed = {
        "mode": settings.mode,
        "settle": settings.settle,
        "grace": settings.grace,
        "procs": [list(e) for e in entries],
    }
    try:
        with open(where, "w", encoding="utf-8") as f:
            json.dump(listed, f)
    except OSError:
        return False
    return True
