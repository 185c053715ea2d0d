"""The port a service listens on: read from its command line, and whether something answers there.

Pure parsing of command lines (port_from_command) and quick looks at a
port: port_answers and local_listener before a spawn (blocking: called from
a worker thread), tcp_probe while waiting for readiness (asyncio). They
connect and close at once: this module never sends data, and never signals
or starts anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import re
import shlex
import socket
from collections.abc import Mapping, Sequence

from .._validate import check_port, check_seconds, port_from_text
from .sockets import listeners, local_hex_address

__all__ = [
    "is_local_host",
    "local_listener",
    "loopback_answers",
    "port_answers",
    "port_from_command",
    "tcp_probe",
]

# --- hosts a server answers on loopback for ---------------------------------------------------

_LOCAL_NAMES = frozenset(("", "*", "::", "::1", "localhost", "0.0.0.0"))
_DOTTED = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}", re.ASCII)


def is_local_host(host: str) -> bool:
    """Whether a printed host is loopback, a wildcard or localhost (the server answers on loopback)."""
    host = host.strip("[]").lower()
    if host in _LOCAL_NAMES:
        return True
    if not (_DOTTED.fullmatch(host) or "::" in host or host.count(":") == 7):
        return False  # a name, or not an address at all (a time of day): quickly, as this runs per line
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


# --- the port a command will listen on ---------------------------------------------------------

_PORT_FLAGS = ("--port", "-p", "-P", "--http-port", "--listen-port", "--server-port", "--server.port")
_BIND_FLAGS = ("--bind", "-b", "--listen", "--host", "--addr", "--address", "--dev-addr", "-addr", "-listen", "-http")
_SHELL_OPERATORS = frozenset(("&&", "||", ";", "|", "&", ";;", "(", ")", "|&"))
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HOST_PORT = re.compile(
    r"^(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:.]*\]|\*|)?:(\d{1,5})$", re.IGNORECASE | re.ASCII
)
_DOCKER_PUBLISH = re.compile(r"^(?:[\d.]+:)?(\d{1,5}):\d{1,5}(?:/\w+)?$", re.ASCII)
_VAR = re.compile(r"^\$(?:\{(\w+)\}|(\w+))$")


def _port_number(text: str, env: Mapping[str, str]) -> int | None:
    """text as a port number (digits, or $VAR / ${VAR} looked up in env), or None."""
    var = _VAR.match(text)
    if var:
        text = env.get(var.group(1) or var.group(2), "")
    return port_from_text(text.strip())


# A port flag or a quoted command line is short: longer words (a script passed to python -c) are
# not searched, and a long command line only for its start, so reading it costs the caller little.
_MAX_WORD = 4096
_MAX_COMMAND = 16384


def _split_command(command: str | Sequence[str]) -> list[str]:
    """The words of a command line, shell operators (&&, ;, |, ...) as words of their own (long words left out)."""
    return [word for word in _all_words(command) if len(word) <= _MAX_WORD]


def _all_words(command: str | Sequence[str]) -> list[str]:
    if isinstance(command, str):
        command = command[:_MAX_COMMAND]
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            return list(lexer)
        except ValueError:  # an unbalanced quote: still look at the words
            return command.split()
    return [str(word) for word in command]


def port_from_command(command: str | Sequence[str], env: Mapping[str, str] | None = None) -> int | None:
    """The port a command line says its server will listen on, or None.

    In order: a flag (--port N, --port=N, -p N, -pN, -p HOST:N:M as docker
    publishes), a bind address (--bind/-b/--listen HOST:N, a HOST:N or :N
    word, runserver's or http.server's port argument), the same inside a
    quoted command (sh -c '...'), then PORT: set by a PORT=N assignment
    before a command (cd web && PORT=3000 npm start), or in env. $PORT and
    ${PORT} are looked up in the assignments and env.
    """
    if not isinstance(command, str) and not (isinstance(command, Sequence) and not isinstance(command, bytes)):
        raise TypeError(f"command must be a string or an argv list, not {type(command).__name__}")
    env = dict(env or {})
    found = _port_in(command, env, depth=0)
    return found if found is not None else _port_number(env.get("PORT", ""), env)


def _port_in(command: str | Sequence[str], env: dict[str, str], depth: int) -> int | None:
    """port_from_command() without the final look at PORT; env gets the command's assignments."""
    words = _split_command(command)
    at_start = True
    for word in words:  # VAR=value words before a program (shell-style): they set its environment
        if word in _SHELL_OPERATORS:
            at_start = True
        elif at_start and _ASSIGNMENT.match(word):
            name, _, value = word.partition("=")
            env[name] = value
        else:
            at_start = False
    found = _port_from_flags(words, env)
    if found is not None:
        return found
    for i, word in enumerate(words):
        m = _HOST_PORT.match(word)
        if m and not (i > 0 and words[i - 1] in ("-e", "--env")):
            port = _port_number(m.group(1), env)
            if port is not None:
                return port
        if word in ("runserver", "http.server", "SimpleHTTPServer"):
            port = _positional_port(words[i + 1 :], env)
            if port is not None:
                return port
    if depth < 2:
        for word in words:
            if " " in word.strip():  # a command in quotes: sh -c 'uvicorn app --port 8000'
                port = _port_in(word, env, depth + 1)
                if port is not None:
                    return port
    return None


