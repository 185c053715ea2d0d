"""What a user writes for readiness (ready=...), checked into a ReadySpec.

Pure: parse_ready() and ReadySpec refuse bad input with TypeError or
ValueError saying what is wrong, before anything is started.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._validate import check_port, check_seconds

__all__ = ["KINDS", "ReadySpec", "check_url", "parse_ready", "positive_seconds"]

KINDS = ("auto", "none", "log", "tcp", "http", "exec")


# --- the readiness spec ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadySpec:
    """How a service proves it is ready.

    kind: "auto" (a URL or "listening" phrase in the output, or a TCP probe
    of the port from the command or given), "none" (never: the service is
    "running" once alive), "log" (pattern, a regex, matches a line), "tcp"
    (host:port accepts a connection), "http" (a GET of url answers status, or
    any 2xx/3xx when status is None), "exec" (command exits 0). interval is
    the time between probe rounds, timeout each probe's bound (seconds).
    """

    kind: str = "auto"
    pattern: str | None = None
    host: str = "127.0.0.1"
    port: int | None = None
    url: str | None = None
    status: int | None = None
    command: str | tuple[str, ...] | None = None
    interval: float = 0.25
    timeout: float = 2.0
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # parse_ready() checks what users write; this catches a spec built by hand without what
        # its kind needs, before a probe would trip over it.
        if self.kind not in KINDS:
            raise ValueError(f"ready kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        needed = {"log": "pattern", "tcp": "port", "http": "url", "exec": "command"}.get(self.kind)
        if needed is not None and getattr(self, needed) in (None, "", ()):
            raise ValueError(f"a {self.kind!r} ready spec needs a {needed}")
        if self.port is not None:
            check_port(self.port, "ready port")
        if self.pattern is not None and self.regex is None:
            try:
                object.__setattr__(self, "regex", re.compile(self.pattern))
            except re.error as exc:
                raise ValueError(
                    f"ready log pattern {self.pattern!r} is not a valid regular expression: {exc}"
                ) from None

    @property
    def probes(self) -> bool:
        """Whether readiness may come from probe() rounds (and not only from output)."""
        return self.kind in ("auto", "tcp", "http", "exec")


_SPEC_KEYS = {"interval", "timeout", "status", "host"}


def parse_ready(value: None | str | int | Mapping[str, Any] | ReadySpec) -> ReadySpec:
    """A ReadySpec from what a user wrote; TypeError / ValueError (saying what is wrong) on bad input.

    None or "auto" -> auto; "none" (or False) -> none; "tcp:8000", "tcp:HOST:8000",
    "tcp://HOST:8000" or an int -> tcp; "http://..." / "https://..." -> http;
    "log:REGEX" -> log; "exec:COMMAND" -> exec. A mapping has one kind key and
    options: {"http": url, "status": 200}, {"tcp": 8000, "host": "::1"},
    {"log": regex}, {"exec": command or argv list}, and "interval" / "timeout"
    for any of them.
    """
    if isinstance(value, ReadySpec):
        return value
    if value is None:
        return ReadySpec()
    if value is False:
        return ReadySpec(kind="none")
    if isinstance(value, bool):
        raise TypeError("ready must be None, False, a string, a port number or a mapping, not True")
    if isinstance(value, int):
        return ReadySpec(kind="tcp", port=check_port(value, "ready port"))
    if isinstance(value, str):
        return _parse_text(value)
    if isinstance(value, Mapping):
        return _parse_mapping(value)
    raise TypeError(f"ready must be None, a string, a port number or a mapping, not {type(value).__name__}")


def _parse_text(value: str) -> ReadySpec:
    text = value.strip()
    low = text.lower()
    if low in ("", "auto"):
        return ReadySpec()
    if low == "none":
        return ReadySpec(kind="none")
    if low.startswith(("http://", "https://")):
        return ReadySpec(kind="http", url=check_url(text))
    kind, sep, rest = text.partition(":")
    kind = kind.strip().lower()
    if not sep or kind not in KINDS:
        raise ValueError(
            f"ready {value!r}: unknown kind {kind!r}; expected auto, none, tcp:PORT, http://URL, log:REGEX or exec:COMMAND"
        )
    return _build(kind, rest if kind in ("log", "exec") else rest.strip(), {}, value)


def _parse_mapping(value: Mapping[str, Any]) -> ReadySpec:
    for key in value:
        if not isinstance(key, str):
            raise TypeError(f"ready: keys must be strings, not {type(key).__name__}")
    kinds = [k for k in value if k in KINDS]
    unknown = [k for k in value if k not in KINDS and k not in _SPEC_KEYS and k != "kind"]
    if unknown:
        raise ValueError(f"ready: unknown key(s) {', '.join(map(repr, unknown))}; kinds are {', '.join(KINDS)}")
    if "kind" in value:  # the long form: {"kind": "tcp", "port": 8000} is written {"tcp": 8000}
        raise ValueError("ready: write the kind as the key, e.g. {'tcp': 8000} or {'http': URL, 'status': 200}")
    if len(kinds) != 1:
        raise ValueError(f"ready: a mapping needs exactly one kind key of {', '.join(KINDS)}, got {kinds or 'none'}")
    kind = kinds[0]
    options = {k: value[k] for k in value if k in _SPEC_KEYS}
    return _build(kind, value[kind], options, value)


def _build(kind: str, arg: Any, options: Mapping[str, Any], original: Any) -> ReadySpec:
    extra: dict[str, Any] = {}
    if "interval" in options:
        extra["interval"] = positive_seconds(options["interval"], "ready interval", positive=True)
    if "timeout" in options:
        extra["timeout"] = positive_seconds(options["timeout"], "ready timeout", positive=True)
    if "status" in options and kind != "http":
        raise ValueError(f"ready: 'status' applies to http, not {kind}")
    if "host" in options and kind != "tcp":
        raise ValueError(f"ready: 'host' applies to tcp, not {kind}")
    if kind in ("auto", "none"):
        if arg not in (None, True, "", kind):
            raise ValueError(f"ready: {kind!r} takes no argument, got {arg!r}")
        return ReadySpec(kind=kind, **extra)
    if kind == "log":
        if not isinstance(arg, str):
            raise TypeError(f"ready log pattern must be a string, not {type(arg).__name__}")
        if not arg:
            raise ValueError("ready log pattern is empty")
        try:
            regex = re.compile(arg)
        except re.error as exc:
            raise ValueError(f"ready log pattern {arg!r} is not a valid regular expression: {exc}") from None
        return ReadySpec(kind="log", pattern=arg, regex=regex, **extra)
    if kind == "tcp":
        host = options.get("host", "127.0.0.1")
        if not isinstance(host, str) or not host.strip("[] "):
            raise ValueError(f"ready tcp host must be a non-empty string, got {host!r}")
        host, port = _parse_host_port(arg, host.strip("[] "))
        return ReadySpec(kind="tcp", host=host, port=port, **extra)
    if kind == "http":
        if not isinstance(arg, str):
            raise TypeError(f"ready http URL must be a string, not {type(arg).__name__}")
        status = options.get("status")
        if status is not None:
            if isinstance(status, bool) or not isinstance(status, int):
                raise TypeError(f"ready http status must be an int, not {type(status).__name__}")
            if not 100 <= status <= 599:
                raise ValueError(f"ready http status must be 100-599, got {status}")
        return ReadySpec(kind="http", url=check_url(arg), status=status, **extra)
    # exec
    if isinstance(arg, str):
        if not arg.strip():
            raise ValueError("ready exec command is empty")
        return ReadySpec(kind="exec", command=arg, **extra)
    if isinstance(arg, Sequence) and not isinstance(arg, (bytes, bytearray)):
        argv = tuple(arg)
        if not argv:
            raise ValueError("ready exec command is empty")
        if not all(isinstance(word, str) for word in argv):
            raise TypeError("ready exec argv must hold strings only")
        return ReadySpec(kind="exec", command=argv, **extra)
    raise TypeError(f"ready exec command must be a string or an argv list, not {type(arg).__name__}")


def _parse_host_port(arg: Any, default_host: str) -> tuple[str, int]:
    if isinstance(arg, bool):
        raise TypeError("ready tcp port must be an int or 'HOST:PORT', not a bool")
    if isinstance(arg, int):
        return default_host, check_port(arg, "ready tcp port")
    if not isinstance(arg, str):
        raise TypeError(f"ready tcp port must be an int or 'HOST:PORT', not {type(arg).__name__}")
    text = arg.strip()
    if text.lower().startswith("tcp://"):
        text = text[6:]
    elif text.startswith("//"):  # "tcp://HOST:PORT" split at its first colon
        text = text[2:]
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = default_host, text
    host = host.strip("[]") or default_host
    port_text = port_text.strip()
    if not re.fullmatch(r"-?[0-9]+", port_text):
        raise ValueError(f"ready tcp: {arg!r} has no port number (write tcp:8000 or tcp:HOST:8000)")
    return host, check_port(int(port_text), "ready tcp port")


def check_url(url: str) -> str:
    url = url.strip()
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port outside 0-65535, or not a number
        raise ValueError(f"ready URL {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"ready URL {url!r} must start with http:// or https://")
    if not parts.hostname:
        raise ValueError(f"ready URL {url!r} has no host")
    if port == 0:
        raise ValueError(f"ready URL {url!r}: port must be 1-65535, got 0")
    return url


def positive_seconds(value: Any, what: str, positive: bool = False) -> float:
    seconds = check_seconds(value, what)
    if positive and seconds == 0:
        raise ValueError(f"{what} must be more than 0 seconds, got {value!r}")
    return seconds
