"""The Detector: one service run's readiness, from its output lines and probe rounds.

on_line() only reads text (a log pattern may prove readiness there); a URL
or "listening" phrase becomes a candidate that the next probe() round
confirms. probe() is asyncio through and through: which sockets the tree
holds is read in a worker thread, connects are the loop's own. Nothing a
service prints can make the caller wait: a line costs a few regex searches.
This module never signals anything but an exec probe's own tree.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Collection, Mapping, Sequence

from ..._validate import check_port
from ..logring import strip_ansi
from ..ports import (
    is_local_host,
    local_listener,
    loopback_answers,
    port_answers,
    port_from_command,
    tcp_probe,
)
from ..sockets import owned_ports
from .probes import exec_probe, http_probe
from .scan import find_listening_port, find_url_at, names_another, url_target
from .spec import ReadySpec

__all__ = ["Detector"]

# How much of a line on_line() looks at: readiness lines are short, and a chatty service's
# 16 KiB lines must not cost the supervisor more than their first few KiB.
_LINE_REACH = 4096
_MAX_CANDIDATES = 8
# A line naming a new port wakes the watcher, but probe rounds stay this far apart (seconds):
# a service naming a new port on every line costs a few rounds a second, not one per line.
_MIN_ROUND_GAP = 0.02


class Detector:
    """Readiness of one service run: feed it output lines, and call probe() between them.

    Built from the service's ReadySpec, command, environment and given port;
    self.port is the port it watches (the tcp spec's, else the given one,
    else the command's, else the one its output proved), self.url the URL
    its output proved (or the http spec's). Call preflight() BEFORE the spawn
    (or pass preoccupied), from a worker thread: a port that already answers
    is somebody else's, never probed, and no URL or phrase on it counts.

    members, once set (a blocking callable giving the pids of the service's
    tree, called from a worker thread), makes a local port count only when a
    member holds the socket listening on it (see sockets.owned_ports): a
    stranger's server on the port, started before or after ours, never
    proves anything. Without it (or where the platform cannot tell), a port
    counts when it answers.

    on_line() returns "log" the first time a line matches a log spec, else
    None: a URL or "listening" phrase only becomes a candidate. probe() runs
    one round and returns "url" or "phrase" (a line's URL or port, now the
    tree's and answering), "tcp", "http", "exec" or "port" (auto mode's
    probe of self.port). Both return None once ready_by is set. pause()
    waits between rounds and ends early when a line names a new candidate.
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
        members: Callable[[], Collection[int]] | None = None,
    ) -> None:
        if not isinstance(spec, ReadySpec):
            raise TypeError(f"spec must be a ReadySpec (see parse_ready), not {type(spec).__name__}")
        self.spec = spec
        self.env = env
        self.cwd = cwd
        self.members = members
        self._foreign = foreign  # the ports other services hold (asked each time: they change)
        if port is not None:
            port = check_port(port, "port")
        if spec.kind == "tcp":
            self.port: int | None = spec.port
        elif port is not None:
            self.port = port
        elif spec.kind == "http" and spec.url:
            self.port = url_target(spec.url)[1]
        elif command is not None:
            self.port = port_from_command(command, env)
        else:
            self.port = None
        self.url: str | None = spec.url if spec.kind == "http" else None
        self.ready_by: str | None = None
        self._taken: int | None = None  # the port somebody else answered on before the spawn
        if preoccupied and self.port is not None:
            self._taken = self.port
        # (host, port) a line named, not proven yet -> (how, the URL or None); newest last
        self._candidates: dict[tuple[str, int], tuple[str, str | None]] = {}
        self._news: asyncio.Event | None = None
        self._last_round = 0.0

    @property
    def port_preoccupied(self) -> bool:
        """Whether the service's port answered before it was started (somebody else's server)."""
        return self._taken is not None

    def preflight(self, timeout: float = 0.2) -> bool:
        """Check, before the spawn, whether self.port already answers; if so it is ignored from now on.

        Blocking (it reads the socket tables and connects): call it from a
        worker thread. Only a local port is checked: a remote host's
        (tcp:db.example:5432) cannot be the service's own. A local port
        counts as taken when the host the service will be probed on answers,
        or when anything listens on it at any loopback or wildcard address.
        """
        if self.port is None or self._taken is not None:
            return self._taken is not None
        host = self._probe_host()
        if is_local_host(host) and (local_listener(self.port) or port_answers(host, self.port, timeout)):
            self._taken = self.port
        return self._taken is not None

    def _probe_host(self) -> str:
        if self.spec.kind == "tcp":
            return self.spec.host
        if self.spec.kind == "http" and self.spec.url:
            return url_target(self.spec.url)[0]
        return "localhost"

    def _trusted(self, port: int) -> bool:
        if port == self._taken:
            return False
        return self._foreign is None or port not in self._foreign()

    # -- output lines ---------------------------------------------------------------------------

    def on_line(self, text: str) -> str | None:
        """ "log" when this output line proves readiness by the log spec; else None (it may name a candidate)."""
        if self.ready_by is not None or self.spec.kind == "none":
            return None
        text = text[:_LINE_REACH]
        found = find_url_at(text)
        url = None if found is None or names_another(found[1], found[2]) else found[0]
        if self.spec.kind != "auto":
            if url is not None and self.url is None and self._trusted(url_target(url)[1]):
                self.url = url  # where the service says it is, for its snapshot; readiness is the spec's
            if self.spec.kind == "log" and self.spec.regex is not None:
                if self.spec.regex.search(strip_ansi(text)):
                    return self._ready("log")
            return None
        if url is not None:
            host, port = url_target(url)
            self._claim(host, port, "url", url)
        elif found is None:  # a URL that is somebody else's: the line's port is not the service's either
            said = find_listening_port(text)
            if said is not None:
                self._claim("localhost", said, "phrase", None)
        return None

    def _claim(self, host: str, port: int, how: str, url: str | None) -> None:
        """A line says the service listens on host:port: the next probe round confirms it."""
        if (host, port) in self._candidates or not self._trusted(port):
            return
        self._candidates[(host, port)] = (how, url)
        if len(self._candidates) > _MAX_CANDIDATES:  # a service printing many URLs: keep the newest
            del self._candidates[next(iter(self._candidates))]
        if self._news is not None:
            self._news.set()

    async def pause(self, seconds: float) -> None:
        """Wait up to seconds before the next round; sooner (but not at once) when a line names a new candidate."""
        loop = asyncio.get_running_loop()
        if self._news is None:
            self._news = asyncio.Event()
        gap = _MIN_ROUND_GAP - (loop.time() - self._last_round)
        if gap > 0:
            await asyncio.sleep(min(gap, seconds))
            seconds -= gap
        if self._news.is_set() or seconds <= 0:
            self._news.clear()
            return
        try:
            await asyncio.wait_for(self._news.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        self._news.clear()

    # -- probe rounds ---------------------------------------------------------------------------

    async def probe(self) -> str | None:
        """One probe round; how it proved readiness, or None."""
        if self.ready_by is not None:
            return None
        self._last_round = asyncio.get_running_loop().time()
        if self._news is not None:
            self._news.clear()
        timeout = self.spec.timeout
        candidates = list(self._candidates.items())
        own_port = self.port if self.spec.kind in ("tcp", "http", "auto") else None
        local = {port for (host, port), _ in candidates if is_local_host(host)}
        if own_port is not None and is_local_host(self._probe_host()):
            local.add(own_port)
        owned = await self._owned(local)

        def mine(host: str, port: int) -> bool:
            return owned is None or not is_local_host(host) or port in owned

        for (host, port), (how, url) in candidates:
            if not mine(host, port):
                continue  # nobody of the tree listens there (yet): no connect, nothing to wait for
            if host == "localhost":
                answered = await loopback_answers(port, timeout)
            else:
                answered = await tcp_probe(host, port, timeout)
            if answered and self.ready_by is None:
                return self._proven(port, how, url)
        if self.ready_by is not None:  # a line proved it while this round was connecting
            return None
        return await self._probe_spec(mine)

    async def _probe_spec(self, mine: Callable[[str, int], bool]) -> str | None:
        kind = self.spec.kind
        timeout = self.spec.timeout
        if kind == "tcp":
            assert self.port is not None
            host = self.spec.host
            if self._trusted(self.port) and mine(host, self.port) and await tcp_probe(host, self.port, timeout):
                return self._ready("tcp")
        elif kind == "http":
            assert self.spec.url is not None
            host, port = url_target(self.spec.url)
            if self._trusted(port) and mine(host, port):
                if await http_probe(self.spec.url, self.spec.status, timeout):
                    return self._ready("http")
        elif kind == "exec":
            assert self.spec.command is not None
            if await exec_probe(self.spec.command, timeout, self.cwd, self.env):
                return self._ready("exec")
        elif kind == "auto" and self.port is not None and self._trusted(self.port) and mine("localhost", self.port):
            if await loopback_answers(self.port, timeout):
                return self._ready("port")
        return None

    async def _owned(self, ports: set[int]) -> set[int] | None:
        """Which of ports the tree listens on (read in a worker thread); None when that cannot be known."""
        members = self.members
        if members is None or not ports:
            return None

        def read() -> set[int] | None:
            try:
                pids = list(members())
            except Exception:  # the tree is gone or unreadable: none of the ports is proven its own
                return set()
            return owned_ports(ports, pids)

        return await asyncio.to_thread(read)

    def _proven(self, port: int, how: str, url: str | None) -> str | None:
        self.port = port
        if url is not None:
            self.url = url
        self._candidates.clear()
        return self._ready(how)

    def _ready(self, how: str) -> str | None:
        if self.ready_by is not None:
            return None  # proven already (by a line while a probe ran): reported once
        self.ready_by = how
        return how
