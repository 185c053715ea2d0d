"""When is a service ready: what its output says, and what probes find.

Readiness is proven, never assumed: a loopback URL the service printed, once
one TCP connect to it succeeds; a "listening on port N" phrase, likewise
confirmed; a line matching a regex the user gave; or a probe: a TCP connect,
an HTTP GET with an expected status, or a command whose exit 0 means ready.

A port that already answered before the service started (the pre-flight
check) proves nothing: somebody else's server is there. The Detector then
ignores that port entirely (no port probe, no URL or phrase confirmed on it),
so a stranger's server never makes ours look ready. Likewise a port that
belongs to another service of the same supervisor (the `foreign` ports): a
client printing its server's URL is not that server.

The port a command names, the pre-flight check and the TCP probe live in
ports.py (and are named here too). The parsing is pure and table-tested; the
probes touch the network (loopback, unless the user names another host) and,
for exec, start a contained process tree that is always ended: a probe never
leaks. This module must never signal anything but the exec probe's own tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import ssl
import subprocess
import urllib.parse
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._validate import check_seconds
from .logring import strip_ansi
from .ports import (
    check_port,
    is_local_host,
    local_listener,
    loopback_answers,
    port_answers,
    port_from_command,
    tcp_probe,
)

__all__ = [
    "KINDS",
    "Detector",
    "ReadySpec",
    "exec_probe",
    "find_listening_port",
    "find_url",
    "http_probe",
    "parse_ready",
    "port_answers",
    "port_from_command",
    "tcp_probe",
]

KINDS = ("auto", "none", "log", "tcp", "http", "exec")

# --- URLs in output ------------------------------------------------------------------------------

# A loopback or wildcard host, as servers print it. 127.0.0.0/8 is loopback as a whole.
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_LOOPBACK_HOST = rf"(?:localhost|127\.{_OCTET}\.{_OCTET}\.{_OCTET}|0\.0\.0\.0|\[::1?\])"
_URL = re.compile(
    rf"(?<![\w.+-])(?P<scheme>https?)://(?P<host>{_LOOPBACK_HOST})"
    r"(?::(?P<port>\d{1,5}))?"
    # The host (and port) must end there: not localhost.example.com, 127.0.0.1.nip.io,
    # localhost@evil.example or :8000abc. A '.' or ':' that ends the text or is followed by a
    # space or closing punctuation ends a sentence ("Open http://127.0.0.1:8000."), not the host.
    r"(?![\w@-])(?![.:][^\s)\]}>\"',;!?.])"
    r"(?P<path>/[\w\-./~%?#=&+:@!$,;*']*)?",
    re.IGNORECASE | re.ASCII,
)


def _connectable(host: str) -> str:
    """The address to connect to for a host a server printed (the wildcards are not addresses)."""
    host = host.lower()
    if host == "0.0.0.0":
        return "127.0.0.1"
    if host == "[::]":
        return "[::1]"  # a server on the IPv6 wildcard accepts on ::1 whether or not it is dual-stack
    return host


def find_url(line: str) -> str | None:
    """The first loopback http(s) URL in line, made connectable, or None.

    localhost, 127.0.0.0/8, 0.0.0.0, [::1] and [::] count; 0.0.0.0 becomes
    127.0.0.1 and [::] becomes [::1]. A URL inside another URL (a redirect
    parameter) or glued to a word does not count, nor one with a port outside
    1-65535. The result is scheme://host:port/path with the port spelt out.
    Control sequences in line are ignored.
    """
    found = _find_url(line)
    return None if found is None else found[0]


def _find_url(line: str) -> tuple[str, str, int] | None:
    """find_url(), with the line stripped of control sequences and where the URL starts in it."""
    if "://" not in line:
        return None
    line = strip_ansi(line)
    for m in _URL.finditer(line):
        start = m.start()
        token_start = max(line.rfind(" ", 0, start), line.rfind("\t", 0, start)) + 1
        if "://" in line[token_start:start]:
            continue  # inside another URL: http://example.com/?next=http://localhost/
        scheme = m.group("scheme").lower()
        port = int(m.group("port")) if m.group("port") else (443 if scheme == "https" else 80)
        if not 1 <= port <= 65535:
            continue
        path = (m.group("path") or "/").rstrip(".,;:!?'")
        return f"{scheme}://{_connectable(m.group('host'))}:{port}{path or '/'}", line, start
    return None


def _url_target(url: str) -> tuple[str, int]:
    """(host, port) to connect to for an http(s) URL (IPv6 brackets removed)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return host, port


# --- "listening on port N" ------------------------------------------------------------------------

