"""The readiness probes that touch the network or run a command: an HTTP GET, and an exec command.

asyncio only: nothing here blocks the event loop (names are resolved by the
loop's executor). exec_probe starts a contained tree that is always ended:
a probe never leaks, and this module never signals anything but that tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import ssl
import subprocess
import urllib.parse
from collections.abc import Mapping, Sequence

from .scan import url_target
from .spec import check_url, positive_seconds

__all__ = ["exec_probe", "http_probe"]


_STATUS_LINE = re.compile(rb"^HTTP/\d(?:\.\d)? (\d{3})")


async def http_probe(url: str, expect_status: int | None, timeout: float) -> bool:
    """Whether a GET of url answers expect_status (None: any 2xx or 3xx) within timeout.

    Redirects are not followed (a 3xx is an answer); https certificates are
    not checked (a development server's is usually self-signed). Only the
    status line is read.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a string, not {type(url).__name__}")
    check_url(url)
    timeout = positive_seconds(timeout, "timeout")
    try:
        return await asyncio.wait_for(_http_status_ok(url, expect_status), timeout)
    except (OSError, asyncio.TimeoutError, ValueError, asyncio.IncompleteReadError, ssl.SSLError):
        return False


async def _http_status_ok(url: str, expect_status: int | None) -> bool:
    parts = urllib.parse.urlsplit(url)
    host, port = url_target(url)
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
    from ..treerun import always_ended, spawn_command  # it loads spawning (layer 4): only when a probe first runs

    timeout = positive_seconds(timeout, "timeout")
    try:
        tree = await spawn_command(
            command,
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            grace=0.0,
        )
    except OSError:
        return False
    async with always_ended(tree):
        try:
            ok = await tree.wait_async(timeout) == 0
        except subprocess.TimeoutExpired:
            ok = False
        await tree.terminate_async(grace=0)  # whatever the command left behind ends with the probe
    return ok
