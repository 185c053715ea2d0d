"""The native keeper's protocol constants agree with proctree/_containment/protocol.py.

protocol.py is the one source of truth; the C keeper (csrc/keeper/) spells the
same values out by hand. These tests read the C source text and compare, so a
change on one side that the other lacks fails here, without building or
running anything.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from proctree._containment import protocol

KEEPER_DIR = Path(__file__).resolve().parent.parent / "csrc" / "keeper"

pytestmark = pytest.mark.skipif(not KEEPER_DIR.is_dir(), reason="the C sources are not here (an installed wheel)")


def c_text() -> str:
    """Every keeper source and header, concatenated."""
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(KEEPER_DIR.glob("*.[ch]")))


def one(pattern: str, text: str | None = None) -> re.Match[str]:
    """The single match of pattern in the keeper's sources (more or fewer is a test failure)."""
    found = list(re.finditer(pattern, c_text() if text is None else text, re.S))
    assert len(found) == 1, f"expected one match of {pattern!r} in csrc/keeper, found {len(found)}"
    return found[0]


def signals(names: str) -> tuple[int, ...]:
    """The signal numbers of C names such as "SIGHUP, SIGINT" (this platform's numbers, as protocol.py's)."""
    return tuple(int(getattr(signal, n)) for n in re.findall(r"\bSIG[A-Z0-9]+\b", names))


def function_body(name: str) -> str:
    """The body of the C function name (from its opening line to the first closing brace in column 0)."""
    head = r"\n[a-z][^\n;]*\b" + re.escape(name) + r"\([^)]*\)\n\{\n(.*?)\n\}\n"
    return one(head).group(1)


def test_protocol_version():
    assert int(one(r'strcmp\(a\[0\], "v(\d+)"\)').group(1)) == protocol.PROTOCOL_VERSION
    assert int(one(r"is not the supported (\d+)").group(1)) == protocol.PROTOCOL_VERSION


def test_fields_before_the_separator():
    assert int(one(r"#define FIXED\s+(\d+)").group(1)) == protocol._FIXED


def test_modes_in_order():
    body = function_body("parse_args")
    assert tuple(re.findall(r'strcmp\(a\[2\], "(\w+)"\)', body)) == protocol.MODES


def test_hold_signal():
    assert signals(one(r"#define HOLD_SIG\s+(SIG\w+)").group(1)) == (protocol.HOLD_SIGNAL,)


def test_forwarded_signals_in_order():
    listed = one(r"FORWARD\[NFORWARD\] = \{([^}]*)\}").group(1)
    assert signals(listed) == protocol.FORWARD
    assert int(one(r"#define NFORWARD\s+(\d+)").group(1)) == len(protocol.FORWARD)


def test_stopping_signals():
    # stopping(): the command's own stop signal, or one of protocol.STOPPING.
    body = function_body("stopping")
    assert "K.stop_sig" in body
    assert set(signals(body)) == set(protocol.STOPPING)


def test_refused_stop_signals():
    body = function_body("parse_args")
    refused = one(r"v == 0 \|\| ([^)]*)\)\s*return refuse\(\"stop_signal", body).group(1)
    assert set(signals(refused)) == set(protocol._NOT_STOP)


def status_formats() -> list[str]:
    """Every status line format the keeper writes: say()'s and say_stopped()'s format strings."""
    return re.findall(r'\bsay\("([^"]*)"', c_text())


def sample_line(fmt: str) -> str:
    """fmt with its conversions filled in with values the protocol accepts."""
    kind = fmt.split()[0]
    line = fmt.replace("%llu", "123456789")
    if kind == "done":
        return line.replace("%d", "1")
    if kind == "err":
        return line.replace("%d", "2", 1).replace("%s", protocol.STAGES[0])
    if kind == "stopped":
        return line.replace("%d", str(int(signal.SIGTSTP)))
    return line.replace("%d", "42")


def test_status_words():
    python = {
        line.split()[0]
        for line in (
            protocol.ok_line(42, 1),
            protocol.err_line(2, "exec"),
            protocol.stopped_line(int(signal.SIGTSTP)),
            protocol.exit_line(0),
            protocol.done_line(True),
            protocol.held_line(),
            protocol.sweep_line(),
        )
    }
    c = {fmt.split()[0] for fmt in status_formats()}
    assert c == python == {"ok", "err", "stopped", "exit", "done", "held", "sweep"}


def test_every_status_format_parses():
    for fmt in status_formats():
        line = sample_line(fmt)
        assert protocol.parse_status(line) is not None, line
        # Each field the C format writes is one the Python parser reads: the same count of words.
        assert len(fmt.split()) == len(line.split())


def test_err_stages():
    text = c_text()
    literal = set(re.findall(r'say\("err %d (\w+)"', text))
    assigned = set()
    for rhs in re.findall(r"\*stage = ([^;]+);", text):
        assigned.update(re.findall(r'"(\w+)"', rhs))
    assigned.update(re.findall(r'const char \*stage = "(\w+)"', text))
    assert literal | assigned, "no err stages found in csrc/keeper"
    assert literal | assigned <= set(protocol.STAGES)
