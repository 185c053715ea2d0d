"""The supervisor's log ring: rows from raw output bytes, bounded, paged by a monotonic cursor.

Table-driven tests of the line rendering (control sequences, overwrites,
colours), the ring's paging across wrap-around, its bounds measured with
tracemalloc, and a real process's output read through a pipe.
"""

import gc
import random
import re
import subprocess
import sys
import textwrap
import threading
import tracemalloc

import pytest

from proctree._containment.spawn import spawn
from proctree._supervisor.logring import LogPage, LogRing, Row, cut_mark, render_line, strip_ansi

ESC = "\x1b"
RESET = ESC + "[0m"

# (line as decoded, expected text, expected raw)
RENDER_CASES = [
    ("plain", "plain", "plain"),
    ("", "", ""),
    ("tab\tkept", "tab\tkept", "tab\tkept"),
    ("crlf\r", "crlf", "crlf"),
    # colours: stripped in text, kept in raw, and a colour left on is reset at the end
    (f"{ESC}[31mred{ESC}[0m", "red", f"{ESC}[31mred{ESC}[0m"),
    (f"{ESC}[1;32mok{ESC}[m done", "ok done", f"{ESC}[1;32mok{ESC}[m done"),
    (f"{ESC}[33mleft on", "left on", f"{ESC}[33mleft on{RESET}"),
    (f"{ESC}[38;5;202m256{ESC}[0m", "256", f"{ESC}[38;5;202m256{ESC}[0m"),
    (f"{ESC}[38;2;10;20;30mtrue{ESC}[0m", "true", f"{ESC}[38;2;10;20;30mtrue{ESC}[0m"),
    ("\x9b31mc1 csi\x9b0m", "c1 csi", f"{ESC}[31mc1 csi{ESC}[0m"),
    # cursor moves, erases, modes: removed from both
    (f"{ESC}[2Kerased", "erased", "erased"),
    (f"a{ESC}[1Ab{ESC}[10Gc{ESC}[3;4Hd", "abcd", "abcd"),
    (f"{ESC}[?25lhidden cursor{ESC}[?25h", "hidden cursor", "hidden cursor"),
    (f"{ESC}(Bcharset{ESC}=keypad{ESC}7saved{ESC}8", "charsetkeypadsaved", "charsetkeypadsaved"),
    # OSC titles and hyperlinks (BEL or ST terminated, unterminated, cut short by another ESC)
    (f"{ESC}]0;my title\x07after", "after", "after"),
    (f"{ESC}]2;title{ESC}\\after", "after", "after"),
    (f"{ESC}]8;;http://x{ESC}\\link{ESC}]8;;{ESC}\\", "link", "link"),
    (f"before{ESC}]0;never ends", "before", "before"),
    (f"{ESC}]0;title{ESC}[31mred{ESC}[0m", "red", f"{ESC}[31mred{ESC}[0m"),
    (f"{ESC}Pdcs payload{ESC}\\x", "x", "x"),
    # other controls: bell, NUL, DEL, a lone ESC at the end
    ("bell\x07 nul\x00 del\x7f", "bell nul del", "bell nul del"),
    (f"lone{ESC}", "lone", "lone"),
    # carriage return and backspace overwrite, as a terminal shows them
    ("abcdef\rXY", "XYcdef", "XYcdef"),
    ("10%\r50%\r100%", "100%", "100%"),
    ("downloading\r", "downloading", "downloading"),
    ("abc\b\bX", "aXc", "aXc"),
    ("\b\bstart", "start", "start"),
    (f"{ESC}[32mabcdef{ESC}[0m\rXY", "XYcdef", f"XY{ESC}[32mcdef{RESET}"),
    (f"{ESC}[1mbold{ESC}[0m plain\r{ESC}[31mR", "Rold plain", f"{ESC}[31mR{RESET}{ESC}[1mold{RESET} plain"),
    (f"{ESC}[2K\r  50%\r{ESC}[2K\r 100% done", " 100% done", " 100% done"),
    # invalid UTF-8 arrives here already replaced
    ("bad \ufffd byte", "bad \ufffd byte", "bad \ufffd byte"),
]


@pytest.mark.parametrize(("line", "text", "raw"), RENDER_CASES)
def test_render_line(line, text, raw):
    assert render_line(line) == (text, raw)


@pytest.mark.parametrize(("line", "text", "raw"), RENDER_CASES)
def test_ring_row_matches_render(line, text, raw):
    ring = LogRing()
    (row,) = ring.feed(line.encode() + b"\n")
    assert (row.text, row.raw, row.cut) == (text, raw, False)


