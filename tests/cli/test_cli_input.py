"""The `proctree` command under hostile input: odd pids, odd numbers, odd argv, odd names, deep trees.

Commands run in-process through main() where a wrong parse could reach a real
process: proctree.terminate_tree is replaced by a recorder there, so a pid
misread (like "1_0" as 10) is caught without signalling anything. A few runs
go through `python -m proctree` to check what lands on stdout and stderr.
"""

import json
import os
import subprocess
import sys

import pytest

import proctree
from proctree import Proc, Snapshot
from proctree._validate import PID_MAX
from proctree.cli import json_stream_of, main, version
from proctree.cli._common import CliError, parse_pid, parse_seconds, printable
from proctree.cli.tree import document, draw, table_roots, walk
from support.treekit import alive

ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__))))


def cli(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "proctree", *args], capture_output=True, text=True, timeout=timeout, env=ENV
    )


@pytest.fixture
def recorder(monkeypatch):
    """proctree.terminate_tree replaced: records (pid, grace) and signals nothing."""
    calls = []

    def fake(pid, *, grace=2.0, **kw):
        calls.append((pid, grace))
        raise proctree.NoSuchProcess(pid)

    monkeypatch.setattr(proctree, "terminate_tree", fake)
    return calls


def free_pid():
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())  # pids are < pid_max: never assigned
    if pid_max > PID_MAX:
        pytest.skip("pid_max above what proctree accepts")
    return pid_max


def one_json_error(text):
    """The single JSON error object in text, checked for its documented shape."""
    doc = json.loads(text)
    assert set(doc) == {"ok", "error"} and doc["ok"] is False
    assert set(doc["error"]) == {"type", "message", "pid"}
    assert isinstance(doc["error"]["type"], str) and isinstance(doc["error"]["message"], str)
    assert doc["error"]["pid"] is None or isinstance(doc["error"]["pid"], int)
    return doc["error"]


# -- pid syntax ------------------------------------------------------------------

BAD_PIDS = [
    "1_0",
    "+5",
    " 12",
    "12 ",
    "\t12",
    "12\n",
    "١٢",
    "１２",
    "²",
    "0x10",
    "1e3",
    "1.0",
    "10.",
    "−5",
    "-5",
    "-0",
    "",
    "0",
    "00",
    "010",
    "007",
    str(PID_MAX + 1),
    "9" * 30,
    "9" * 5000,
    "12abc",
    "pid",
    "٣",
]
GOOD_PIDS = [("1", 1), ("42", 42), (str(PID_MAX), PID_MAX), ("10", 10), ("100", 100)]


@pytest.mark.parametrize("text", BAD_PIDS, ids=[repr(t)[:20] for t in BAD_PIDS])
def test_parse_pid_refuses_all_but_plain_decimal(text):
    with pytest.raises(CliError) as info:
        parse_pid(text)
    assert info.value.kind == "UsageError" and info.value.code == 2
    assert len(info.value.message) < 200  # a 5,000-digit argument does not make a 5,000-character message


@pytest.mark.parametrize("text,pid", GOOD_PIDS)
def test_parse_pid_accepts_plain_decimal(text, pid):
    assert parse_pid(text) == pid


def test_leading_zero_message_says_why():
    with pytest.raises(CliError, match="leading zeros"):
        parse_pid("010")


@pytest.mark.parametrize("text", BAD_PIDS, ids=[repr(t)[:20] for t in BAD_PIDS])
def test_kill_with_a_bad_pid_signals_nothing(text, recorder, capsys):
    assert main(["kill", "--", text]) == 2
    assert recorder == []
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("proctree kill: ") and "Traceback" not in err


@pytest.mark.parametrize("text", BAD_PIDS, ids=[repr(t)[:20] for t in BAD_PIDS])
def test_tree_with_a_bad_pid_is_one_json_error(text, capsys):
    assert main(["tree", "--json", "--", text]) == 2
    out, err = capsys.readouterr()
    assert err == ""
    error = one_json_error(out)
    assert error["type"] == "UsageError" and error["pid"] is None


# -- seconds syntax ---------------------------------------------------------------

BAD_SECONDS = [
    "1_0",
    "inf",
    "nan",
    "-inf",
    "infinity",
    "1e400",
    "1e3",
    "-1",
    "-0.5",
    "+1",
    " 1",
    "1 ",
    "0x1",
    "١",
    "",
    ".",
    "1..2",
    "9" * 400,
    "2s",
]


