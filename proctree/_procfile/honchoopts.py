"""honcho's `start` options that need the plan or a folder: `-q NAMES`, `-d DIR`, and `PROCFILE`.

`-q web,worker` (honcho's --quiet) hides those entries' output; their
started/exited lines still show, as in honcho. `-d DIR` (honcho's
--app-root) is the folder a relative Procfile and .env path is read from.
Without `-f`, `PROCFILE` in the .env files or the environment names the
Procfile, as honcho reads it.

Pure but for reading the .env files to find PROCFILE. Must never: start
anything, or accept a name that runs nothing (a typo would hide nothing,
silently).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from .dotenv import read_dotenv
from .procfile import ProcfileError

DEFAULT_PROCFILE = "Procfile"


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


def choose_procfile(
    given: str | None,
    env_files: Sequence[str] | None,
    app_root: str | None,
    environ: Mapping[str, str],
    *,
    strict: bool = True,
) -> tuple[str, list[str] | None]:
    """The Procfile to read and the .env files to read with it (None: load_procfile's default, beside it).

    given (-f) wins; else PROCFILE from the .env files (env_files, or `.env`
    in app_root if there is one), else from environ, else ./Procfile; every
    path relative to app_root. When PROCFILE chose the Procfile, the .env
    read is the one in app_root (honcho's), not the one beside the Procfile.
    Raises ProcfileError for a .env file that cannot be read; not strict, a
    missing file or a line that is not an assignment is passed over here
    (load_procfile says so, reading them again).
    """
    named = None if env_files is None else [under_app_root(f, app_root) for f in env_files]
    if given is not None:
        return under_app_root(given, app_root), named
    if named is None:
        default = under_app_root(".env", app_root)
        files = [default] if os.path.isfile(default) else []
    else:
        files = named
    values: dict[str, str] = {}
    for path in files:
        if not strict and not os.path.isfile(path):
            continue
        values.update(read_dotenv(path, base=environ, known=values, skipped=None if strict else []))
    chosen = values.get("PROCFILE") or environ.get("PROCFILE") or ""
    if not chosen:
        return under_app_root(DEFAULT_PROCFILE, app_root), named
    return under_app_root(chosen, app_root), files