@pytest.mark.parametrize(
    ("text", "stripped"),
    [
        ("plain", "plain"),
        (f"{ESC}[31mred{ESC}[0m", "red"),
        (f"{ESC}]0;t\x07a\rb\bc", "abc"),
        ("\x9b1mx", "x"),
    ],
)
def test_strip_ansi(text, stripped):
    assert strip_ansi(text) == stripped


_SGR_ONLY = re.compile(r"\x1b\[[0-9;:]*m")
_ANY_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_SOUP = [b"\x1b", b"[", b"]", b"P", b"\\", b"0", b"1", b"3", b"8", b";", b":", b"?", b"m", b"K", b"H", b"\x07"]
_SOUP += [
    b"\r",
    b"\b",
    b"\t",
    b"\x00",
    b"\x7f",
    b"\xc2\x9b",
    b"\xc2\x9d",
    b"\xff",
    b"\xe2\x82",
    b"a",
    b"Z",
    b" ",
    b"\n",
]


@pytest.mark.parametrize("seed", range(40))
def test_hostile_byte_soup(seed):
    """Whatever a service prints, text holds no control character but tabs, raw no escape but SGR colours
    (no title, clipboard, cursor or mode change reaches a terminal), and text is raw without its colours."""
    rnd = random.Random(seed)
    data = b"".join(rnd.choice(_SOUP) for _ in range(rnd.randint(1, 4000)))
    ring = LogRing(max_rows=10_000, max_line=64)
    rows = []
    for i in range(0, len(data), 97):
        rows += ring.feed(data[i : i + 97])
    rows += ring.close()
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    for row in rows:
        assert not _ANY_CONTROL.search(row.text), repr(row.text)
        assert not _ANY_CONTROL.search(_SGR_ONLY.sub("", row.raw)), repr(row.raw)
        assert _SGR_ONLY.sub("", row.raw) == row.text
        assert len(row.text) <= 64 + len(cut_mark(10**9))


def test_osc_52_clipboard_and_title_never_reach_raw():
    ring = LogRing()
    (row,) = ring.feed(b"\x1b]52;c;ZWNobyBoaQ==\x07\x1b]0;pwned\x1b\\\x1bP+q544e\x1b\\\x1b[?1049hok\n")
    assert (row.text, row.raw) == ("ok", "ok")


# --- bytes to rows -----------------------------------------------------------------------------

STREAM = (
    b"first\n"
    b"\x1b[32mgreen\x1b[0m and \xc3\xa9t\xc3\xa9\r\n"
    b"bad \xff\xfe bytes\n"
    b"progress 1%\rprogress 99%\rdone\n"
    b"\x1b]0;title\x07\xe2\x82\xac euro\n"
    b"no newline at the end"
)
STREAM_TEXTS = ["first", "green and été", "bad \ufffd\ufffd bytes", "doneress 99%", "€ euro", "no newline at the end"]


def test_stream_in_one_feed():
    ring = LogRing()
    rows = ring.feed(STREAM)
    assert [r.text for r in rows] == STREAM_TEXTS[:-1]
    assert ring.partial == STREAM_TEXTS[-1]
    (last,) = ring.close()
    assert last.text == STREAM_TEXTS[-1]
    assert [r.seq for r in ring.read().rows] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 64])
def test_stream_split_anywhere(chunk):
    """However the pipe splits the bytes (inside a UTF-8 character, an escape, a CRLF), the rows are the same."""
    ring = LogRing()
    rows = []
    for i in range(0, len(STREAM), chunk):
        rows += ring.feed(STREAM[i : i + chunk])
    rows += ring.close()
    assert [r.text for r in rows] == STREAM_TEXTS


def test_stream_split_at_random_points():
    rnd = random.Random(12)
    for _ in range(200):
        cuts = sorted(rnd.sample(range(1, len(STREAM)), rnd.randint(1, 12)))
        ring = LogRing()
        rows = []
        for a, b in zip([0, *cuts], [*cuts, len(STREAM)]):
            rows += ring.feed(STREAM[a:b])
        rows += ring.close()
        assert [r.text for r in rows] == STREAM_TEXTS


def test_multibyte_split_across_feeds_is_not_replaced():
    ring = LogRing()
    assert ring.feed(b"caf\xc3") == []
    (row,) = ring.feed(b"\xa9\n")
    assert row.text == "café"


