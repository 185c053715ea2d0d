"""What `proctree up` will run: a Procfile, .env files, a scale and optional settings, made into a plan.

A plan is one ProcfileService per instance (`web.1`, `web.2`, `worker.1`), each
with its command, the environment it adds (the .env values, then `PORT`, `PS`,
`PROCTREE_SERVICE` and `HONCHO_PROCESS_NAME` the foreman and honcho way, then its own `env` setting), its
port, and the richer settings read from `[tool.proctree.services.NAME]` in
pyproject.toml or `[services.NAME]` in a proctree.toml beside the Procfile:

    [tool.proctree.services.web]
    ready = "http://127.0.0.1:$PORT/health"   # or "tcp:$PORT", "log:<regex>", a table
    depends_on = { db = "ready", migrate = "completed" }   # a list means "started"
    restart = "on-failure"                     # "no" (default), "on-failure", "always"
    max_restarts = 5
    env = { DEBUG = "1" }
    can_die = true                             # its exit does not stop the rest
    port = 8000                                # instead of 5000 + 100 * entry
    cwd = "frontend"                           # relative to the Procfile's folder
    stop_signal = "SIGINT"                     # what stops it (once): a name or number; SIGTERM by default

PORT is 5000 (or -p, or PORT from the .env files or the environment) + 100 per
Procfile entry (its position in the file, whether it runs or not) + the
instance number from 0. A Procfile alone always works: the settings only add.

Pure but for reading the files it is given (and checking that a cwd is a
folder). Must never: start anything, or return a plan built from input that
had an error; every error says which file, line or setting.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._supervisor.deps import CONDITIONS, find_cycle
from .._supervisor.restart import POLICIES as RESTART_POLICIES
from .._validate import check_signal, is_env_name, is_port, port_from_text
from .dotenv import read_dotenv
from .procfile import NAME, ProcfileEntry, ProcfileError, read_procfile
from .tomlread import read_toml

DEFAULT_BASE_PORT = 5000
SETTING_KEYS = ("ready", "depends_on", "restart", "max_restarts", "env", "can_die", "port", "cwd", "stop_signal")
# A scale is a handful of copies of a process, not a load generator: past this
# it is a typo (web=1000 for web=100? web=10?).
MAX_INSTANCES = 100
MAX_TOTAL = 256
_DIGITS = re.compile(r"[0-9]+")  # a -m count
_PORT_VAR = re.compile(r"\$(?:\{PORT\}|PORT(?![A-Za-z0-9_]))")


@dataclass(frozen=True)
class EntrySettings:
    """The settings of one Procfile entry (all optional)."""

    ready: str | Mapping[str, Any] | None = None
    depends_on: Mapping[str, str] = field(default_factory=dict)
    restart: str = "no"
    max_restarts: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    can_die: bool = False
    port: int | None = None
    cwd: str | None = None
    stop_signal: int | None = None


@dataclass(frozen=True)
class ProcfileService:
    """One instance to start: name is `entry.instance` (web.1), as foreman and honcho name them.

    env holds only what `up` adds to the inherited environment. depends_on is
    by instance name. ready has $PORT already replaced.
    """

    name: str
    entry: str
    instance: int
    command: str
    env: Mapping[str, str]
    port: int
    cwd: str
    ready: str | Mapping[str, Any] | None
    depends_on: Mapping[str, str]
    restart: str
    max_restarts: int | None
    can_die: bool
    stop_signal: int | None = None  # None: up's --stop-signal (SIGTERM by default)


@dataclass(frozen=True)
class ProcfilePlan:
    """Everything `proctree up` starts, in Procfile order, and where it came from."""

    procfile: str
    services: tuple[ProcfileService, ...]
    entries: tuple[ProcfileEntry, ...]
    env_files: tuple[str, ...]
    settings_file: str | None
    base_port: int
    # Read leniently (load_procfile(strict=False)): what was skipped, each `file:line: why`.
    warnings: tuple[str, ...] = ()

    def instances_of(self, entry: str) -> tuple[ProcfileService, ...]:
        return tuple(s for s in self.services if s.entry == entry)


def _not_a_file(path: str) -> str:
    """Why path, which is no regular file, is not read as a .env file."""
    if not os.path.lexists(path):
        return "no such .env file"
    if os.path.isdir(path):
        return "a directory, not a .env file"
    if not os.path.exists(path):
        return "a broken or looping link, not a .env file"
    return "not a regular file (a FIFO, device or socket), not a .env file"


# -- scale ---------------------------------------------------------------------


def parse_scale(text: str, names: Sequence[str]) -> dict[str, int]:
    """`web=2,worker=1` (foreman's -m; `all=N` sets the default) -> {name: count} for every name.

    Counts are plain decimal 0..MAX_INSTANCES; an entry not mentioned runs once
    (or `all`'s count). Raises ProcfileError (source "-m") for an unknown name,
    a name given twice, a malformed item or count.
    """
    if not isinstance(text, str):
        raise TypeError(f"scale must be a string like 'web=2,worker=1', not {type(text).__name__}")
    counts: dict[str, int] = {}
    default = 1
    seen: set[str] = set()
    items = [item.strip() for item in text.split(",")]
    if not text.strip():
        raise ProcfileError("empty scale (write it as name=count,name=count)", source="-m")
    for item in items:
        name, eq, count = (part.strip() for part in item.partition("="))
        if not item or not eq or not name:
            raise ProcfileError(f"{item!r} is not name=count", source="-m")
        if not _DIGITS.fullmatch(count):
            raise ProcfileError(f"{name}={count!r}: a count is a whole number 0..{MAX_INSTANCES}", source="-m")
        count = count.lstrip("0") or "0"
        if len(count) > len(str(MAX_INSTANCES)):  # before int(): a 5000-digit count is just too many
            raise ProcfileError(f"{name}={count[:20]}...: at most {MAX_INSTANCES} instances of an entry", source="-m")
        number = int(count)
        if number > MAX_INSTANCES:
            raise ProcfileError(f"{name}={count}: at most {MAX_INSTANCES} instances of an entry", source="-m")
        if name in seen:
            raise ProcfileError(f"{name!r} is scaled twice", source="-m")
        seen.add(name)
        if name == "all":
            default = number
        elif name in names:
            counts[name] = number
        else:
            raise ProcfileError(f"{name!r} is not an entry of the Procfile (entries: {', '.join(names)})", source="-m")
    return {name: counts.get(name, default) for name in names}


# -- settings files -------------------------------------------------------------


def load_settings(directory: str) -> tuple[dict[str, EntrySettings], str | None]:
    """The settings beside a Procfile: proctree.toml's [services], else pyproject.toml's
    [tool.proctree.services]; ({}, None) when neither has any. Both having some is an
    error (one of them would be silently ignored)."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    for filename, path_in_file in (
        ("proctree.toml", ("services",)),
        ("pyproject.toml", ("tool", "proctree", "services")),
    ):
        path = os.path.join(directory, filename)
        if not os.path.lexists(path):
            continue  # a broken link is read, and refused: its settings must not be lost without a word
        document = read_toml(path)
        _check_known_keys(document, path_in_file, path)
        table: Any = document
        for key in path_in_file:
            table = table.get(key) if isinstance(table, dict) else None
        if table is not None:
            found.append((path, table))
    if not found:
        return {}, None
    if len(found) > 1:
        raise ProcfileError(
            f"services are set in both {found[0][0]} and {found[1][0]}: keep them in one", source=found[0][0]
        )
    path, table = found[0]
    return parse_settings(table, source=path), path


def _check_known_keys(document: Mapping[str, Any], path_in_file: tuple[str, ...], source: str) -> None:
    """Refuse keys beside `services` in proctree's own table (the whole proctree.toml, or [tool.proctree]).

    A mistyped table (`[tool.proctree.service.web]`) would otherwise be
    ignored without a word, its settings never applied. The rest of
    pyproject.toml belongs to other tools and is not looked at.
    """
    *outer, services = path_in_file
    table: Any = document
    for key in outer:
        table = table.get(key) if isinstance(table, dict) else None
    if table is None:
        return  # no [tool.proctree] at all: nothing of ours here
    if not isinstance(table, dict):
        raise ProcfileError(f"{'.'.join(outer) or 'the file'} must be a table", source=source)
    unknown = sorted(set(table) - {services})
    if unknown:
        where = "top-level keys" if not outer else f"keys under [{'.'.join(outer)}]"
        table_name = ".".join([*outer, services])
        raise ProcfileError(f"unknown {where} {unknown} (settings go under [{table_name}.NAME])", source=source)


def parse_settings(table: object, source: str) -> dict[str, EntrySettings]:
    """{entry name: EntrySettings} from the services table (already parsed TOML)."""
    if not isinstance(table, dict):
        raise ProcfileError("services must be a table of [services.NAME] tables", source=source)
    out: dict[str, EntrySettings] = {}
    for name, value in table.items():
        where = f"services.{name}"
        if not NAME.fullmatch(name):
            raise ProcfileError(f"{where}: not a Procfile entry name (letters, digits, '_' and '-')", source=source)
        if not isinstance(value, dict):
            raise ProcfileError(f"{where} must be a table", source=source)
        out[name] = _entry_settings(value, where, source)
    return out


def _entry_settings(value: dict[str, Any], where: str, source: str) -> EntrySettings:
    def fail(message: str) -> ProcfileError:
        return ProcfileError(f"{where}: {message}", source=source)

    unknown = sorted(set(value) - set(SETTING_KEYS))
    if unknown:
        raise fail(f"unknown settings {unknown} (known: {', '.join(SETTING_KEYS)})")
    ready = value.get("ready")
    if ready is not None and not isinstance(ready, (str, dict)):
        raise fail("ready must be a string (tcp:PORT, http://..., log:REGEX) or a table")
    depends_on = _depends_on(value.get("depends_on", {}), fail)
    restart = value.get("restart", "no")
    if restart not in RESTART_POLICIES:
        raise fail(f"restart must be one of {', '.join(RESTART_POLICIES)}, not {restart!r}")
    max_restarts = value.get("max_restarts")
    if max_restarts is not None and (type(max_restarts) is not int or max_restarts < 0):
        raise fail(f"max_restarts must be a whole number >= 0, not {max_restarts!r}")
    env = value.get("env", {})
    if not isinstance(env, dict):
        raise fail("env must be a table of NAME = value")
    clean_env: dict[str, str] = {}
    for key, item in env.items():
        if not is_env_name(key):
            raise fail(f"env: {key!r} is not an environment variable name")
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise fail(f"env.{key} must be a string or a number, not {type(item).__name__}")
        clean_env[key] = str(item)
        if "\0" in clean_env[key]:
            raise fail(f"env.{key} holds a NUL character")
    can_die = value.get("can_die", False)
    if not isinstance(can_die, bool):
        raise fail(f"can_die must be true or false, not {can_die!r}")
    port = value.get("port")
    if port is not None and not is_port(port):
        raise fail(f"port must be a whole number 1..65535, not {port!r}")
    cwd = value.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd or "\0" in cwd):
        raise fail("cwd must be a non-empty path")
    stop_signal = value.get("stop_signal")
    if stop_signal is not None:
        try:
            stop_signal = check_signal(stop_signal, "stop_signal")
        except (TypeError, ValueError) as exc:
            raise fail(f'{exc} (a name such as "SIGINT" or "INT", or a number)') from None
    return EntrySettings(
        ready=ready,
        depends_on=depends_on,
        restart=restart,
        max_restarts=max_restarts,
        env=clean_env,
        can_die=can_die,
        port=port,
        cwd=cwd,
        stop_signal=stop_signal,
    )