@pytest.mark.parametrize("text", BAD_SECONDS, ids=[repr(t)[:20] for t in BAD_SECONDS])
def test_kill_with_a_bad_grace_signals_nothing(text, recorder, capsys):
    assert main(["kill", "4242", f"--grace={text}"]) == 2
    assert recorder == []
    out, err = capsys.readouterr()
    assert out == "" and "usage: proctree kill" in err and "--grace" in err


@pytest.mark.parametrize(
    "text,seconds", [("0", 0.0), ("2", 2.0), ("0.5", 0.5), (".25", 0.25), ("3.", 3.0), ("86400", 86400.0)]
)
def test_grace_in_plain_decimal_reaches_the_library(text, seconds, recorder, capsys):
    assert main(["kill", "4242", "--grace", text]) == 2  # the recorder answers NoSuchProcess
    assert recorder == [(4242, seconds)]


def test_parse_seconds_huge_is_refused():
    with pytest.raises(Exception, match="too many seconds"):
        parse_seconds("9" * 400)


# -- every --json path prints one JSON object -------------------------------------


def test_kill_json_missing_pid(recorder, capsys):
    pid = free_pid()
    assert main(["kill", str(pid), "--json"]) == 2
    out, err = capsys.readouterr()
    assert err == ""
    assert one_json_error(out) == {"type": "NoSuchProcess", "message": f"no process with pid {pid}", "pid": pid}


def test_kill_json_missing_pid_for_real():
    pid = free_pid()
    r = cli("kill", str(pid), "--json")
    assert r.returncode == 2 and r.stderr == ""
    assert one_json_error(r.stdout)["type"] == "NoSuchProcess"


@pytest.mark.parametrize("pid_of", [lambda: 1, os.getpid, os.getppid], ids=["init", "caller", "parent"])
def test_kill_json_refusal_is_a_value_error(pid_of, capsys, monkeypatch):
    from proctree._teardown import signals as _signals

    def refuse(*args, **kwargs):
        raise AssertionError(f"a signal was about to be sent: {args}")

    # Should the refusal ever break, the test fails instead of signalling its own ancestors.
    monkeypatch.setattr(_signals, "send", refuse)
    monkeypatch.setattr(_signals, "send_group", refuse)
    pid = pid_of()
    assert main(["kill", str(pid), "--json"]) == 2
    out, err = capsys.readouterr()
    assert err == ""
    error = one_json_error(out)
    assert error["type"] == "ValueError" and error["pid"] == pid and "refusing" in error["message"]


def test_tree_json_missing_pid(capsys):
    pid = free_pid()
    assert main(["tree", str(pid), "--json"]) == 2
    out, _ = capsys.readouterr()
    assert one_json_error(out) == {"type": "NoSuchProcess", "message": f"no process with pid {pid}", "pid": pid}


USAGE_ERRORS = [
    ["kill", "--json"],  # no pid
    ["kill", "5", "6", "--json"],
    ["kill", "5", "--json", "--frob"],
    ["kill", "5", "--json", "--grace"],
    ["kill", "5", "--json", "--grace", "x"],
    ["kill", "5", "--json=yes"],
    ["tree", "1", "2", "--json"],
    ["tree", "--json", "--depth", "3"],
    ["frobnicate", "--json"],
    ["--json"],
    ["--json", "tree"],  # --json belongs to the subcommand
    ["kill", "--json", "--", "5", "6"],
]


@pytest.mark.parametrize("argv", USAGE_ERRORS, ids=[" ".join(a) for a in USAGE_ERRORS])
def test_usage_errors_under_json_are_one_json_object(argv, recorder, capsys):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err == "" and recorder == []
    assert one_json_error(out)["type"] == "UsageError"


