"""A service's output as a bounded ring of rows, with a monotonic cursor.

Bytes go in as the pipe delivers them (lines split anywhere, invalid UTF-8,
terminal control sequences, a 10 MB line); rows come out whole, each with a
sequence number that never repeats, so a reader pages with `since` and learns
how many rows it missed when the ring wrapped. Memory stays bounded whatever
the service prints: the ring keeps at most max_rows rows and max_chars
characters, and a line longer than max_line is cut with a mark.

Each row has two renderings: `text` (every control sequence removed, for the
ring's readers and JSON) and `raw` (ANSI colours kept, for a terminal). Both
apply carriage-return and backspace overwrites the way a terminal shows them,
so a progress bar's row is its last state, not every frame glued together.

This module is pure: no processes, no I/O, no clock but time.time().
It must never hold more than its bounds, or drop a row without counting it.
"""

from __future__ import annotations

import codecs
import collections
import itertools
import re
import threading
import time
from dataclasses import dataclass

__all__ = ["LogPage", "LogRing", "Row", "cut_mark", "render_line", "strip_ansi"]


@dataclass(frozen=True, slots=True)
class Row:
    """One line of output.

    seq counts from 1 and is never reused; at is time.time() when the line
    ended; text has every control sequence removed; raw keeps the ANSI colour
    (SGR) sequences, ending with a reset if it uses any; cut says the line was
    longer than the ring's max_line and ends with cut_mark().
    """

    seq: int
    at: float
    text: str
    raw: str
    cut: bool = False


@dataclass(frozen=True, slots=True)
class LogPage:
    """What read() returns: rows after `since`, oldest first.

    next is the cursor to pass as the next `since` (the seq of the last row
    returned, or `since` unchanged when there was nothing new); dropped counts
    the rows after `since` that the ring no longer holds (lost to wrap-around
    before anybody read them).
    """

    rows: tuple[Row, ...]
    next: int
    dropped: int


# --- control sequences (ECMA-48) ---------------------------------------------------------------
#
# Recognised: the string commands OSC / DCS / SOS / PM / APC (ESC ] P X ^ _ or their C1 forms,
# ended by BEL or ST, or cut short by another ESC, a carriage return or the end of the line: a
# title must never leak into a row, nor swallow the frames a \r starts); CSI (ESC [ or the C1 byte 0x9b, parameters, intermediates, one final byte);
# the other escapes (ESC, intermediates, one final byte). An ESC that starts none of them is
# dropped alone.
_CSI = r"(?:\x1b\[|\x9b)[0-?]*[ -/]*(?:[@-~]|(?=\r)|$)"
_STRING_CMD = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\r]*(?:\x07|\x1b\\|\x9c|(?=[\x1b\r])|$)"
_OTHER_ESC = r"\x1b[ -/]*[0-~]"
_SEQUENCE = re.compile(f"{_STRING_CMD}|{_CSI}|{_OTHER_ESC}|\x1b")
# SGR (colours, bold, ...): a CSI whose parameters are digits, ';' or ':' and whose final byte is m.
_SGR = re.compile(r"(?:\x1b\[|\x9b)[0-9;:]*m")
# Control characters (C0 but the tab, DEL, C1): a line without any is printed as it is.
_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_MOVES = re.compile(r"[\r\b]")
# The controls left to remove once SGR sequences are isolated: all but \b, \t, \r and the ESC of an SGR.
_CONTROLS_BUT_MOVES = re.compile(r"[\x00-\x07\x0a-\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f]")
_SGR_SPLIT = re.compile(r"((?:\x1b\[|\x9b)[0-9;:]*m)")
_RESET = "\x1b[0m"
# How many characters as printed (control sequences included) a frame may hold, per max_line.
_FRAME_FACTOR = 4


def strip_ansi(text: str) -> str:
    """text without ANSI/ECMA-48 control sequences or other control characters (tabs kept).

    Carriage returns and backspaces are removed, not applied; render_line()
    applies them as a terminal would.
    """
    if not _CONTROLS.search(text):
        return text
    return _CONTROLS.sub("", _SEQUENCE.sub("", text))


