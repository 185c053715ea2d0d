"""ServiceSpec: what to start, checked whole before anything starts.

A spec is validated when it is made (TypeError / ValueError, naming the field),
so a batch of services (`Supervisor.start_all`, `proctree up`) is refused as a
whole before any of them runs. Pure but for reading os.environ in build_env().
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._validate import check_command, check_port, check_seconds, check_signal, check_stop_grace, is_env_name
from . import deps as _deps
from . import restart as _restart

# A name is what a Procfile entry may be called (foreman, honcho), plus '.' for scaled copies (web.1).
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_ID = re.compile(r"s[0-9]+")
ALL = "all"  # stop("all"), restart("all")


def check_name(value: object) -> str:
    """A service name: 1-64 of [A-Za-z0-9_.-], not "all", ".", "..", nor shaped like an id (s12)."""
    if not isinstance(value, str):
        raise TypeError(f"name must be a str, not {type(value).__name__}")
    if not _NAME.fullmatch(value):
        raise ValueError(f"name {value!r} is not a service name: 1-64 letters, digits, '_', '.' or '-'")
    if value in (ALL, ".", "..") or _ID.fullmatch(value):
        raise ValueError(f"name {value!r} is reserved ('all' and ids like s1 name services already)")
    return value


def check_env(value: object) -> tuple[tuple[str, str | None], ...]:
    """env as ((name, value or None), ...): what to set over the host's environment (None removes a name)."""
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise TypeError(f"env must be a mapping of str to str, not {type(value).__name__}")
    out = []
    for key, val in value.items():
        if not isinstance(key, str):
            raise TypeError(f"env: a name must be a str, not {type(key).__name__}")
        if not is_env_name(key):
            raise ValueError(
                f"env: {key!r} is not an environment variable name (a letter or '_', then letters, digits, '_' or '.')"
            )
        if val is not None and not isinstance(val, str):
            raise TypeError(f"env[{key!r}] must be a str (or None to remove it), not {type(val).__name__}")
        if val is not None and "\0" in val:
            raise ValueError(f"env[{key!r}] contains a NUL character")
        out.append((key, val))
    return tuple(out)


def check_cwd(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f"cwd must be a str or a path, not {type(value).__name__}")
    if not value or "\0" in value:
        raise ValueError(f"cwd {value!r} is not a path")
    return value


def _seconds_or_none(value: object, what: str) -> float | None:
    return None if value is None else check_seconds(value, what)


@dataclass(frozen=True)
class ServiceSpec:
    """One service to start: the keywords of Supervisor.start(), checked and normalised when made.

    command: a shell line (run by /bin/sh) or an argv. name: unique among live
    services (the id when None). cwd, env: env is set over the host's
    environment (a None value removes a name); PYTHONUNBUFFERED=1 is added
    unless set. port: the port the service listens on, if known (else read
    from the command). ready: how readiness is proven (None: detect it; see
    readiness.parse_ready). depends_on: {name: "started" | "ready" |
    "completed"} or a list of names ("started"). restart: "no",
    "on-failure" or "always"; max_restarts: quick restarts in a row before
    giving up (None: no limit). ready_timeout, stop_grace: None for the
    supervisor's. stop_signal: what stops the service's tree, each member
    once (a number or a name, "SIGINT" or "INT"; SIGTERM by default; SIGKILL,
    SIGSTOP and SIGCONT are refused).
    """

    command: Any
    name: str | None = None
    cwd: Any = None
    env: Any = None
    port: int | None = None
    ready: Any = None
    depends_on: Any = None
    restart: str = _restart.NO
    max_restarts: int | None = 5
    ready_timeout: float | None = None
    stop_grace: float | None = None
    stop_signal: Any = None

    def __post_init__(self) -> None:
        from .readiness import parse_ready

        fix = object.__setattr__
        fix(self, "command", check_command(self.command))
        if self.name is not None:
            check_name(self.name)
        fix(self, "cwd", check_cwd(self.cwd))
        fix(self, "env", check_env(self.env))
        if self.port is not None:
            check_port(self.port)
        fix(self, "ready", parse_ready(self.ready))
        fix(self, "depends_on", _deps.check_depends_on(self.depends_on))
        for dep, _ in self.depends_on:
            try:
                check_name(dep)
            except ValueError as exc:
                raise ValueError(f"depends_on: {exc}") from None
        if self.name is not None and any(dep == self.name for dep, _ in self.depends_on):
            raise ValueError(f"depends_on: {self.name!r} depends on itself")
        check_policy = _restart.check_policy(self.restart)
        fix(self, "restart", check_policy)
        _restart.check_max_restarts(self.max_restarts)
        fix(self, "ready_timeout", _seconds_or_none(self.ready_timeout, "ready_timeout"))
        fix(self, "stop_grace", None if self.stop_grace is None else check_stop_grace(self.stop_grace))
        fix(self, "stop_signal", None if self.stop_signal is None else check_signal(self.stop_signal, "stop_signal"))


def check_specs(specs: object) -> list[ServiceSpec]:
    """start_all()'s argument as a list of ServiceSpecs; TypeError naming the mistake otherwise."""
    if isinstance(specs, ServiceSpec):
        raise TypeError("start_all takes a list of ServiceSpecs, not one: pass [spec], or use start()")
    if isinstance(specs, Mapping):
        raise TypeError(
            "start_all takes a list of ServiceSpecs, not a mapping: give each its name with ServiceSpec(..., name=NAME)"
        )
    if isinstance(specs, (str, bytes)) or not isinstance(specs, Iterable):
        raise TypeError(f"start_all takes a list of ServiceSpecs, not {type(specs).__name__}")
    batch = list(specs)
    for i, spec in enumerate(batch):
        if not isinstance(spec, ServiceSpec):
            raise TypeError(f"specs[{i}] must be a ServiceSpec, not {type(spec).__name__}")
    return batch


def build_env(overlay: tuple[tuple[str, str | None], ...], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The service's environment: base (the host's) with overlay applied, and PYTHONUNBUFFERED=1 unless set."""
    env = dict(os.environ if base is None else base)
    for key, value in overlay:
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    # Python buffers a pipe's output in 8 KiB blocks: a Python service would look silent, its URL unseen.
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env