_VALUE_OPTIONS = {"--bind", "-b", "--directory", "-d", "--protocol", "--settings", "--pythonpath"}


def _positional_port(args: list[str], env: Mapping[str, str]) -> int | None:
    """The port argument of `runserver [ADDR:]PORT` or `http.server [options] PORT`, or None."""
    for i, arg in enumerate(args):
        if arg in _SHELL_OPERATORS:
            break
        if arg.startswith("-") or (i > 0 and args[i - 1] in _VALUE_OPTIONS):
            continue
        return _port_number(arg.rpartition(":")[2], env)  # 8000 or 0.0.0.0:8000
    return None


def _port_from_flags(words: list[str], env: Mapping[str, str]) -> int | None:
    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else ""
        name, eq, value = word.partition("=")
        if name in _PORT_FLAGS or name in _BIND_FLAGS:
            value = value if eq else following
        elif word.startswith("-p") and len(word) > 2 and word[2:].isascii() and word[2:].isdigit():
            value = word[2:]
        else:
            continue
        port = _port_number(value, env)
        if port is None and name in ("-p",):
            published = _DOCKER_PUBLISH.match(value)
            port = _port_number(published.group(1), env) if published else None
        if port is None and name in _BIND_FLAGS:
            host_port = value.rpartition(":")
            port = _port_number(host_port[2], env) if host_port[1] else None
        if port is not None:
            return port
    return None


# --- looking at a port --------------------------------------------------------------------------


def _check_target(host: object, port: object, timeout: object) -> float:
    """TypeError / ValueError for a probe's bad host, port or timeout; the timeout as a float."""
    if not isinstance(host, str):
        raise TypeError(f"host must be a string, not {type(host).__name__}")
    if isinstance(port, bool) or not isinstance(port, int):
        raise TypeError(f"port must be an int, not {type(port).__name__}")
    check_port(port, "port")
    return check_seconds(timeout, "timeout")


async def tcp_probe(host: str, port: int, timeout: float) -> bool:
    """Whether host:port accepts a TCP connection within timeout (the connection is closed at once)."""
    timeout = _check_target(host, port, timeout)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), port), timeout)
    except (OSError, asyncio.TimeoutError, ValueError):
        return False
    writer.close()
    with contextlib.suppress(OSError, asyncio.TimeoutError):
        await asyncio.wait_for(writer.wait_closed(), timeout)
    return True


def port_answers(host: str, port: int, timeout: float = 0.2) -> bool:
    """Whether something accepts TCP connections on host:port right now (the pre-flight check).

    Every address host resolves to is tried, so a server on either of
    localhost's (127.0.0.1, ::1) counts. Synchronous and quick: a loopback
    connect answers at once, and timeout bounds the rest. "localhost" is not
    looked up (a resolver that asks DNS could block the caller for seconds).
    """
    timeout = _check_target(host, port, timeout)
    names = ("127.0.0.1", "::1") if host.lower() == "localhost" else (host.strip("[]"),)
    infos = []
    for name in names:
        try:
            infos += socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            continue
    for family, kind, proto, _, address in infos:
        with contextlib.suppress(OSError), socket.socket(family, kind, proto) as sock:
            sock.settimeout(timeout)
            if sock.connect_ex(address) == 0:
                return True
    return False


def local_listener(port: int) -> bool:
    """Whether a socket of this network namespace listens on port at a loopback or wildcard address.

    Reads /proc/net/tcp and tcp6 (the kernel's own table, no connect): it
    finds a server on any of 127.0.0.0/8 (127.0.0.2 as well as 127.0.0.1),
    ::1 or a wildcard, which a connect to 127.0.0.1 and ::1 alone would
    miss. False where the tables cannot be read. It reads files: never on an
    event loop.
    """
    check_port(port, "port")
    return bool(listeners((port,)))


_local_hex_address = local_hex_address  # the tests' name for it


async def loopback_answers(port: int, timeout: float) -> bool:
    """Whether port answers on 127.0.0.1 or ::1 (a server may listen on either only)."""
    if await tcp_probe("127.0.0.1", port, timeout):
        return True
    return await tcp_probe("::1", port, timeout)