def _keep_sgr(text: str) -> str:
    """text with every control sequence removed except SGR colours; \r and \b kept for the overwrite pass."""

    def one(match: re.Match[str]) -> str:
        seq = match.group()
        if not _SGR.fullmatch(seq):
            return ""
        return seq if seq[0] == "\x1b" else "\x1b[" + seq[1:]  # the C1 CSI byte, spelt as terminals expect

    return _CONTROLS_BUT_MOVES.sub("", _SEQUENCE.sub(one, text))


def _overwrite(text: str) -> tuple[str, str]:
    """Apply \r (back to column 0) and \b (one column left) to text as a terminal would.

    text holds printable characters and SGR sequences only (plus \r, \b). Each
    cell remembers the colours in force when it was written, so a cell written
    over takes the new colours and its neighbours keep theirs. Returns the
    rendering and the SGR sequences in force at the end (what the next
    character would be drawn with).
    """
    cells: list[tuple[str, str]] = []  # (the SGR sequences in force, the character)
    col = 0
    state = ""
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\r":
            col = 0
            i += 1
        elif ch == "\b":
            col = max(0, col - 1)
            i += 1
        elif ch == "\x1b":
            m = _SGR.match(text, i)
            if m is None:  # not left by _keep_sgr; skip the byte rather than loop
                i += 1
                continue
            seq = m.group()
            params = seq[2:-1]
            if params in ("", "0"):
                state = ""
            elif params.startswith("0;") or len(state) > 256:  # a reset first; or bound a never-reset state
                state = seq
            else:
                state += seq
            i = m.end()
        else:
            if col < len(cells):
                cells[col] = (state, ch)
            else:
                cells.append((state, ch))
            col += 1
            i += 1
    out: list[str] = []
    shown = ""
    for cell_state, ch in cells:
        if cell_state != shown:
            out.append(_RESET + cell_state if shown else cell_state)
            shown = cell_state
        out.append(ch)
    if shown:
        out.append(_RESET)
    return "".join(out), state


def render_line(line: str) -> tuple[str, str]:
    """(text, raw) for one decoded line without its newline; see Row."""
    if line.endswith("\r"):
        line = line[:-1]  # CRLF: the CR moves the cursor to column 0 and nothing follows
    if not _CONTROLS.search(line):
        return line, line
    text = _SGR.sub("", line)
    if not _CONTROLS.search(text):  # colours and nothing else: the common coloured line, quickly
        raw = line if "\x9b" not in line else _keep_sgr(line)
    else:
        raw = _keep_sgr(line)
        if _MOVES.search(raw):
            raw = _overwrite(raw)[0]
        text = _SGR.sub("", raw)
    if text == raw:
        return text, text
    last = _SGR.match(raw, raw.rfind("\x1b["))  # raw's last escape is an SGR, spelt ESC [ params m
    if last is not None and last.group()[2:-1] not in ("", "0"):
        raw += _RESET  # a colour left on would paint whatever the terminal prints next
    return text, raw


def _compact(line: str, max_colours: int) -> str:
    """line (held, with \r in it) rendered up to its last \r, then that \r and the frame after it.

    Renders the same as line. The frames before the last \r are overlaid into
    one (at most max_line cells, as each frame is); should their colours
    make it longer than max_colours characters, they are dropped there.
    """
    last = line.rfind("\r")
    if last < 0:
        return line
    shown, state = _overwrite(_keep_sgr(line[:last]))
    if len(shown) > max_colours:
        shown, state = _SGR.sub("", shown), ""
    if state:  # the frame being drawn goes on in the colours in force
        return shown + "\r" + _RESET + state + line[last + 1 :]
    return shown + line[last:]


def _cut_shown(raw: str, n: int) -> str:
    """raw (printable characters and SGR sequences) with its first n printable characters, colours whole."""
    out: list[str] = []
    shown = 0
    coloured = False
    for part in _SGR_SPLIT.split(raw):
        if not part:
            continue
        if _SGR.fullmatch(part):
            out.append(part)
            coloured = True
            continue
        take = part[: n - shown]
        out.append(take)
        shown += len(take)
        if shown >= n:
            break
    if coloured:
        out.append(_RESET)
    return "".join(out)


