"""honcho's `start` options that need the plan or a folder: `-q NAMES` and `-d DIR`.

`-q web,worker` (honcho's --quiet) hides those entries' output; their
started/exited lines still show, as in honcho. `-d DIR` (honcho's
--app-root) is the folder a relative Procfile and .env path is read from.

Pure: names and paths in, names and paths out. Must never: read a file, or
accept a name that runs nothing (a typo would hide nothing, silently).
"""

from __future__ import annotations

import os
from typing import Any

from .procfile import ProcfileError


def hidden_instances(text: str, plan: Any) -> frozenset[str]:
    """The instance names (web.1, web.2) whose output `-q text` hides.

    text: honcho's `-q`, entry names separated by commas (an instance name,
    web.2, hides that instance only). Raises ProcfileError (source "-q") for
    an empty name or a name that is neither an entry nor an instance of the plan.
    """
    names = [n.strip() for n in text.split(",")]
    if any(not n for n in names):
        raise ProcfileError(f"an empty name in {text!r} (entry names, separated by commas)", source="-q")
    entries = {e.name for e in plan.entries}
    instances = {s.name for s in plan.services}
    unknown = [n for n in names if n not in entries and n not in instances]
    if unknown:
        raise ProcfileError(
            f"{', '.join(map(repr, unknown))}: not an entry of the Procfile (entries: {', '.join(sorted(entries))})",
            source="-q",
        )
    wanted = set(names)
    return frozenset(s.name for s in plan.services if s.entry in wanted or s.name in wanted)


def under_app_root(path: str, app_root: str | None) -> str:
    """path as honcho's -d reads it: relative to app_root (an absolute path stays as it is)."""
    return path if app_root is None else os.path.join(app_root, path)
