"""What `proctree up` prints: each service's lines under an aligned, coloured name, and its own news.

    10:31:02 web.1    | Serving HTTP on 0.0.0.0 port 5000 (http://0.0.0.0:5000/) ...
    10:31:02 system   | web.1 ready at http://127.0.0.1:5000/ (url in its output)

Colours are on only for a terminal and never with NO_COLOR set (no-color.org)
or TERM=dumb; otherwise the prefix is plain text and a service's own colours
are stripped, so a log file or a pipe gets no escape sequences. Under --json
each event is one JSON object per line instead.

Pure formatting: snapshots and rows in, strings out. Must never write to a
stream or touch a process (up.py does both).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

SYSTEM = "system"
# foreman's order: cyan, yellow, green, magenta, red, blue, then their bright forms.
PALETTE = ("36", "33", "32", "35", "31", "34", "96", "93", "92", "95", "91", "94")
RESET = "\x1b[0m"
BOLD = "1"

# How readiness was proven, in words.
READY_BY = {
    "url": "url in its output",
    "phrase": "a listening line in its output",
    "log": "its ready pattern",
    "tcp": "port answers",
    "port": "its port answers",
    "http": "http probe",
    "exec": "ready command",
}


def colour_wanted(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Colour for a terminal only, unless NO_COLOR is set (to anything but "") or TERM is dumb."""
    environ = os.environ if environ is None else environ
    if environ.get("NO_COLOR", "") != "" or environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def exit_status(snapshot: Any) -> int:
    """The shell's status for how a service ended: its code, 128 + N for signal N, 1 when it never ran."""
    if snapshot.exit_code is not None:
        return int(snapshot.exit_code)
    if snapshot.exit_signal:
        try:
            return 128 + int(signal.Signals[snapshot.exit_signal])
        except KeyError:
            return 1
    return 1


def how_it_ended(snapshot: Any) -> str:
    """`exited with code 3`, `was killed by SIGKILL`, ..."""
    if snapshot.exit_code is not None:
        return f"exited with code {snapshot.exit_code}"
    if snapshot.exit_signal:
        return f"was ended by {snapshot.exit_signal}"
    return "ended"


class View:
    """Formats lines for a fixed set of service names (the prefix width is the longest name's)."""

    def __init__(self, names: Sequence[str], *, colour: bool, timestamps: bool = True, prefix: bool = True) -> None:
        self.colour = colour
        self.timestamps = timestamps
        self.prefix = prefix  # False: honcho's --no-prefix, the bare line (no time, no name)
        self.width = max([len(SYSTEM), *map(len, names)])
        self._colour_of = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}

    def _paint(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}{RESET}" if self.colour else text

    def _prefix(self, name: str, code: str, at: float | None) -> str:
        if not self.prefix:
            return ""
        stamp = (
            time.strftime("%H:%M:%S ", time.localtime(at if at is not None else time.time())) if self.timestamps else ""
        )
        return self._paint(code, f"{stamp}{name.ljust(self.width)} |") + " "

    def output(self, name: str, row: Any) -> str:
        """One row of a service's output, prefixed; its own colours kept on a terminal only."""
        body = row.raw if self.colour else row.text
        return self._prefix(name, self._colour_of.get(name, "0"), row.at) + printable_line(body, keep_sgr=self.colour)

    def system(self, text: str, at: float | None = None) -> str:
        """One line of up's own news."""
        return self._prefix(SYSTEM, BOLD, at) + printable_line(text, keep_sgr=False)

    def event(self, event: Any) -> list[str]:
        """The lines for one supervisor event (output rows, or news)."""
        s = event.snapshot
        if event.kind == "output":
            lines = []
            if event.dropped:
                lines.append(
                    self.system(f"{s.name}: {event.dropped} lines skipped (printed faster than they could be shown)")
                )
            return lines + [self.output(s.name, row) for row in event.rows]
        text = news(event)
        return [self.system(text, event.at)] if text else []


def news(event: Any) -> str | None:
    """The one-line story of a non-output event, or None for one that says nothing new."""
    s = event.snapshot
    kind = event.kind
    if kind == "started":
        taken = (
            f"; port {s.port} already answers (another process?), so it cannot prove it ready"
            if s.port_preoccupied
            else ""
        )
        if s.restarts:
            return f"{s.name} started again (pid={s.pid}, restart {s.restarts}){taken}"
        return f"{s.name} started (pid={s.pid}){taken}"  # honcho's words, which its users' scripts grep for
    if kind == "ready":
        where = f" at {s.url}" if s.url else (f" on port {s.port}" if s.port else "")
        by = READY_BY.get(s.ready_by or "", s.ready_by or "")
        return f"{s.name} ready{where}" + (f" ({by})" if by else "")
    if kind == "running":
        busy = f"; port {s.port} was already taken by another process" if s.port_preoccupied else ""
        return f"{s.name} running (nothing proved it ready yet{busy})"
    if kind == "restarting":
        return f"{s.name} {how_it_ended(s)}; restarting"
    if kind == "crash-loop":
        return f"{s.name} keeps crashing: giving up after {s.restarts} restarts"
    if kind == "exited":
        return f"{s.name} {how_it_ended(s)}"
    if kind == "failed":
        return f"{s.name} failed: {s.reason or how_it_ended(s)}"
    if kind == "stopped":
        return None  # told once for all, in the closing lines
    return f"{s.name}: {kind}"


def sending_lines(running: Iterable[Any], stop_signal_of: Mapping[str, int | None]) -> list[str]:
    """honcho's `sending SIGTERM to web.1 (pid 42)`: one line per instance with a process, as the stop begins.

    stop_signal_of: each instance's stop signal (None: SIGTERM). The signal goes to the instance's whole
    tree; the pid named is its command's, the one its `started` line gave.
    """
    lines = []
    for s in running:
        if s.live and s.pid:
            sig = stop_signal_of.get(s.name) or signal.SIGTERM
            lines.append(f"sending {signal.Signals(sig).name} to {s.name} (pid {s.pid})")
    return lines


def closing_lines(stopped: Iterable[Any]) -> list[str]:
    """What up says once it has stopped everything: what it stopped (if anything), and whether anything is left."""
    stopped = list(stopped)
    names = [s.name for s in stopped if s.status == "stopped"]
    lines = [f"stopped {', '.join(names)}"] if names else []
    incomplete = [s.name for s in stopped if s.kill_incomplete]
    if incomplete:
        lines.append(f"could not confirm that everything of {', '.join(incomplete)} is gone")
    else:
        lines.append("nothing left running")
    return lines


def json_line(document: Mapping[str, Any]) -> str:
    """One JSON object on one line (non-ASCII kept; lone surrogates escaped so it always encodes)."""
    return json.dumps(document, ensure_ascii=False, default=str).encode("utf-8", "backslashreplace").decode("utf-8")


def printable_line(text: str, *, keep_sgr: bool) -> str:
    """text safe for a terminal: control characters escaped (tabs kept), and ANSI colour
    sequences kept when asked. Backslashes stay as they are: this is a service's own text."""
    if keep_sgr and "\x1b" in text:
        return "".join(p if _SGR.fullmatch(p) else _safe(p) for p in _SGR_SPLIT.split(text) if p)
    return _safe(text)


def _safe(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == "\t" else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


_SGR = re.compile(r"\x1b\[[0-9;]*m")
_SGR_SPLIT = re.compile(r"(\x1b\[[0-9;]*m)")