def test_truncated_utf8_at_end_of_stream_is_replaced():
    ring = LogRing()
    ring.feed(b"cut \xe2\x82")
    (row,) = ring.close()
    assert row.text == "cut \ufffd"


def test_empty_lines_are_rows():
    ring = LogRing()
    assert [r.text for r in ring.feed(b"\n\r\n\n")] == ["", "", ""]


def test_close_is_idempotent_and_feeding_goes_on():
    ring = LogRing()
    ring.feed(b"a\nb")
    assert [r.text for r in ring.close()] == ["b"]
    assert ring.close() == []
    assert ring.partial is None
    # a restarted service's output continues the same cursor, with a fresh decoder
    ring.feed(b"\xc3")  # half a character...
    ring.close()  # ...ends with its stream
    (row,) = ring.feed(b"c\n")
    assert (row.seq, row.text) == (4, "c")
    assert [r.text for r in ring.read(since=2).rows] == ["\ufffd", "c"]


def test_feed_refuses_text():
    ring = LogRing()
    with pytest.raises(TypeError, match="bytes"):
        ring.feed("text")  # type: ignore[arg-type]
    assert ring.feed(bytearray(b"x\n"))[0].text == "x"
    assert ring.feed(memoryview(b"y\n"))[0].text == "y"


# --- overlong lines ---------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [1000, 4096, 65536, 1 << 20])
def test_overlong_line_is_cut_with_a_mark(chunk):
    ring = LogRing(max_line=1000)
    data = b"x" * 5000 + b"\nnext\n"
    rows = []
    for i in range(0, len(data), chunk):
        rows += ring.feed(data[i : i + chunk])
    assert [r.cut for r in rows] == [True, False]
    assert rows[0].text == "x" * 1000 + cut_mark(4000)
    assert rows[0].raw == rows[0].text
    assert rows[1].text == "next"


def test_line_of_exactly_max_line_is_whole():
    ring = LogRing(max_line=100)
    (row,) = ring.feed(b"y" * 100 + b"\n")
    assert (row.text, row.cut) == ("y" * 100, False)


def test_overlong_partial_is_cut_at_close():
    ring = LogRing(max_line=100)
    ring.feed(b"z" * 250)
    assert len(ring.partial or "") == 100
    (row,) = ring.close()
    assert row.cut and row.text == "z" * 100 + cut_mark(150)


def test_cut_colour_line_keeps_a_reset():
    ring = LogRing(max_line=20)
    (row,) = ring.feed(b"\x1b[31m" + b"r" * 100 + b"\n")
    assert row.cut
    assert row.text == "r" * 20 + cut_mark(80)  # the colour code costs no character of text
    assert row.raw.startswith("\x1b[31m") and RESET in row.raw


def _frames(n, width):
    return b"".join(b"\r%5d " % i + b"#" * (i % width) for i in range(n))


def test_endless_progress_bar_keeps_its_latest_state():
    """A \\r-redrawn bar with no newline for a long time is not cut: its latest frame survives."""
    ring = LogRing(max_line=200)
    data = _frames(20000, 50) + b" finished\n"
    rows = []
    for i in range(0, len(data), 777):
        rows += ring.feed(data[i : i + 777])
    (row,) = rows
    expected, _ = render_line((_frames(20000, 50)[-2000:] + b" finished").decode())
    assert (row.text, row.cut) == (expected, False)
    assert row.text.startswith("19999 ")


def test_coloured_progress_bar_keeps_its_colour_through_long_redraws():
    ring = LogRing(max_line=20)
    (row,) = ring.feed(b"\x1b[32m" + b"".join(b"\r%05d" % i for i in range(1000)) + b"\n")
    assert (row.text, row.raw, row.cut) == ("00999", "\x1b[32m00999\x1b[0m", False)


def test_a_redrawn_line_is_cut_as_shown():
    """Frames overwrite each other first; the line as a terminal shows it is then cut to max_line."""
    ring = LogRing(max_line=50)
    (row,) = ring.feed(b"x" * 100 + b"\rabc\r" + b"y" * 60 + b"\rZ\n")
    assert row.cut and row.text == "Z" + "y" * 49 + cut_mark(50)  # shown: Z, 59 y, 40 x