# Where a listening line puts its port: "port 8000" / "port: 8000", or ":8000" after a host, a
# scheme://host, or nothing at all ("Listening on :8080").
_PORT_SPOT = re.compile(
    r"\bport\b[\s:=#\"']*(?P<p1>\d{1,5})(?![\d.:])|:(?P<p2>\d{1,5})(?![\d:.\w])", re.IGNORECASE | re.ASCII
)
# The characters of what may stand before such a colon: a host, [v6], *, or scheme://host.
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-[]:*/")
_HOST_REACH = 64
# What servers say once they listen (express, postgres, gin, echo, next, puma, http.server,
# mongod, mysql, ...), within _PHRASE_REACH characters before the port. A verb counts when a
# preposition follows it within a few words ("started on", "Serving HTTP on", "bound to"), so
# that "Started DB pool (host=127.0.0.1 port=5432)" names somebody else's port, not ours; the
# "... for connections" phrases need none (mysql: "ready for connections. ... port: 3306").
_VERB = re.compile(
    r"\b(?:(?P<connections>(?:accepting|waiting\s+for|ready\s+for)\s+connections)|"
    r"listening|listens|listen|serving|running|started|starting|bound|available|ready|server\s+(?:is\s+)?up)\b",
    re.IGNORECASE,
)
_PREPOSITIONS = frozenset(("on", "at", "to"))
_PHRASE_REACH = 120
_VERB_HINTS = ("listen", "serving", "running", "start", "bound", "available", "connections", "ready", " up")
_IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])", re.ASCII)


def find_listening_port(line: str) -> int | None:
    """The port in a server's "listening" line, or None.

    "Example app listening on port 3000", "Listening on :8080", "Serving HTTP
    on 0.0.0.0 port 8000", "* Listening on tcp://127.0.0.1:3000", 'listening
    on IPv4 address "0.0.0.0", port 5432', "started server on 0.0.0.0:3000".
    A line naming a host that is neither loopback nor a wildcard gives None
    (the server does not answer on loopback), as does a port outside 1-65535.
    """
    low = line.lower()
    if not any(word in low for word in _VERB_HINTS):
        return None
    line = strip_ansi(line)
    for m in _PORT_SPOT.finditer(line):
        port = int(m.group("p1") or m.group("p2"))
        if not 1 <= port <= 65535:
            continue
        if m.group("p2"):
            start = end = m.start()
            while start > 0 and end - start < _HOST_REACH and line[start - 1] in _HOST_CHARS:
                start -= 1
            before = line[start:end]
            if before and not is_local_host(before.rpartition("://")[2]):
                continue  # "listening on 10.0.0.5:3000", or a time of day
        verbs = list(_VERB.finditer(line, max(0, m.start() - _PHRASE_REACH), m.start()))
        if not verbs or not _says_listening(verbs[-1], line[verbs[-1].end() : m.start()]):
            continue
        # The stretch between the last verb and the port is where a host would be named.
        if any(not is_local_host(ip) for ip in _IPV4.findall(line, verbs[-1].end(), m.start())):
            continue  # "listening on 10.0.0.5 port 3000"
        return port
    return None


def _says_listening(verb: re.Match[str], gap: str) -> bool:
    """Whether the verb, followed by gap up to the port, says where the server itself listens."""
    if verb.group("connections") or gap.lstrip().startswith(":"):
        return True
    return any(word.lower().rstrip(",") in _PREPOSITIONS for word in gap.split()[:4])


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
        if self.port is not None and not (not isinstance(self.port, bool) and isinstance(self.port, int)):
            raise TypeError(f"ready port must be an int, not {type(self.port).__name__}")
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
        return ReadySpec(kind="http", url=_check_url(text))
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
        extra["interval"] = _check_seconds(options["interval"], "ready interval", positive=True)
    if "timeout" in options:
        extra["timeout"] = _check_seconds(options["timeout"], "ready timeout", positive=True)
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
        return ReadySpec(kind="http", url=_check_url(arg), status=status, **extra)
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


def _check_url(url: str) -> str:
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


def _check_seconds(value: Any, what: str, positive: bool = False) -> float:
    seconds = check_seconds(value, what)
    if positive and seconds == 0:
        raise ValueError(f"{what} must be more than 0 seconds, got {value!r}")
    return seconds


# --- probes ---------------------------------------------------------------------------------------


_STATUS_LINE = re.compile(rb"^HTTP/\d(?:\.\d)? (\d{3})")


