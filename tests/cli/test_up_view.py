"""What `proctree up` prints, on synthetic snapshots and rows: prefixes, colours, news lines, JSON.

Pure formatting (proctree/cli/_upview.py); the real runs are in test_up.py.
"""

import io
import json
import os

import pytest

from proctree._supervisor.logring import Row
from proctree._supervisor.snapshot import ServiceSnapshot
from proctree.cli import _upview
from proctree.cli._upview import View


def snap(**fields):
    base = {"id": "s1", "name": "web.1", "command": "serve", "status": "ready", "pid": 42}
    base.update(fields)
    return ServiceSnapshot(**base)


class Event:
    """The shape of proctree's ServiceEvent, for formatting only."""

    def __init__(self, kind, snapshot, rows=(), dropped=0, at=0.0):
        self.kind, self.snapshot, self.rows, self.dropped, self.at = kind, snapshot, rows, dropped, at


def row(text, raw=None, at=0.0):
    return Row(seq=1, at=at, text=text, raw=raw if raw is not None else text)


class Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize(
    "stream, environ, expected",
    [
        (Tty(), {}, True),
        (Tty(), {"NO_COLOR": "1"}, False),
        (Tty(), {"NO_COLOR": ""}, True),  # no-color.org: present and not empty
        (Tty(), {"TERM": "dumb"}, False),
        (io.StringIO(), {}, False),
    ],
)
def test_colour_wanted(stream, environ, expected):
    assert _upview.colour_wanted(stream, environ) is expected


def test_colour_wanted_closed_stream():
    s = io.StringIO()
    s.close()
    assert _upview.colour_wanted(s, {}) is False


def test_plain_prefix_is_aligned_and_has_no_escapes():
    view = View(["web.1", "worker.10"], colour=False, timestamps=False)
    lines = [view.output("web.1", row("hello")), view.output("worker.10", row("x")), view.system("news")]
    assert lines == ["web.1     | hello", "worker.10 | x", "system    | news"]


def test_short_names_align_on_system():
    view = View(["a"], colour=False, timestamps=False)
    assert view.output("a", row("x")) == "a      | x"


def test_timestamp_from_the_row():
    view = View(["web.1"], colour=False, timestamps=True)
    line = view.output("web.1", row("x", at=0.0))
    assert line.endswith(" web.1  | x") and len(line.split(" ")[0]) == 8  # HH:MM:SS


def test_colour_prefix_and_service_colours_kept():
    view = View(["web.1", "worker.1"], colour=True, timestamps=False)
    line = view.output("worker.1", row("plain red", raw="plain \x1b[31mred\x1b[0m"))
    assert line == "\x1b[33mworker.1 |\x1b[0m plain \x1b[31mred\x1b[0m"
    assert view.output("web.1", row("x")).startswith("\x1b[36m")
    assert view.system("n").startswith("\x1b[1msystem")


def test_plain_uses_the_stripped_text():
    view = View(["web.1"], colour=False, timestamps=False)
    assert view.output("web.1", row("red", raw="\x1b[31mred\x1b[0m")) == "web.1  | red"


@pytest.mark.parametrize(
    "text, colour, expected",
    [
        ("a\tb", False, "a\tb"),
        ("C:\\path", False, "C:\\path"),
        ("bell\x07", False, "bell\\x07"),
        ("bidi\u202e", False, "bidi\\u202e"),
        ("\x1b[2J", False, "\\x1b[2J"),
        ("\x1b[31mr\x1b[0m", True, "\x1b[31mr\x1b[0m"),
        ("\x1b[31mr\x1b]0;title\x07", True, "\x1b[31mr\\x1b]0;title\\x07"),
    ],
)
def test_printable_line(text, colour, expected):
    assert _upview.printable_line(text, keep_sgr=colour) == expected


@pytest.mark.parametrize(
    "fields, status, words",
    [
        ({"exit_code": 0}, 0, "exited with code 0"),
        ({"exit_code": 3}, 3, "exited with code 3"),
        ({"exit_signal": "SIGKILL"}, 137, "was ended by SIGKILL"),
        ({"exit_signal": "SIGTERM"}, 143, "was ended by SIGTERM"),
        ({"exit_signal": "SIGNOPE"}, 1, "was ended by SIGNOPE"),
        ({}, 1, "ended"),
    ],
)
def test_exit_status(fields, status, words):
    s = snap(**fields)
    assert _upview.exit_status(s) == status
    assert _upview.how_it_ended(s) == words