def test_colour_codes_never_cost_a_row_its_text():
    ring = LogRing()  # max_line 16384
    line = b"".join(b"\x1b[3%dm%c\x1b[0m" % (1 + i % 6, 97 + i % 26) for i in range(3000))
    (row,) = ring.feed(line + b"\n")
    assert not row.cut and len(row.text) == 3000 and row.raw.count("\x1b[") == 6000
    small = LogRing(max_line=20)
    (row,) = small.feed(b"\x1b[1;31m" + b"abcdefghijklmnopqrstuvwxy" + b"\x1b[0m\n")
    assert row.text == "abcdefghijklmnopqrst" + cut_mark(5)  # 5 characters shown were lost, not 14
    assert row.raw == "\x1b[1;31mabcdefghijklmnopqrst\x1b[0m" + cut_mark(5)


@pytest.mark.parametrize("step", [1, 7, 4096, 1 << 20])
def test_a_cut_never_leaves_part_of_a_colour_code_as_text(step):
    ring = LogRing(max_line=1000)
    data = b"\x1b[31mx\x1b[0m" * 30000 + b"\n"  # far past what a frame holds, cut somewhere in a code
    rows = []
    for i in range(0, len(data), step):
        rows += ring.feed(data[i : i + step])
    (row,) = rows
    # A frame holds 4 x max_line characters as printed: with a code around every character
    # (10 bytes each) 400 are kept; never a code's parameters ("31") as text.
    kept, _, mark = row.text.partition(" …[cut: ")
    assert row.cut and mark and set(kept) == {"x"} and len(kept) >= 400
    assert strip_ansi(row.raw).startswith(kept + " …[cut: ")


@pytest.mark.parametrize(
    ("line", "text"),
    [
        ("ab\x1b[31", "ab"),  # a CSI cut short by the end of the line
        ("ab\x1b[3\rcd", "cd"),  # or by a carriage return
        ("a\x1b[31mb\x1b[0", "ab"),
    ],
)
def test_a_control_sequence_cut_short_is_removed_whole(line, text):
    assert render_line(line)[0] == text


@pytest.mark.parametrize("max_line", [40, 200, 16384])
def test_rows_do_not_depend_on_how_the_bytes_were_split(max_line):
    rnd = random.Random(max_line)
    soup = [*_SOUP, b"\r" * 50, b"\x1b[31m", b"x" * 30, b"\n"]
    for _ in range(100):
        data = b"".join(rnd.choice(soup) for _ in range(rnd.randint(1, 3000)))
        whole = LogRing(max_line=max_line)
        expected = [(r.text, r.raw, r.cut) for r in whole.feed(data) + whole.close()]
        step = rnd.randint(1, 300)
        split = LogRing(max_line=max_line)
        rows = []
        for i in range(0, len(data), step):
            rows += split.feed(data[i : i + step])
        rows += split.close()
        # Colours may be dropped from an overlong redrawn line (to bound it) at a point that
        # depends on the pieces; the text never depends on them.
        assert [(r.text, r.cut) for r in rows] == [(t, c) for t, _, c in expected]
        if max_line >= 200:
            assert [(r.text, r.raw, r.cut) for r in rows] == expected


def test_progress_bar_with_an_overlong_frame_is_cut():
    ring = LogRing(max_line=50)
    (row,) = ring.feed(b"short\r" + b"L" * 120 + b"\n")
    assert row.cut and row.text == "L" * 50 + cut_mark(70)


# --- the ring: cursor, paging, wrap-around ------------------------------------------------------


def _ring_with(n, max_rows):
    ring = LogRing(max_rows=max_rows)
    ring.feed(b"".join(b"line %d\n" % i for i in range(1, n + 1)))
    return ring


# (rows fed, max_rows, since, limit) -> (seqs returned, next, dropped)
PAGE_CASES = [
    ((0, 5, None, None), ([], 0, 0)),
    ((3, 5, None, None), ([1, 2, 3], 3, 0)),
    ((3, 5, 0, None), ([1, 2, 3], 3, 0)),
    ((3, 5, 1, None), ([2, 3], 3, 0)),
    ((3, 5, 3, None), ([], 3, 0)),
    ((3, 5, 0, 2), ([1, 2], 2, 0)),
    ((12, 5, None, None), ([8, 9, 10, 11, 12], 12, 7)),
    ((12, 5, 0, None), ([8, 9, 10, 11, 12], 12, 7)),
    ((12, 5, 3, None), ([8, 9, 10, 11, 12], 12, 4)),
    ((12, 5, 6, 2), ([8, 9], 9, 1)),
    ((12, 5, 7, None), ([8, 9, 10, 11, 12], 12, 0)),
    ((12, 5, 9, None), ([10, 11, 12], 12, 0)),
    ((12, 5, 11, 10), ([12], 12, 0)),
    ((12, 5, 12, None), ([], 12, 0)),
    ((12, 1, 0, None), ([12], 12, 11)),
]