async def http_probe(url: str, expect_status: int | None, timeout: float) -> bool:
    """Whether a GET of url answers expect_status (None: any 2xx or 3xx) within timeout.

    Redirects are not followed (a 3xx is an answer); https certificates are
    not checked (a development server's is usually self-signed). Only the
    status line is read.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a string, not {type(url).__name__}")
    _check_url(url)
    timeout = _check_seconds(timeout, "timeout")
    try:
        return await asyncio.wait_for(_http_status_ok(url, expect_status), timeout)
    except (OSError, asyncio.TimeoutError, ValueError, asyncio.IncompleteReadError, ssl.SSLError):
        return False


async def _http_status_ok(url: str, expect_status: int | None) -> bool:
    parts = urllib.parse.urlsplit(url)
    host, port = _url_target(url)
    context = None
    if parts.scheme == "https":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    reader, writer = await asyncio.open_connection(host, port, ssl=context)
    try:
        target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
        host_header = parts.netloc.rpartition("@")[2]
        writer.write(
            f"GET {target} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: proctree-readiness\r\n"
            "Accept: */*\r\nConnection: close\r\n\r\n".encode("latin-1", "replace")
        )
        await writer.drain()
        status_line = await reader.readline()
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    m = _STATUS_LINE.match(status_line)
    if not m:
        return False
    status = int(m.group(1))
    return 200 <= status < 400 if expect_status is None else status == expect_status


async def exec_probe(
    command: str | Sequence[str],
    timeout: float,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> bool:
    """Whether command exits 0 within timeout.

    It runs as a contained tree (proctree.spawn_async, a string through the
    shell), its output discarded; whatever it started is ended when it exits,
    when the timeout passes, or when the caller is cancelled. A command that
    cannot start is not ready (False).
    """
    from .._containment.spawn import spawn_async  # layer 4; loaded when a probe first runs

    timeout = _check_seconds(timeout, "timeout")
    shell = isinstance(command, str)
    try:
        tree = await spawn_async(
            command if shell else list(command),
            shell=shell,
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            grace=0.0,
        )
    except OSError:
        return False
    ok = False
    try:
        rc = await tree.wait_async(timeout)
        ok = rc == 0
    except subprocess.TimeoutExpired:
        ok = False
    finally:
        # Always, even when cancelled: the probe's tree must not outlive the probe.
        ending = asyncio.ensure_future(tree.terminate_async(grace=0))
        while not ending.done():
            try:
                await asyncio.shield(ending)
            except asyncio.CancelledError:
                if ending.done():
                    break
                continue
        ending.result()
    return ok


# --- the detector ---------------------------------------------------------------------------------


# How much of a line on_line() looks at: readiness lines are short, and a chatty service's
# 16 KiB lines must not cost the supervisor more than their first few KiB.
_LINE_REACH = 4096


# Words that make a URL or port in a line somebody else's: a dev server's proxy target, a
# server it connects to. Such a line proves nothing about the service itself.
_OTHERS = re.compile(
    r"\b(?:prox(?:y|ying|ied)|upstream|forward(?:s|ed|ing)?|connect(?:s|ed|ing)?\s+to|reach(?:ing)?)\b",
    re.IGNORECASE,
)
_MAX_CANDIDATES = 8


def _names_another(line: str, url_start: int) -> bool:
    """Whether line (stripped) presents the URL at url_start as somebody else's ("proxying /api to http://...")."""
    return _OTHERS.search(line, 0, url_start) is not None