def _depends_on(value: object, fail: Any) -> dict[str, str]:
    if isinstance(value, list):
        value = dict.fromkeys(value, "started") if all(isinstance(v, str) for v in value) else None
    if not isinstance(value, dict):
        raise fail('depends_on must be a list of names or a table { name = "started" | "ready" | "completed" }')
    for name, condition in value.items():
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise fail(f"depends_on: {name!r} is not an entry name")
        if condition not in CONDITIONS:
            raise fail(f"depends_on.{name} must be one of {', '.join(CONDITIONS)}, not {condition!r}")
    return dict(value)


# -- the plan -----------------------------------------------------------------------


def load_procfile(
    procfile: str | os.PathLike[str] = "Procfile",
    *,
    env_files: Sequence[str | os.PathLike[str]] | None = None,
    scale: str | None = None,
    names: Sequence[str] = (),
    base_port: int | None = None,
    environ: Mapping[str, str] | None = None,
    strict: bool = True,
) -> ProcfilePlan:
    """Read a Procfile, its .env files and settings, and plan every instance to start.

    env_files: None reads `.env` beside the Procfile if there is one; a list
    reads exactly those (each must exist), later files winning.
    scale: foreman's -m (`web=2,worker=1`, `all=0,web=1`).
    names: run only these entries (and what they depend on); () runs all.
    base_port: foreman's -p; else PORT from the .env files, else from environ, else 5000.
    environ: the environment .env values expand against (default os.environ).
    strict: False reads as honcho does: a Procfile or .env line honcho skips,
    a missing .env file and an empty Procfile (a plan with no services) are
    skipped and said in the plan's warnings, with the file and line.
    Raises ProcfileError (a ValueError) for anything that cannot be run as written.
    """
    if scale is not None and not isinstance(scale, str):
        raise TypeError(f"scale must be a string like 'web=2,worker=1' (foreman's -m), not {type(scale).__name__}")
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"names must be a sequence of entry names (a list of str), not {names!r}")
    procfile = os.fspath(procfile)
    environ = os.environ if environ is None else environ
    skipped: list[str] | None = None if strict else []
    entries = read_procfile(procfile, skipped=skipped)
    directory = os.path.dirname(os.path.abspath(procfile))
    if env_files is None:
        default = os.path.join(directory, ".env")
        files = [default] if os.path.isfile(default) else []
    else:
        files = [os.fspath(f) for f in env_files]
    if skipped is not None:  # honcho skips a .env file it cannot open
        skipped += [f"{f}: {_not_a_file(f)}: skipped" for f in files if not os.path.isfile(f)]
        files = [f for f in files if os.path.isfile(f)]
    file_env: dict[str, str] = {}
    for path in files:
        file_env.update(read_dotenv(path, base=environ, known=file_env, skipped=skipped))
    settings, settings_file = load_settings(directory)
    base, base_source = _base_port(base_port, file_env, files, environ)
    if not entries:  # an empty Procfile, read leniently: nothing to run, as under honcho
        if names:
            raise ProcfileError(f"no entry named {names[0]!r}: the Procfile has no entries", source=procfile)
        return ProcfilePlan(procfile, (), (), tuple(files), settings_file, base, tuple(skipped or ()))
    services = plan_services(
        entries,
        settings,
        counts=parse_scale(scale, [e.name for e in entries]) if scale is not None else None,
        names=names,
        base_port=base,
        base_source=base_source,
        file_env=file_env,
        directory=directory,
        settings_source=settings_file or "settings",
        procfile_source=procfile,
    )
    return ProcfilePlan(
        procfile=procfile,
        services=services,
        entries=entries,
        env_files=tuple(files),
        settings_file=settings_file,
        base_port=base,
        warnings=tuple(skipped or ()),
    )


