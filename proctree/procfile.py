"""Procfile projects in a program: what `proctree up` does with a Procfile and .env files, as public names.

    import proctree
    from proctree import procfile

    plan = procfile.load(app_root="myapp", scale="web=2")   # the files as honcho picks them
    with proctree.SyncSupervisor() as sup:
        sup.start_all(procfile.service_specs(plan))
        rule = procfile.ExitRule(plan)                        # foreman's: one entry's end stops the rest

- load(): pick the Procfile and .env files as honcho does (-f, -e, -d, PROCFILE) and read them into a
  ProcfilePlan (proctree.load_procfile reads a named Procfile, the .env beside it by default);
- read_env_files(): .env files as `proctree up -e` reads them, later files winning;
- service_specs(): the plan's instances as proctree.ServiceSpec, for Supervisor.start_all;
- ExitRule and RunEnding: foreman's rule for when one entry's end ends the run;
- quiet_instances(): honcho's `-q NAMES`, the instances whose output it hides.

A thin face over the private readers (proctree._procfile): every name here
validates its arguments and is typed; the readers do the work. Pure but for
reading the files named: it must never start, signal or wait for a process.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ._errors import ProcfileError
from ._procfile import dotenv as _dotenv
from ._procfile import honchoopts as _honchoopts
from ._procfile.config import ProcfilePlan, ProcfileService, load_procfile
from ._procfile.exitrule import ExitRule as _ExitRule
from ._procfile.exitrule import RunEnding

if TYPE_CHECKING:  # the supervisor's specs load when service_specs() is first called (`proctree run -e` needs none)
    from ._supervisor.spec import ServiceSpec

__all__ = [
    "ExitRule",
    "ProcfileError",
    "ProcfilePlan",
    "ProcfileService",
    "RunEnding",
    "choose_files",
    "load",
    "load_procfile",
    "quiet_instances",
    "read_env_files",
    "service_specs",
]

PathLike = str | os.PathLike[str]


def _path(value: object, what: str) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path (str or os.PathLike), not {type(value).__name__}")
    path = os.fspath(value)
    if not isinstance(path, str):  # a PathLike of bytes
        raise TypeError(f"{what} must be a path as str, not {type(path).__name__}")
    if "\0" in path:
        raise ValueError(f"{what} holds a NUL byte: no path does")
    return path


def _optional_path(value: object, what: str) -> str | None:
    return None if value is None else _path(value, what)


def _environ(environ: object) -> Mapping[str, str]:
    """environ, checked: a mapping of str to str (default os.environ), or TypeError naming it."""
    if environ is None:
        return os.environ
    if not isinstance(environ, Mapping):
        raise TypeError(f"environ must be a mapping of names to values (str), not {type(environ).__name__}")
    for key, value in environ.items():
        if not isinstance(key, str) or not isinstance(value, str):
            bad = key if not isinstance(key, str) else value
            raise TypeError(f"environ must map str to str; it holds a {type(bad).__name__} (for {str(key)[:40]!r})")
    return environ


def _strict(strict: object) -> bool:
    if not isinstance(strict, bool):
        raise TypeError(f"strict must be True or False, not {type(strict).__name__}")
    return strict


def _names(names: object) -> tuple[str, ...]:
    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
        raise TypeError(f"names must be a sequence of entry names (a list or tuple of str), not {type(names).__name__}")
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"names must hold entry names (str), not {type(name).__name__}")
    return tuple(names)


def _paths(values: object, what: str) -> list[str] | None:
    if values is None:
        return None
    if isinstance(values, (str, bytes, os.PathLike)) or not isinstance(values, Iterable):
        raise TypeError(f"{what} must be a list of paths, not {type(values).__name__}")
    return [_path(v, what) for v in values]


def choose_files(
    procfile: PathLike | None = None,
    *,
    env_files: Sequence[PathLike] | None = None,
    app_root: PathLike | None = None,
    environ: Mapping[str, str] | None = None,
    strict: bool = True,
) -> tuple[str, list[str] | None]:
    """The Procfile and .env files honcho would read: (procfile, env_files), env_files None for "the .env
    beside the Procfile" (load_procfile's default).

    procfile (honcho's -f) wins; else PROCFILE from the .env files (env_files, or .env in app_root if
    there is one), else from environ (default os.environ), else ./Procfile; each path relative to
    app_root (honcho's -d). strict=False passes over a .env file or line that cannot be read, as honcho does.
    Raises ProcfileError for a .env file that cannot be read.
    """
    return _honchoopts.choose_procfile(
        _optional_path(procfile, "procfile"),
        _paths(env_files, "env_files"),
        _optional_path(app_root, "app_root"),
        _environ(environ),
        strict=_strict(strict),
    )


def load(
    procfile: PathLike | None = None,
    *,
    env_files: Sequence[PathLike] | None = None,
    app_root: PathLike | None = None,
    scale: str | None = None,
    names: Sequence[str] = (),
    base_port: int | None = None,
    environ: Mapping[str, str] | None = None,
    strict: bool = True,
) -> ProcfilePlan:
    """The plan `proctree up` would run: choose_files(), then load_procfile() on what it chose.

    scale: foreman's -m (`web=2,worker=1`); names: only these entries and what they depend on;
    base_port: foreman's -p. strict=False reads as honcho does, what it skips said in plan.warnings.
    Raises ProcfileError (a ValueError) for anything that cannot be run as written.
    """
    wanted = _names(names)
    chosen, files = choose_files(procfile, env_files=env_files, app_root=app_root, environ=environ, strict=strict)
    return load_procfile(
        chosen,
        env_files=files,
        scale=scale,
        names=wanted,
        base_port=base_port,
        environ=_environ(environ),
        strict=strict,
    )


def read_env_files(paths: Sequence[PathLike], *, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The assignments of these .env files, as `proctree up -e` reads them: later files winning, values
    expanded against environ (default os.environ) and the earlier files. Raises ProcfileError naming the
    file (and the line) for a file that is missing or a line that is not an assignment; OSError for another
    failed read."""
    base = _environ(environ)
    if paths is None:
        raise TypeError("paths must be a list of paths, not None")
    values: dict[str, str] = {}
    for path in _paths(paths, "paths") or []:
        values.update(_dotenv.read_dotenv(path, base=base, known=values))
    return values


def service_specs(plan: ProcfilePlan, stop_signal: int | None = None) -> list[ServiceSpec]:
    """One proctree.ServiceSpec per planned instance, in plan order, for Supervisor.start_all().

    stop_signal: for the entries without a stop_signal setting of their own (default SIGTERM).
    Raises TypeError / ValueError, led by the entry and its settings file, for a setting the supervisor refuses.
    """
    if not isinstance(plan, ProcfilePlan):
        raise TypeError(f"plan must be a ProcfilePlan (from load or load_procfile), not {type(plan).__name__}")
    from ._procfile.servicespecs import service_specs as specs_of

    return specs_of(plan, stop_signal)


def quiet_instances(names: str, plan: ProcfilePlan) -> frozenset[str]:
    """The instances (web.1, web.2) whose output honcho's `-q names` hides: entry or instance names,
    separated by commas. Raises ProcfileError for an empty or unknown name."""
    if not isinstance(names, str):
        raise TypeError(f"names must be a str of names separated by commas, not {type(names).__name__}")
    if not isinstance(plan, ProcfilePlan):
        raise TypeError(f"plan must be a ProcfilePlan, not {type(plan).__name__}")
    return _honchoopts.hidden_instances(names, plan)


class ExitRule(_ExitRule):
    """foreman's exit rule over one plan: whether an instance's end ends the run, with which status and why.

    One entry's end stops the rest, unless its settings say can_die, or it is a one-shot something waits on
    to complete and it exited 0. With exit_with=NAME only NAME's end (every instance of it) ends the run,
    with NAME's status. Call on_end() once per instance that ended, in order; it returns a RunEnding or None.
    """

    def __init__(self, plan: ProcfilePlan | Iterable[ProcfileService], exit_with: str | None = None) -> None:
        if exit_with is not None and not isinstance(exit_with, str):
            raise TypeError(f"exit_with must be an entry name (str), not {type(exit_with).__name__}")
        if isinstance(plan, ProcfilePlan):
            services = list(plan.services)
        elif isinstance(plan, Iterable) and not isinstance(plan, (str, bytes)):
            services = list(plan)
            if not all(isinstance(s, ProcfileService) for s in services):
                raise TypeError("plan must be a ProcfilePlan or an iterable of ProcfileService")
        else:
            raise TypeError(f"plan must be a ProcfilePlan (from load or load_procfile), not {type(plan).__name__}")
        if exit_with is not None and not any(s.entry == exit_with for s in services):
            known = sorted({s.entry for s in services})
            raise ProcfileError(
                f"exit_with {exit_with[:60]!r} has no instance in the plan (entries: {', '.join(known)[:200]})"
            )
        super().__init__(services, exit_with)
        self._instances = frozenset(s.name for s in services)

    def on_end(self, name: str, *, failed: bool, status: int, exit_code: int | None, how: str) -> RunEnding | None:
        """Instance name (web.1) ended: failed, else it exited; status: the shell's status for its end;
        exit_code: its exit code (None when a signal ended it); how: its end in words ("exited with code 3").
        The run's end, or None: the run goes on. ValueError for an instance the plan does not have."""
        if not isinstance(name, str) or name not in self._instances:
            raise ValueError(f"{str(name)[:60]!r} is not an instance of the plan (web.1, web.2, ...)")
        if not isinstance(failed, bool):
            raise TypeError(f"failed must be True or False, not {type(failed).__name__}")
        if isinstance(status, bool) or not isinstance(status, int):
            raise TypeError(f"status must be an int, not {type(status).__name__}")
        if exit_code is not None and (isinstance(exit_code, bool) or not isinstance(exit_code, int)):
            raise TypeError(f"exit_code must be an int or None, not {type(exit_code).__name__}")
        if not isinstance(how, str):
            raise TypeError(f"how must be a str, not {type(how).__name__}")
        return super().on_end(name, failed=failed, status=status, exit_code=exit_code, how=how)