def cut_mark(dropped_chars: int) -> str:
    """The mark that ends a cut row: how many characters of the line were dropped."""
    return f" …[cut: {dropped_chars} more characters]"


DEFAULT_MAX_CHARS = 4 * 1024 * 1024

# --- the ring -------------------------------------------------------------------------------


def _check_bound(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{what} must be at least {minimum}, got {value}")
    return value


class LogRing:
    """Bounded rows of one output stream (stdout and stderr merged by the caller).

    feed() takes bytes as they arrive and returns the rows the complete lines
    made; an incomplete last line is held (never more than max_line characters
    of it) until its newline or close(). The ring keeps the newest max_rows
    rows, and drops older ones sooner if all rows together would exceed
    max_chars characters (default: 4 Mi, or 4 * max_line if more), so 2000
    rows of 16 KiB cannot add up to 64 MB.
    Thread-safe: the reader may run in another thread than the feeder.
    """

    def __init__(self, max_rows: int = 2000, max_line: int = 16384, max_chars: int | None = None) -> None:
        self.max_rows = _check_bound(max_rows, "max_rows", 1)
        self.max_line = _check_bound(max_line, "max_line", 16)
        if max_chars is None:
            max_chars = max(DEFAULT_MAX_CHARS, 4 * self.max_line)
        # A row's text and raw are each at most max_line (+ the cut mark): the newest row always fits.
        self.max_chars = _check_bound(max_chars, "max_chars", self.max_line * 2 + 256)
        self._rows: collections.deque[Row] = collections.deque()
        self._chars = 0  # characters held by self._rows (text, plus raw where it differs)
        self._last_seq = 0
        self._dropped = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # The incomplete line: its pieces, their length, the length of its frame being drawn (the
        # characters since its last \r, at most max_line), the characters dropped from frames
        # longer than max_line, and the length past which its finished frames are overlaid into one.
        self._held: list[str] = []
        self._held_len = 0
        self._frame_len = 0
        self._held_cut = 0
        # A frame holds up to _FRAME_FACTOR * max_line characters as printed (colour codes
        # included), so that colours never cost a row its text: the row is cut to max_line
        # characters as shown once it is rendered.
        self._frame_limit = _FRAME_FACTOR * self.max_line
        self._held_limit = 2 * self._frame_limit
        self._overlong_frame = re.compile(f"\r([^\r]{{{self._frame_limit + 1},}})")
        self._lock = threading.Lock()

    # -- writing

    def feed(self, data: bytes) -> list[Row]:
        """Append the complete lines in data; return their rows (oldest first)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"feed() takes bytes, not {type(data).__name__}")
        with self._lock:
            return self._take(self._decoder.decode(data))

    def close(self) -> list[Row]:
        """End of stream: the held incomplete line (if any) becomes a row.

        Calling it again returns []. The ring stays readable, and feed() may
        start another stream (a restarted service's) with the cursor going on.
        """
        with self._lock:
            rows = self._take(self._decoder.decode(b"", final=True))
            self._decoder.reset()
            if self._held_len or self._held_cut:
                rows.append(self._row_from_held())
            return rows

    @property
    def partial(self) -> str | None:
        """The held incomplete line's text (e.g. a prompt without a newline), or None."""
        with self._lock:
            if not self._held_len:
                return None
            return render_line("".join(self._held))[0][: self.max_line]

    def _take(self, chunk: str) -> list[Row]:
        rows: list[Row] = []
        start = 0
        while True:
            end = chunk.find("\n", start)
            if end < 0:
                if start < len(chunk):
                    self._hold(chunk[start:] if start else chunk)
                return rows
            if end > start:
                self._hold(chunk[start:end])
            rows.append(self._row_from_held())
            start = end + 1

    def _hold(self, piece: str) -> None:
        """Add piece (no newline in it) to the incomplete line.

        Each frame (the text between carriage returns) keeps its first
        max_line characters; the rest is counted in _held_cut. Whatever the
        pieces' sizes, the same line gives the same row.
        """
        first_cr = piece.find("\r")
        first = piece if first_cr < 0 else piece[:first_cr]
        room = self._frame_limit - self._frame_len
        if len(first) > room:
            self._held_cut += len(first) - room
            first = first[:room]
        self._add(first)
        self._frame_len += len(first)
        if first_cr >= 0:
            rest = piece[first_cr:]  # starts with \r: every frame in it starts at one
            kept = 0
            for m in self._overlong_frame.finditer(rest):
                start, end = m.span(1)
                self._add(rest[kept : start + self._frame_limit])
                self._held_cut += end - start - self._frame_limit
                kept = end
            self._add(rest[kept:])
            self._frame_len = min(self._frame_limit, len(rest) - rest.rfind("\r") - 1)
        if self._held_len > self._held_limit:
            # A progress bar redrawn with \r on one endless line: overlay its finished frames.
            line = _compact("".join(self._held), 4 * self._frame_limit)
            self._held = [line]
            self._held_len = len(line)
            self._held_limit = len(line) + self._frame_limit

    def _add(self, text: str) -> None:
        if text:
            self._held.append(text)
            self._held_len += len(text)

    def _row_from_held(self) -> Row:
        line = "".join(self._held)
        cut = self._held_cut
        self._held.clear()
        self._held_len = 0
        self._frame_len = 0
        self._held_cut = 0
        self._held_limit = 2 * self._frame_limit
        text, raw = render_line(line)
        if len(text) > self.max_line:  # cut as shown: colour codes never count
            cut += len(text) - self.max_line
            text = text[: self.max_line]
            raw = text if raw == text or len(raw) == len(text) else _cut_shown(raw, self.max_line)
        if raw is not text and len(text) + len(raw) + 2 * len(cut_mark(cut)) > self.max_chars:
            raw = text  # so many colours that the row would not fit the ring's budget: its text stays whole
        if cut:
            mark = cut_mark(cut)
            text += mark
            raw = raw + mark if raw is not text else text
        self._last_seq += 1
        row = Row(self._last_seq, time.time(), text, raw, bool(cut))
        self._append(row)
        return row

    def _append(self, row: Row) -> None:
        size = len(row.text) + (0 if row.raw is row.text else len(row.raw))
        self._rows.append(row)
        self._chars += size
        while len(self._rows) > self.max_rows or (self._chars > self.max_chars and len(self._rows) > 1):
            old = self._rows.popleft()
            self._chars -= len(old.text) + (0 if old.raw is old.text else len(old.raw))
            self._dropped += 1

    # -- reading

    @property
    def last_seq(self) -> int:
        """The seq of the newest row (0 before the first)."""
        return self._last_seq

    @property
    def dropped_total(self) -> int:
        """How many rows the ring has dropped to stay within its bounds."""
        return self._dropped

    def __len__(self) -> int:
        return len(self._rows)

    def read(self, since: int | None = None, limit: int | None = None) -> LogPage:
        """Rows with seq > since (all held rows when since is None), oldest first, at most limit of them."""
        if since is not None:
            if isinstance(since, bool) or not isinstance(since, int):
                raise TypeError(f"since must be an int or None, not {type(since).__name__}")
            if since < 0:
                raise ValueError(f"since must be >= 0, got {since}")
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int):
                raise TypeError(f"limit must be an int or None, not {type(limit).__name__}")
            if limit < 1:
                raise ValueError(f"limit must be at least 1, got {limit}")
        with self._lock:
            after = 0 if since is None else since
            if after > self._last_seq:
                raise ValueError(f"since {after} is past the newest row ({self._last_seq}): not a cursor of this log")
            first = self._rows[0].seq if self._rows else self._last_seq + 1
            dropped = max(0, first - 1 - after)
            skip = max(0, after - first + 1)
            count = len(self._rows) - skip
            if limit is not None:
                count = min(count, limit)
            if count <= 0:
                return LogPage((), after, dropped)
            rows = tuple(itertools.islice(self._rows, skip, skip + count))
            return LogPage(rows, rows[-1].seq, dropped)

    def tail(self, n: int) -> tuple[Row, ...]:
        """The newest n rows (fewer if the ring holds fewer), oldest first."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"n must be an int, not {type(n).__name__}")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        with self._lock:
            newest = list(itertools.islice(reversed(self._rows), n))
        newest.reverse()
        return tuple(newest)