@pytest.mark.parametrize(("args", "expected"), PAGE_CASES)
def test_read_pages(args, expected):
    fed, max_rows, since, limit = args
    ring = _ring_with(fed, max_rows)
    page = ring.read(since, limit)
    assert isinstance(page, LogPage)
    assert ([r.seq for r in page.rows], page.next, page.dropped) == expected
    assert all(r.text == f"line {r.seq}" for r in page.rows)
    assert ring.last_seq == fed
    assert ring.dropped_total == max(0, fed - max_rows)


@pytest.mark.parametrize(("n", "expected"), [(0, []), (2, [11, 12]), (5, [8, 9, 10, 11, 12]), (50, [8, 9, 10, 11, 12])])
def test_tail(n, expected):
    assert [r.seq for r in _ring_with(12, 5).tail(n)] == expected


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda r: r.read(since=-1), ValueError, "since"),
        (lambda r: r.read(since=True), TypeError, "since"),
        (lambda r: r.read(since="3"), TypeError, "since"),
        (lambda r: r.read(since=13), ValueError, "past the newest row"),
        (lambda r: r.read(limit=0), ValueError, "limit"),
        (lambda r: r.read(limit=2.0), TypeError, "limit"),
        (lambda r: r.tail(-1), ValueError, "n must"),
        (lambda r: r.tail(None), TypeError, "n must"),
    ],
)
def test_bad_read_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call(_ring_with(12, 5))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_rows": 0}, ValueError),
        ({"max_rows": True}, TypeError),
        ({"max_rows": 2.5}, TypeError),
        ({"max_line": 0}, ValueError),
        ({"max_line": 1000, "max_chars": 1000}, ValueError),
    ],
)
def test_bad_bounds(kwargs, error):
    with pytest.raises(error):
        LogRing(**kwargs)


def test_paging_reader_sees_every_row_or_counts_it():
    """A reader paging with `since` while output races ahead: rows seen + rows dropped = rows written, in order."""
    rnd = random.Random(5)
    ring = LogRing(max_rows=50)
    since = None
    seen: list[int] = []
    dropped = 0
    written = 0
    for _ in range(2000):
        n = rnd.choice([0, 1, 3, 20, 80])
        ring.feed(b"".join(b"r%d\n" % (written + i + 1) for i in range(n)))
        written += n
        page = ring.read(since, limit=rnd.choice([None, 1, 7, 40]))
        dropped += page.dropped
        seen += [r.seq for r in page.rows]
        assert all(r.text == f"r{r.seq}" for r in page.rows)
        since = page.next
    while True:
        page = ring.read(since)
        if not page.rows:
            break
        dropped += page.dropped
        seen += [r.seq for r in page.rows]
        since = page.next
    assert seen == sorted(set(seen))
    assert len(seen) + dropped == written == ring.last_seq


def test_char_budget_drops_old_rows_first():
    ring = LogRing(max_rows=1000, max_line=1000, max_chars=10_000)
    ring.feed(b"".join(bytes([97 + i % 26]) * 900 + b"\n" for i in range(50)))
    assert len(ring) == 11  # 11 * 900 chars fit in 10 000
    page = ring.read()
    assert [r.seq for r in page.rows] == list(range(40, 51))
    assert page.dropped == 39 == ring.dropped_total


def test_char_budget_default_follows_a_large_max_line():
    ring = LogRing(max_line=4 << 20)
    assert ring.max_chars == 16 << 20  # a 4 Mi-character line still fits, text and raw
    assert LogRing().max_chars == 4 << 20


def test_char_budget_never_drops_the_newest_row():
    ring = LogRing(max_rows=10, max_line=16, max_chars=288)
    ring.feed(b"a" * 16 + b"\n")
    assert len(ring) == 1


def test_rows_are_immutable():
    (row,) = LogRing().feed(b"x\n")
    assert isinstance(row, Row)
    with pytest.raises(AttributeError):
        row.text = "y"  # type: ignore[misc]