def _base_port(
    given: int | None, file_env: Mapping[str, str], files: Sequence[str], environ: Mapping[str, str]
) -> tuple[int, str]:
    """The base port and where it came from (-p, the .env files, the environment, the default)."""
    if given is not None:
        if not is_port(given):
            raise ProcfileError(f"the base port must be a whole number 1..65535, not {given!r}", source="-p")
        return given, "-p"
    env_source = " / ".join(files) or ".env"
    for source, env in ((env_source, file_env), ("the environment", environ)):
        text = env.get("PORT")
        if text is not None and text != "":
            port = port_from_text(text)
            if port is None:
                raise ProcfileError(f"PORT={text!r} is not a port number 1..65535", source=source)
            return port, f"PORT in {source}"
    return DEFAULT_BASE_PORT, "the default base port"


def plan_services(
    entries: Sequence[ProcfileEntry],
    settings: Mapping[str, EntrySettings],
    *,
    counts: Mapping[str, int] | None = None,
    names: Sequence[str] = (),
    base_port: int = DEFAULT_BASE_PORT,
    base_source: str = "-p",
    file_env: Mapping[str, str] | None = None,
    directory: str = ".",
    settings_source: str = "settings",
    procfile_source: str = "Procfile",
) -> tuple[ProcfileService, ...]:
    """The instances to start (pure apart from checking that each cwd is a folder).

    Each instance's port is the PORT it gets (an entry's env.PORT wins, as in
    its environment); two instances on one port are refused: a server there
    would make both look ready.
    """
    by_name = {e.name: e for e in entries}
    for name in settings:
        if name not in by_name:
            raise ProcfileError(f"services.{name}: no such entry in the Procfile", source=settings_source)
    for name, s in settings.items():
        for dep in s.depends_on:
            if dep not in by_name:
                raise ProcfileError(f"services.{name}: depends on {dep!r}, not an entry", source=settings_source)
            if dep == name:
                raise ProcfileError(f"services.{name}: depends on itself", source=settings_source)
    cycle = find_cycle({n: list(s.depends_on) for n, s in settings.items()})
    if cycle:
        cycle = _from_first_named(cycle, list(settings))
        raise ProcfileError(f"a dependency cycle: {' -> '.join(cycle)}", source=settings_source)
    selected = _select(names, by_name, settings)
    scaled = counts is not None
    counts = dict(counts) if counts is not None else {}
    count_of = {e.name: counts.get(e.name, 1) for e in entries}
    for name in selected:
        for dep in settings.get(name, EntrySettings()).depends_on:
            if count_of[dep] == 0:
                raise ProcfileError(f"{name} depends on {dep}, which the scale sets to 0", source="-m")
    total = sum(count_of[n] for n in selected)
    if total == 0:
        raise ProcfileError("nothing to run: the scale sets every selected entry to 0", source="-m")
    if total > MAX_TOTAL:
        raise ProcfileError(
            f"{total} instances: at most {MAX_TOTAL} in one run",
            source="-m" if scaled else procfile_source,
        )
    file_env = dict(file_env or {})
    services: list[ProcfileService] = []
    taken: dict[int, tuple[str, bool]] = {}  # port -> the instance that gets it, and whether a setting chose it
    for entry in entries:
        if entry.name not in selected:
            continue
        s = settings.get(entry.name, EntrySettings())
        cwd = _cwd(s.cwd, directory, entry.name, settings_source)
        for instance in range(count_of[entry.name]):
            port = (s.port if s.port is not None else base_port + 100 * entry.index) + instance
            if not is_port(port):
                if s.port is not None:
                    why, source = f"services.{entry.name}.port is {s.port}", settings_source
                else:
                    why, source = f"the base port {base_port} is {base_source}", base_source
                raise ProcfileError(
                    f"{entry.name}.{instance + 1} would get PORT={port}, outside 1..65535 ({why}; lower it)",
                    source=source,
                )
            name = f"{entry.name}.{instance + 1}"
            env = dict(file_env)
            env["PORT"] = str(port)
            env.update(s.env)
            if "PORT" in s.env:  # the PORT it gets is the port it is watched on
                text = s.env["PORT"]
                env_port = port_from_text(text)
                if env_port is None:
                    raise ProcfileError(
                        f"services.{entry.name}: env.PORT={text!r} is not a port number 1..65535",
                        source=settings_source,
                    )
                port = env_port
            set_here = s.port is not None or "PORT" in s.env
            if port in taken:
                other, set_there = taken[port]
                raise ProcfileError(
                    f"{other} and {name} would both get PORT={port}: a server there would make both look "
                    "ready (give them different `port` settings, or a base port that keeps them apart)",
                    source=settings_source if (set_here or set_there) else base_source,
                )
            taken[port] = (name, set_here)
            env["PS"] = name
            env["HONCHO_PROCESS_NAME"] = name  # honcho's name for PS: scripts written for it read this
            env["PROCTREE_SERVICE"] = name
            depends_on: dict[str, str] = {}
            for dep, condition in s.depends_on.items():
                for i in range(count_of[dep]):
                    depends_on[f"{dep}.{i + 1}"] = condition
            services.append(
                ProcfileService(
                    name=name,
                    entry=entry.name,
                    instance=instance + 1,
                    command=entry.command,
                    env=env,
                    port=port,
                    cwd=cwd,
                    ready=_with_port(s.ready, port),
                    depends_on=depends_on,
                    restart=s.restart,
                    max_restarts=s.max_restarts,
                    can_die=s.can_die,
                    stop_signal=s.stop_signal,
                )
            )
    return tuple(services)