class Detector:
    """Readiness of one service run: feed it output lines, and call probe() between them.

    Built from the service's ReadySpec, command, environment and given port;
    self.port is the port it watches (the tcp spec's, else the given one,
    else the command's, else the one its output proved), self.url the URL
    its output proved (or the http spec's). Call preflight() BEFORE the spawn
    (or pass preoccupied): a port that already answers is somebody else's,
    never probed, and no URL or phrase on it counts.

    on_line() returns how readiness was proven ("url", "phrase" or "log") the
    first time a line proves it; probe() runs one round and returns "url" or
    "phrase" (an earlier line's URL or port, now answering), "tcp", "http",
    "exec" or "port" (auto mode's probe of self.port). Both return None once
    ready_by is set. on_line() looks at the first 4096 characters of a line
    and may connect to loopback once (a quick, synchronous check); a line
    naming a proxy target, an upstream or a server it connects to proves nothing.
    """

    def __init__(
        self,
        spec: ReadySpec,
        command: str | Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        preoccupied: bool = False,
        cwd: str | os.PathLike[str] | None = None,
        foreign: Callable[[], Collection[int]] | None = None,
    ) -> None:
        if not isinstance(spec, ReadySpec):
            raise TypeError(f"spec must be a ReadySpec (see parse_ready), not {type(spec).__name__}")
        self.spec = spec
        self.env = env
        self.cwd = cwd
        self._foreign = foreign  # the ports other services hold (asked each time: they change)
        if port is not None:
            if isinstance(port, bool) or not isinstance(port, int):
                raise TypeError(f"port must be an int, not {type(port).__name__}")
            port = check_port(port, "port")
        if spec.kind == "tcp":
            self.port: int | None = spec.port
        elif port is not None:
            self.port = port
        elif spec.kind == "http" and spec.url:
            self.port = _url_target(spec.url)[1]
        elif command is not None:
            self.port = port_from_command(command, env)
        else:
            self.port = None
        self.url: str | None = spec.url if spec.kind == "http" else None
        self.ready_by: str | None = None
        self._taken: int | None = None  # the port somebody else answered on before the spawn
        if preoccupied and self.port is not None:
            self._taken = self.port
        # (host, port) a line named that did not answer yet -> (how, the URL or None); newest last
        self._candidates: dict[tuple[str, int], tuple[str, str | None]] = {}

    @property
    def port_preoccupied(self) -> bool:
        """Whether the service's port answered before it was started (somebody else's server)."""
        return self._taken is not None

    def preflight(self, timeout: float = 0.2) -> bool:
        """Check, before the spawn, whether self.port already answers; if so it is ignored from now on.

        Only a local port is checked: a remote host's (tcp:db.example:5432)
        cannot be the service's own, so it answering proves nothing either way.
        A local port counts as taken when the host the service will be probed
        on answers, or when anything listens on it at any loopback or
        wildcard address (127.0.0.2 too: a URL there would count).
        """
        if self.port is None or self._taken is not None:
            return self._taken is not None
        if self.spec.kind == "tcp":
            host = self.spec.host
        elif self.spec.kind == "http" and self.spec.url:
            host = _url_target(self.spec.url)[0]
        else:
            host = "localhost"
        if is_local_host(host) and (local_listener(self.port) or port_answers(host, self.port, timeout)):
            self._taken = self.port
        return self._taken is not None

    def _trusted(self, port: int) -> bool:
        if port == self._taken:
            return False
        return self._foreign is None or port not in self._foreign()

    def on_line(self, text: str) -> str | None:
        """How this output line proves readiness ("url", "phrase", "log"), or None."""
        if self.ready_by is not None or self.spec.kind == "none":
            return None
        text = text[:_LINE_REACH]
        found = _find_url(text)
        url = None if found is None or _names_another(found[1], found[2]) else found[0]
        if self.spec.kind != "auto":
            if url is not None and self.url is None and self._trusted(_url_target(url)[1]):
                self.url = url  # where the service says it is, for its snapshot; readiness is the spec's
            if self.spec.kind == "log" and self.spec.regex is not None and self.spec.regex.search(strip_ansi(text)):
                return self._ready("log")
            return None
        if url is not None:
            host, port = _url_target(url)
            return self._claim(host, port, "url", url)
        if found is not None:
            return None  # a URL that is somebody else's: the line's port is not the service's either
        said = find_listening_port(text)
        if said is not None:
            return self._claim("localhost", said, "phrase", None)
        return None

    def _claim(self, host: str, port: int, how: str, url: str | None) -> str | None:
        """A line says the service listens on host:port: ready if it answers, else remembered for probe()."""
        if not self._trusted(port):
            return None
        if (host, port) in self._candidates:
            return None  # already known: probe() retries it
        if port_answers(host, port, 0.1):
            return self._proven(port, how, url)
        self._candidates[(host, port)] = (how, url)
        if len(self._candidates) > _MAX_CANDIDATES:  # a service printing many URLs: keep the newest
            del self._candidates[next(iter(self._candidates))]
        return None

    def _proven(self, port: int, how: str, url: str | None) -> str | None:
        self.port = port
        if url is not None:
            self.url = url
        self._candidates.clear()
        return self._ready(how)

    async def probe(self) -> str | None:
        """One probe round; how it proved readiness, or None."""
        if self.ready_by is not None:
            return None
        timeout = self.spec.timeout
        for (host, port), (how, url) in list(self._candidates.items()):
            if host == "localhost":
                answered = await loopback_answers(port, timeout)
            else:
                answered = await tcp_probe(host, port, timeout)
            if answered and self.ready_by is None:
                return self._proven(port, how, url)
        if self.ready_by is not None:  # a line proved it while this round was connecting
            return None
        kind = self.spec.kind
        if kind == "tcp":
            assert self.port is not None
            if self._trusted(self.port) and await tcp_probe(self.spec.host, self.port, timeout):
                return self._ready("tcp")
        elif kind == "http":
            assert self.spec.url is not None
            if self._trusted(_url_target(self.spec.url)[1]):
                if await http_probe(self.spec.url, self.spec.status, timeout):
                    return self._ready("http")
        elif kind == "exec":
            assert self.spec.command is not None
            if await exec_probe(self.spec.command, timeout, self.cwd, self.env):
                return self._ready("exec")
        elif kind == "auto" and self.port is not None and self._trusted(self.port):
            if await loopback_answers(self.port, timeout):
                return self._ready("port")
        return None

    def _ready(self, how: str) -> str | None:
        if self.ready_by is not None:
            return None  # proven already (by a line while a probe ran): reported once
        self.ready_by = how
        return how