def test_usage_error_without_json_is_argparse_text(capsys):
    assert main(["kill", "5", "6"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("usage: proctree") and "proctree kill: unrecognized arguments: 6" in err


def test_interrupt_under_json_is_one_json_object(monkeypatch, capsys):
    def interrupted(pid, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(proctree, "terminate_tree", interrupted)
    assert main(["kill", "4242", "--json"]) == 130
    assert one_json_error(capsys.readouterr().out)["type"] == "KeyboardInterrupt"


def test_run_json_errors_are_one_json_object_on_stderr():
    for argv, code, kind in [
        (["run", "--json"], 2, "UsageError"),
        (["run", "--json", "--"], 2, "UsageError"),
        (["run", "--json", "--grace", "nan", "--", "true"], 2, "UsageError"),
        (["run", "--json", "--contain", "bogus", "--", "true"], 2, "UsageError"),
        (["run", "--json", "--", "/nonexistent/proctree-test-cmd"], 127, "FileNotFoundError"),
    ]:
        r = cli(*argv)
        assert r.returncode == code and r.stdout == "", (argv, r)
        assert one_json_error(r.stderr)["type"] == kind, argv


@pytest.mark.parametrize(
    "argv,where",
    [
        (["kill", "5", "--json"], "stdout"),
        (["kill", "--grace", "1", "--json", "5"], "stdout"),
        (["kill", "--", "--json"], None),
        (["kill", "5"], None),
        (["tree", "--json"], "stdout"),
        (["run", "--json", "--", "x"], "stderr"),
        (["run", "--grace", "1", "--json", "x"], "stderr"),
        (["run", "x", "--json"], None),  # CMD's own option
        (["run", "--", "x", "--json"], None),
        (["--json"], "stdout"),
    ],
)
def test_json_stream_of_a_command_line_that_did_not_parse(argv, where):
    stream = json_stream_of(argv)
    assert stream is (None if where is None else getattr(sys, where))


@pytest.mark.parametrize("argv", [["--version"], ["tree"], ["tree", "--json"], ["kill", "--json", "0"]])
def test_closed_stdout_is_no_traceback(argv):
    # `proctree ... >&-`: the command runs, its output goes nowhere.
    r = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "proctree", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert "Traceback" not in r.stderr and r.returncode in (0, 2), r.stderr


# -- --version, --help, abbreviations, `--` ------------------------------------------


def test_version():
    r = cli("--version")
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout == f"proctree {version()}\n"
    from importlib.metadata import version as dist_version

    assert version() == dist_version("proctree") == proctree.__version__


def test_version_falls_back_to_the_package_constant(monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert version() == proctree.__version__


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["-h"],
        ["tree", "--help"],
        ["kill", "--help"],
        ["run", "--help"],
        ["demo", "--help"],
        ["kill", "5", "--help"],
    ],
)
def test_help_everywhere(argv):
    r = cli(*argv)
    assert r.returncode == 0 and r.stderr == "" and r.stdout.startswith("usage: proctree")


def test_option_abbreviations_are_refused(recorder, capsys):
    # `--js` must not quietly mean --json, nor `--gr` --grace.
    assert main(["kill", "4242", "--js"]) == 2
    assert main(["kill", "4242", "--gr", "1"]) == 2
    assert recorder == []
    assert "unrecognized arguments: --js" in capsys.readouterr().err


def test_double_dash_ends_options(recorder, capsys):
    assert main(["kill", "--grace", "0.5", "--", "4242"]) == 2
    assert recorder == [(4242, 0.5)]


def test_negative_pid_is_not_an_option(recorder, capsys):
    assert main(["kill", "-5"]) == 2
    assert recorder == [] and "not a pid: '-5'" in capsys.readouterr().err


# -- names a process chose: printed, never executed by the terminal -----------------


@pytest.mark.parametrize(
    "name,shown",
    [
        ("bash", "bash"),
        ("naïve 名前", "naïve 名前"),
        ("a b (c)", "a b (c)"),
        ("new\nline", "new\\nline"),
        ("\x1b[2Jcleared", "\\x1b[2Jcleared"),
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),
        ("abc\u202eevil", "abc\\u202eevil"),
        ("\udcff\udcfe", "\\xff\\xfe"),
        ("back\\slash", "back\\\\slash"),
        ("\x9b31m", "\\x9b31m"),
        ("\x7f", "\\x7f"),
    ],
)
def test_printable(name, shown):
    assert printable(name) == shown


def P(pid, ppid, name=None):
    return Proc(pid, ppid, pid, pid, 0, "S", pid, name or f"p{pid}")


def test_tree_drawing_escapes_hostile_names():
    snap = Snapshot([P(1, 0), P(2, 1, "\x1b[2J\udcff"), P(3, 1, "x\u202ey\nz")])
    import io

    buf = io.StringIO()
    draw(snap, walk(snap, [1]), buf)
    text = buf.getvalue()
    assert text.encode("utf-8")  # nothing stdout could not encode
    assert all(ch == "\n" or ch.isprintable() for ch in text)
    assert text.splitlines() == [
        "1 [pgid 1 sid 1 S] p1",
        "├─ 2 [pgid 2 sid 2 S] \\x1b[2J\\xff",
        "└─ 3 [pgid 3 sid 3 S] x\\u202ey\\nz",
    ]


# -- deep and odd trees, synthetic ------------------------------------------------


def chain(depth):
    return Snapshot([P(1, 0)] + [P(pid, pid - 1) for pid in range(2, depth + 2)])


def test_synthetic_chain_far_past_the_recursion_limit():
    import io

    depth = 5 * sys.getrecursionlimit()
    snap = chain(depth)
    steps = list(walk(snap, [1]))
    assert [(pid, d) for pid, d, _, _ in steps] == [(pid, pid - 1) for pid in range(1, depth + 2)]
    buf = io.StringIO()
    draw(snap, walk(snap, [1]), buf)
    lines = buf.getvalue().splitlines()
    assert len(lines) == depth + 1
    assert lines[-1] == "   " * (depth - 1) + f"└─ {depth + 1} [pgid {depth + 1} sid {depth + 1} S] p{depth + 1}"
    doc = json.loads(json.dumps(document(snap, walk(snap, [1]))))  # flat: any JSON parser reads it
    assert doc["roots"] == [1] and len(doc["procs"]) == depth + 1
    assert doc["procs"][-1]["depth"] == depth and doc["procs"][-1]["children"] == []


def test_drawing_shape():
    import io

    #  1 -> 2 -> 4 -> 6 ; 2 -> 5 ; 1 -> 3 -> 7
    snap = Snapshot([P(1, 0), P(2, 1), P(3, 1), P(4, 2), P(5, 2), P(6, 4), P(7, 3)])
    buf = io.StringIO()
    draw(snap, walk(snap, [1]), buf)
    assert [line.split(" [")[0] for line in buf.getvalue().splitlines()] == [
        "1",
        "├─ 2",
        "│  ├─ 4",
        "│  │  └─ 6",
        "│  └─ 5",
        "└─ 3",
        "   └─ 7",
    ]


def test_whole_table_walk_lists_every_process_once_even_cycles():
    # 1 is a root; 50 -> 51 -> 52 -> 50 is a parent-link cycle; 60 is its own parent; 70's parent is missing.
    snap = Snapshot([P(1, 0), P(2, 1), P(50, 52), P(51, 50), P(52, 51), P(60, 60), P(61, 60), P(70, 99)])
    roots = table_roots(snap)
    assert roots == [1, 60, 70]
    steps = list(walk(snap, roots, everything=True))
    pids = [pid for pid, _, _, _ in steps]
    assert sorted(pids) == sorted(snap) and len(pids) == len(set(pids))
    assert document(snap, walk(snap, roots, everything=True))["roots"] == [1, 60, 70, 50]


def test_tree_of_a_pid_in_a_cycle_stops():
    snap = Snapshot([P(50, 52), P(51, 50), P(52, 51)])
    assert [pid for pid, _, _, _ in walk(snap, [50])] == [50, 51, 52]


# -- a real chain of 1,000+ processes ------------------------------------------------


def light_chain(kit, depth):
    """A chain `depth` links below the root, each link reporting its pid; every
    process but the deepest then becomes `sleep` (exec keeps the pid and the
    parent link), so a thousand of them stay cheap on a shared machine."""
    return kit.start(
        """
        DEPTH = int(sys.argv[2])
        say("root")
        for level in range(DEPTH):
            if os.fork():
                os.execvp("sleep", ["sleep", "1000"])
            say("link")
        ready()
        idle()
        """,
        extra_args=(depth,),
    )


def test_tree_of_a_live_chain_1000_deep(kit):
    depth = 1000
    tree = light_chain(kit, depth)
    links = tree.roles("link")
    assert len(links) == depth
    expected = [tree.root, *links]

    r = cli("tree", str(tree.root), "--json", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and doc["roots"] == [tree.root]
    assert [p["pid"] for p in doc["procs"]] == expected
    assert [p["depth"] for p in doc["procs"]] == list(range(depth + 1))
    assert all(p["children"] == [q] for p, q in zip(doc["procs"], expected[1:]))

    r = cli("tree", str(tree.root), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert len(lines) == depth + 1
    assert [int(line.lstrip(" └─").split(" ")[0]) for line in lines] == expected

    # A reader that stops early (`| head -1`) is not an error, and leaves no noise.
    p = subprocess.Popen(
        [sys.executable, "-m", "proctree", "tree", str(tree.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    assert p.stdout.readline().startswith(f"{tree.root} ".encode())
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=60) == 0 and err == b""
    p.stderr.close()

    assert all(alive(pid) for pid in expected)  # drawing signals nothing