def _select(
    names: Sequence[str], by_name: Mapping[str, ProcfileEntry], settings: Mapping[str, EntrySettings]
) -> set[str]:
    """The entries to run: all, or the named ones and (transitively) what they depend on."""
    if not names:
        return set(by_name)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ProcfileError(
            f"no entry named {', '.join(map(repr, unknown))} (entries: {', '.join(by_name)})", source="NAME"
        )
    chosen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in chosen:
            chosen.add(name)
            todo.extend(settings.get(name, EntrySettings()).depends_on)
    return chosen


def _from_first_named(cycle: list[str], order: list[str]) -> list[str]:
    """cycle ([a, b, ..., a]) turned to start at its entry named first in the settings file."""
    ring = cycle[:-1]
    position = {name: i for i, name in enumerate(order)}
    start = ring.index(min(ring, key=position.__getitem__))
    return ring[start:] + ring[:start] + [ring[start]]


def _cwd(cwd: str | None, directory: str, name: str, source: str) -> str:
    if cwd is None:
        return directory
    path = os.path.normpath(os.path.join(directory, os.path.expanduser(cwd)))
    if not os.path.isdir(path):
        raise ProcfileError(f"services.{name}: cwd {cwd!r} is not a folder ({path})", source=source)
    return path


def _with_port(ready: Any, port: int) -> Any:
    """ready with $PORT / ${PORT} replaced by the instance's port, in strings at any depth."""
    if isinstance(ready, str):
        return _PORT_VAR.sub(str(port), ready)
    if isinstance(ready, Mapping):
        return {k: _with_port(v, port) for k, v in ready.items()}
    return ready