@pytest.mark.parametrize(
    "kind, fields, expected",
    [
        ("started", {}, "web.1 started (pid=42)"),
        ("started", {"restarts": 2}, "web.1 started again (pid=42, restart 2)"),
        (
            "started",
            {"port": 5000, "port_preoccupied": True},
            "web.1 started (pid=42); port 5000 already answers (another process?), so it cannot prove it ready",
        ),
        (
            "ready",
            {"url": "http://127.0.0.1:5000/", "ready_by": "url"},
            "web.1 ready at http://127.0.0.1:5000/ (url in its output)",
        ),
        ("ready", {"port": 5000, "ready_by": "tcp"}, "web.1 ready on port 5000 (port answers)"),
        ("ready", {}, "web.1 ready"),
        ("ready", {"port": 5100, "ready_by": "port"}, "web.1 ready on port 5100 (its port answers)"),
        ("running", {"port": 5000}, "web.1 running (nothing proved it ready yet)"),
        (
            "running",
            {"port": 5000, "port_preoccupied": True},
            "web.1 running (nothing proved it ready yet; port 5000 was already taken by another process)",
        ),
        ("restarting", {"exit_code": 1}, "web.1 exited with code 1; restarting"),
        ("crash-loop", {"restarts": 5}, "web.1 keeps crashing: giving up after 5 restarts"),
        ("exited", {"exit_code": 0}, "web.1 exited with code 0"),
        ("failed", {"reason": "depends on db.1, which failed"}, "web.1 failed: depends on db.1, which failed"),
        ("failed", {"exit_code": 2}, "web.1 failed: exited with code 2"),
        ("stopped", {}, None),
    ],
)
def test_news(kind, fields, expected):
    assert _upview.news(Event(kind, snap(**fields))) == expected


def test_output_event_tells_lost_rows():
    view = View(["web.1"], colour=False, timestamps=False)
    lines = view.event(Event("output", snap(), rows=(row("a"), row("b")), dropped=7))
    assert lines == [
        "system | web.1: 7 lines skipped (printed faster than they could be shown)",
        "web.1  | a",
        "web.1  | b",
    ]


@pytest.mark.parametrize(
    "stopped, expected",
    [
        ([snap(status="stopped"), snap(name="w.1", status="stopped")], ["stopped web.1, w.1", "nothing left running"]),
        ([snap(status="exited")], ["nothing left running"]),  # one line: nothing was stopped, nothing is left
        ([snap(status="exited", kill_incomplete=True)], ["could not confirm that everything of web.1 is gone"]),
        (
            [snap(status="stopped", kill_incomplete=True)],
            ["stopped web.1", "could not confirm that everything of web.1 is gone"],
        ),
        ([], ["nothing left running"]),
    ],
)
def test_closing_lines(stopped, expected):
    assert _upview.closing_lines(stopped) == expected


def test_json_line_is_one_line_and_always_encodes():
    line = _upview.json_line({"text": "a\nb \udcff é", "n": 1})
    assert "\n" not in line
    line.encode("utf-8")
    assert json.loads(line)["text"].startswith("a\nb ")
    assert json.loads(line)["n"] == 1


def test_palette_cycles_for_many_names():
    names = [f"e{i}.1" for i in range(30)]
    view = View(names, colour=True, timestamps=False)
    assert view.output("e12.1", row("x")).startswith("\x1b[36m")  # 12 colours, then again


def test_system_lines_escape_control_characters():
    view = View(["web.1"], colour=False, timestamps=False)
    assert view.system("why\x1b[2J") == "system | why\\x1b[2J"
    assert os.linesep not in view.system("a")


@pytest.mark.parametrize("colour", [True, False])
def test_a_services_control_sequences_are_removed_and_other_controls_escaped(colour):
    """Through the real ring: cursor moves and titles go (the row is what a terminal would show), bidi is escaped."""
    from proctree._supervisor.logring import LogRing

    (got,) = LogRing().feed("A\x1b[2JB\x1b[5AC\x1b]0;title\x07D \u202eE\n".encode())
    line = View(["c.1"], colour=colour, timestamps=False).output("c.1", got)
    assert line.endswith(" ABCD \\u202eE")
    body = line[line.index(" ABCD") :]
    assert "\x1b" not in body and "title" not in body