def test_concurrent_reader_thread():
    ring = LogRing(max_rows=100)
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader():
        since = 0
        try:
            while not stop.is_set():
                page = ring.read(since)
                seqs = [r.seq for r in page.rows]
                assert seqs == sorted(seqs) and all(s > since for s in seqs)
                since = page.next
                ring.tail(10)
        except BaseException as exc:  # reported to the test below
            errors.append(exc)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(3000):
            ring.feed(b"line %d\nand a half" % i)
            ring.feed(b" more\n")
    finally:
        stop.set()
        t.join(10)
    assert not errors
    assert ring.last_seq == 6000


# --- memory bounds, measured ------------------------------------------------------------------


def _traced(fn):
    """(current, peak) bytes tracemalloc saw allocated while fn ran, net of what was there before."""
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        keep = fn()
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del keep
    return current - before, peak - before


def test_memory_bounded_under_100k_lines():
    line = b"2026-12-03 07:00:00 INFO \x1b[32mrequest\x1b[0m served in 0.42 ms, status 200, path /api/items\n"

    def run():
        ring = LogRing(max_rows=2000)
        block = line * 1000
        for _ in range(100):
            ring.feed(block)
        assert ring.last_seq == 100_000 and len(ring) == 2000
        return ring

    current, peak = _traced(run)
    # 2000 rows of ~90 characters, text and raw: about 0.8 MB with the row objects.
    assert current < 1.5e6, current
    assert peak < 3e6, peak


def test_memory_bounded_under_a_10mb_line():
    def run():
        ring = LogRing(max_rows=2000, max_line=16384)
        chunk = b"0123456789abcdef" * 4096  # 64 KiB, as a pipe read delivers it
        for _ in range(160):  # 10 MiB, no newline
            ring.feed(chunk)
        ring.feed(b"\nafter\n")
        return ring

    current, peak = _traced(run)
    assert current < 200e3, current  # one row of 16 KiB (+ the mark), one short row
    assert peak < 500e3, peak  # one chunk decoded at a time, the held line bounded


def test_10mb_line_in_one_feed_keeps_only_max_line():
    big = b"\xff" * (10 << 20)  # invalid UTF-8 too: 10 M replacement characters

    def run():
        ring = LogRing(max_line=16384)
        (row,) = ring.feed(big + b"\n")
        assert row.cut and row.text.startswith("\ufffd" * 16384)
        return ring

    current, _ = _traced(run)
    assert current < 300e3, current


def test_memory_bounded_under_long_colour_lines():
    def run():
        ring = LogRing(max_rows=2000, max_line=16384, max_chars=4 << 20)
        line = b"\x1b[31m" + b"x" * 20000 + b"\x1b[0m\n"
        for _ in range(600):
            ring.feed(line)
        return ring

    current, _ = _traced(run)
    assert current < 12e6, current  # the 4 M character budget (1-byte characters), not 600 x 32 KiB


# --- a real process -------------------------------------------------------------------------------

CHILD = textwrap.dedent(
    r"""
    import sys, time
    out = sys.stdout.buffer
    out.write(b"\x1b[1;34mstarting\x1b[0m\n"); out.flush()
    for i in range(0, 101, 25):
        out.write(b"\rprogress %d%%" % i); out.flush(); time.sleep(0.01)
    out.write(b"\n")
    out.write(b"latin-1 caf\xe9\n")
    sys.stderr.write("to stderr\n"); sys.stderr.flush()
    out.write(b"x" * 70000 + b"\n")
    for i in range(5000):
        out.write(b"n%d\n" % i)
    out.write(b"prompt> "); out.flush()
    """
)


def test_real_process_output_through_a_pipe():
    tree = spawn([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    ring = LogRing(max_rows=100, max_line=1000)
    rows = []
    try:
        assert tree.stdout is not None
        while True:
            data = tree.stdout.read1(65536)
            if not data:
                break
            rows += ring.feed(data)
        rows += ring.close()
        assert tree.wait(30) == 0
    finally:
        tree.terminate(grace=0)
        if tree.stdout is not None:
            tree.stdout.close()
    texts = [r.text for r in rows]
    assert texts[:4] == ["starting", "progress 100%", "latin-1 caf\ufffd", "to stderr"]
    assert rows[0].raw == "\x1b[1;34mstarting\x1b[0m"
    assert rows[4].cut and rows[4].text == "x" * 1000 + cut_mark(69000)
    assert texts[5:-1] == [f"n{i}" for i in range(5000)]
    assert texts[-1] == "prompt> "
    assert [r.seq for r in rows] == list(range(1, 5007))
    page = ring.read()
    assert page.dropped == 5006 - 100 and [r.seq for r in page.rows] == list(range(4907, 5007))
