"""honcho's own `start` tests, ported end to end onto `proctree up`.

Source: nickstenning/honcho at 2f47b72 (2025-06-03): tests/integration/test_start.py,
and the start-related unit tests of tests/test_manager.py, tests/test_process.py,
tests/test_printer.py and tests/test_command.py. (tests/test_environ.py's are in test_up_honcho_suite_environ.py.)
Each test names the original (`honcho: file::test`). honcho's unit tests drive its
Manager and Printer with fakes; here every one is a real `python -m proctree up` on a
temp Procfile, `honcho start` mapped to `proctree up` with the same options.

Where honcho and foreman disagree and proctree follows foreman, the test asserts
proctree's behaviour and says `CHOICE:`; docs/up.md's "Coming from honcho" lists each.
"""

import json
import os
import pty
import re
import select
import shlex
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import proctree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
PY = shlex.quote(sys.executable)
CLEARED = ("PROCFILE", "PORT", "NO_COLOR", "ANIMAL", "FORCE_COLOR")
STAMP = r"\d\d:\d\d:\d\d"


def environ(extra=None):
    out = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for name in CLEARED:
        out.pop(name, None)
    out.update(extra or {})
    return out


def write(folder, files):
    for name, text in files.items():
        (folder / name).write_text(text)


def up(folder, *args, env=None):
    """`honcho start ARGS` is `proctree up ARGS`: (status, stdout, stderr), as honcho's run_honcho gives them."""
    r = subprocess.run(
        [sys.executable, "-m", "proctree", "up", "--grace", "2", *args],
        cwd=str(folder),
        env=environ(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return r.returncode, r.stdout, r.stderr


def on_a_terminal(folder, *args):
    """up's output as a terminal receives it (honcho's FakeTTY)."""
    main, sub = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proctree", "up", *args],
            cwd=str(folder),
            env=environ({"TERM": "xterm"}),
            stdin=subprocess.DEVNULL,
            stdout=sub,
            stderr=subprocess.PIPE,
        )
        os.close(sub)
        sub = -1
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: every writer is gone
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(60) == 0, proc.stderr.read()
        proc.stderr.close()
        return b"".join(chunks).decode().replace("\r\n", "\n")
    finally:
        os.close(main)
        if sub >= 0:
            os.close(sub)


# --- tests/integration/test_start.py (its testenv fixture: files in a temp folder) ---

SCRIPT = textwrap.dedent("""
    import os
    import sys
    print(os.environ.get("ANIMAL", "elephant"))
    print("error output", file=sys.stderr)
""")


def test_start(tmp_path):
    """honcho: tests/integration/test_start.py::test_start"""
    write(tmp_path, {"Procfile": f"foo: {PY} test.py", "test.py": SCRIPT})
    ret, out, err = up(tmp_path)
    assert ret == 0, err
    assert "elephant" in out
    assert "error output" in out  # stderr merged into the output, as honcho merges it


def test_start_env(tmp_path):
    """honcho: tests/integration/test_start.py::test_start_env"""
    write(tmp_path, {".env": "ANIMAL=giraffe", "Procfile": f"foo: {PY} test.py", "test.py": SCRIPT})
    ret, out, err = up(tmp_path)
    assert "giraffe" in out, err


def test_start_env_procfile(tmp_path):
    """honcho: tests/integration/test_start.py::test_start_env_procfile"""
    write(
        tmp_path,
        {
            ".env": "PROCFILE=Procfile.dev",
            "Procfile": f"foo: {PY} test.py",
            "Procfile.dev": f"bar: {PY} test_dev.py",
            "test.py": SCRIPT,
            "test_dev.py": 'print("mongoose")\n',
        },
    )
    ret, out, err = up(tmp_path)
    assert "mongoose" in out, err


def test_start_returncode(tmp_path):
    """honcho: tests/integration/test_start.py::test_start_returncode"""
    write(tmp_path, {"Procfile": f"foo: {PY} test.py", "test.py": "import sys; sys.exit(42)"})
    ret, out, err = up(tmp_path)
    assert ret == 42, err


# --- tests/test_manager.py (Manager: names, widths, colours, the system lines, the exit status) ---


def test_init_sets_default_printer_width(tmp_path):
    """honcho: tests/test_manager.py::TestManager::test_init_sets_default_printer_width"""
    write(tmp_path, {"Procfile": "a: echo short\n"})
    ret, out, err = up(tmp_path)
    assert ret == 0, err
    assert re.search(rf"^{STAMP} a\.1    \| short$", out, re.M), out  # padded to 'system'
    assert re.search(rf"^{STAMP} system \| a\.1 started \(pid=\d+\)$", out, re.M), out


def test_add_process_updates_printer_width(tmp_path):
    """honcho: tests/test_manager.py::TestManager::test_add_process_updates_printer_width"""
    write(tmp_path, {"Procfile": "interesting: echo wide\n"})
    ret, out, err = up(tmp_path)
    assert re.search(rf"^{STAMP} interesting\.1 \| wide$", out, re.M), out
    assert re.search(rf"^{STAMP} system        \| interesting\.1 started", out, re.M), out


def test_add_process_sets_name(tmp_path):
    """honcho: tests/test_manager.py::TestManager::test_add_process_sets_name (`honcho start` names it foo.1)"""
    write(tmp_path, {"Procfile": "foo: echo $PS\n"})
    ret, out, err = up(tmp_path, "--no-prefix")
    assert "foo.1" in out.splitlines(), err


def test_add_process_sets_cmd(tmp_path):
    """honcho: tests/test_manager.py::TestManager::test_add_process_sets_cmd: the command is the line, as written."""
    write(tmp_path, {"Procfile": "foo: echo ruby   server.rb\n"})
    ret, out, err = up(tmp_path, "--json")
    started = [json.loads(line) for line in out.splitlines() if '"kind": "started"' in line]
    assert [e["service"]["command"] for e in started] == ["echo ruby   server.rb"], err
    assert "ruby server.rb" in out  # run by the shell, which splits it


def test_add_process_sets_colour_and_unique_colours(tmp_path):
    """honcho: tests/test_manager.py::TestManager::test_add_process_sets_colour and ..._sets_unique_colours

    CHOICE: foreman's palette and escapes, not honcho's (honcho: \\033[0m\\033[31m...).
    """
    write(tmp_path, {"Procfile": "foo: echo from foo; sleep 1\nbar: echo from bar; sleep 5\n"})
    text = on_a_terminal(tmp_path)
    colours = {}
    for name in ("foo.1", "bar.1"):
        found = re.search(rf"(\x1b\[[0-9;]*m){STAMP} " + re.escape(name), text)
        assert found, repr(text)
        colours[name] = found.group(1)
    assert colours["foo.1"] != colours["bar.1"]


def test_add_process_sets_quiet(tmp_path):
    """honcho: tests/test_manager.py::TestManager::test_add_process_sets_quiet (`honcho start -q foo`)"""
    write(tmp_path, {"Procfile": "foo: echo secret; sleep 1\nbar: echo shown; sleep 5\n"})
    ret, out, err = up(tmp_path, "-q", "foo")
    assert ret == 0, err
    assert "secret" not in out and "shown" in out
    assert "foo.1 started (pid=" in out


def test_add_process_name_must_be_unique(tmp_path):
    """honcho: tests/test_manager.py::TestManager::test_add_process_name_must_be_unique

    honcho fails an assert (a traceback, status 1); up refuses the file before anything starts.
    """
    write(tmp_path, {"Procfile": "foo: echo one\nfoo: echo another\n"})
    ret, out, err = up(tmp_path)
    assert ret == 2
    assert "'foo' is defined twice (first on line 1)" in err
    assert out == ""


def test_add_process_sets_cwd(tmp_path):
    """honcho: tests/test_manager.py::TestManager::test_add_process_sets_cwd

    CHOICE: `honcho start` passes no cwd (its entries run in the current folder); up runs
    them in the Procfile's folder (-d DIR: in DIR), as foreman does.
    """
    sub = tmp_path / "app"
    sub.mkdir()
    write(sub, {"Procfile": "foo: pwd\n"})
    ret, out, err = up(tmp_path, "--no-prefix", "-f", "app/Procfile")
    assert ret == 0, err
    assert os.path.realpath(sub) in [os.path.realpath(line) for line in out.splitlines() if line.startswith("/")]


def test_loop_with_empty_manager_returns_immediately(tmp_path):
    """honcho: tests/test_manager.py::TestManager::test_loop_with_empty_manager_returns_immediately"""
    write(tmp_path, {"Procfile": ""})
    started = time.monotonic()
    ret, out, err = up(tmp_path)
    assert ret == 0
    assert "warning" in err
    assert time.monotonic() - started < 30  # loose: returns without waiting on anything


def test_printer_receives_messages_in_correct_order(tmp_path):
    """honcho: tests/test_manager.py::TestManager::test_printer_receives_messages_in_correct_order

    CHOICE: the end is said in foreman's words, `foo.1 exited with code 0`, not honcho's
    `foo.1 stopped (rc=0)`; the started line is honcho's, `foo.1 started (pid=N)`.
    """
    write(tmp_path, {"Procfile": "foo: echo hello, world!\n"})
    ret, out, err = up(tmp_path, "--no-prefix")
    lines = out.splitlines()
    assert re.fullmatch(r"foo\.1 started \(pid=\d+\)", lines[0]), lines
    assert lines[1] == "hello, world!"
    assert lines[2] == "foo.1 exited with code 0"


def test_printer_receives_lines_multi_process(tmp_path):
    """honcho: tests/test_manager.py::TestManager::test_printer_receives_lines_multi_process"""
    write(tmp_path, {"Procfile": "foo: echo process one; sleep 1\nbar: echo process two; sleep 5\n"})
    ret, out, err = up(tmp_path, "--no-timestamp")
    lines = out.splitlines()
    assert "foo.1  | process one" in lines, out
    assert "bar.1  | process two" in lines, out


def test_returncode_set_by_first_exiting_process(tmp_path):
    """honcho: tests/test_manager.py::TestManager::test_returncode_set_by_first_exiting_process"""
    write(
        tmp_path,
        {"Procfile": "foo: sleep 0.5; exit 56\nbar: trap 'exit 21' TERM; while :; do sleep 0.1; done\n"},
    )
    ret, out, err = up(tmp_path)
    assert ret == 56, out + err


def test_printer_receives_lines_after_stop(tmp_path):
    """honcho: tests/test_manager.py::TestManager::test_printer_receives_lines_after_stop"""
    bar = "echo hi from bar; trap 'echo fishmongers; echo butchers; exit 0' TERM; while :; do sleep 0.1; done"
    write(tmp_path, {"Procfile": f"foo: echo hi from foo; sleep 1\nbar: {bar}\n"})
    ret, out, err = up(tmp_path, "--no-prefix")
    lines = out.splitlines()
    assert "fishmongers" in lines and "butchers" in lines, out
    assert lines.index("foo.1 exited with code 0") < lines.index("fishmongers") < lines.index("butchers")


# --- tests/test_process.py (Process: the messages one entry gives; its ctor tests are the Manager's above) ---


def test_output_receives_start_with_pid(tmp_path):
    """honcho: tests/test_process.py::TestProcess::test_output_receives_start_with_pid: the pid is the entry's own."""
    write(tmp_path, {"Procfile": "foo: echo mypid=$$\n"})
    ret, out, err = up(tmp_path, "--no-prefix")
    pid = re.search(r"^foo\.1 started \(pid=(\d+)\)$", out, re.M)
    assert pid and f"mypid={pid.group(1)}" in out.splitlines(), out


def test_output_receives_lines(tmp_path):
    """honcho: tests/test_process.py::TestProcess::test_output_receives_lines, ..._message_contains_name, ..._time"""
    write(tmp_path, {"Procfile": "foo: printf 'hello\\nworld\\n'\n"})
    ret, out, err = up(tmp_path)
    for line in ("hello", "world"):
        assert re.search(rf"^{STAMP} foo\.1  \| {line}$", out, re.M), out


def test_output_does_not_receive_lines_when_quiet(tmp_path):
    """honcho: tests/test_process.py::TestProcess::test_output_does_not_receive_lines_when_quiet"""
    write(tmp_path, {"Procfile": "foo: printf 'hello\\nworld\\n'; sleep 1\nbar: sleep 5\n"})
    ret, out, err = up(tmp_path, "-q", "foo")
    assert "hello" not in out and "world" not in out and "foo.1 started" in out


def test_output_receives_stop_with_returncode(tmp_path):
    """honcho: tests/test_process.py::TestProcess::test_output_receives_stop, ..._stop_with_returncode

    CHOICE: said in foreman's words (`exited with code 3`), not honcho's `stopped (rc=3)`.
    """
    write(tmp_path, {"Procfile": "foo: exit 3\n"})
    ret, out, err = up(tmp_path, "--no-prefix")
    assert ret == 3 and "foo.1 exited with code 3" in out.splitlines(), out


# --- tests/test_printer.py (Printer: the line format, start output only) ---


def test_write(tmp_path):
    """honcho: tests/test_printer.py::TestPrinter::test_write"""
    write(tmp_path, {"Procfile": "foo: echo monkeys\n"})
    ret, out, err = up(tmp_path)
    assert re.search(rf"^{STAMP} foo\.1  \| monkeys$", out, re.M), out


def test_write_wrong_type(tmp_path):
    """honcho: tests/test_printer.py::TestPrinter::test_write_wrong_type

    honcho's Printer refuses a message that is not a line; end to end, every line up
    prints is one formatted line, its own and the entries' alike.
    """
    write(tmp_path, {"Procfile": "foo: echo monkeys\n"})
    ret, out, err = up(tmp_path)
    assert out and all(re.fullmatch(rf"{STAMP} (foo\.1 |system) \| .+", line) for line in out.splitlines()), out


def test_write_invalid_utf8(tmp_path):
    """honcho: tests/test_printer.py::TestPrinter::test_write_invalid_utf8"""
    write(tmp_path, {"Procfile": "foo: printf '\\376\\377\\n'\n"})
    ret, out, err = up(tmp_path, "--no-prefix")
    assert "\ufffd\ufffd" in out.splitlines(), repr(out)


def test_write_no_newline(tmp_path):
    """honcho: tests/test_printer.py::TestPrinter::test_write_no_newline"""
    write(tmp_path, {"Procfile": "foo: printf monkeys\n"})
    ret, out, err = up(tmp_path)
    assert re.search(rf"^{STAMP} foo\.1  \| monkeys\n", out, re.M), repr(out)


def test_write_multiline(tmp_path):
    """honcho: tests/test_printer.py::TestPrinter::test_write_multiline"""
    write(tmp_path, {"Procfile": "foo: printf 'one\\ntwo\\nthree\\n'\n"})
    ret, out, err = up(tmp_path, "--no-timestamp")
    lines = out.splitlines()
    start = lines.index("foo.1  | one")
    assert lines[start : start + 3] == ["foo.1  | one", "foo.1  | two", "foo.1  | three"]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("robert-louis-stevenson", id="test_write_with_name"),
        pytest.param("oop", id="test_write_with_name_and_set_width"),
    ],
)
def test_write_with_name_and_width(tmp_path, name):
    """honcho: tests/test_printer.py::TestPrinter::test_write_with_name, ..._with_set_width, ..._with_name_and_set_width

    The width is the longest name's ('system' at least); shorter names are padded.
    A name with spaces (honcho's 'Robert Louis Stevenson') is not a Procfile name in honcho either.
    """
    write(tmp_path, {"Procfile": f"{name}: echo narcissist\nsixsix: echo giraffe\n"})
    ret, out, err = up(tmp_path, "--no-timestamp")
    width = max(len("system"), len(name) + 2, len("sixsix.1"))
    assert f"{name + '.1':<{width}} | narcissist" in out.splitlines(), out
    assert f"{'sixsix.1':<{width}} | giraffe" in out.splitlines(), out


def test_write_with_colour_tty(tmp_path):
    """honcho: tests/test_printer.py::TestPrinter::test_write_with_colour_tty

    CHOICE: coloured on a terminal, in foreman's palette and escapes; honcho's exact
    '\\033[0m\\033[31m12:42:00 foo | \\033[0m' bytes are not kept.
    """
    write(tmp_path, {"Procfile": "foo: echo conflate\n"})
    text = on_a_terminal(tmp_path)
    assert re.search(r"\x1b\[[0-9;]*m[^\n]*foo\.1[^\n]*conflate", text), repr(text)


def test_write_with_colour_non_tty(tmp_path):
    """honcho: tests/test_printer.py::TestPrinter::test_write_with_colour_non_tty"""
    write(tmp_path, {"Procfile": "foo: echo conflate\n"})
    ret, out, err = up(tmp_path)
    assert re.search(rf"^{STAMP} foo\.1  \| conflate$", out, re.M) and "\x1b" not in out


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--no-prefix"], id="test_write_without_prefix_tty"),
        pytest.param(["--no-prefix", "--no-colour"], id="test_write_without_prefix_and_colour_tty"),
    ],
)
def test_write_without_prefix_tty(tmp_path, args):
    """honcho: tests/test_printer.py::TestPrinter::test_write_without_prefix_tty, ..._without_prefix_and_colour_tty"""
    write(tmp_path, {"Procfile": "foo: echo paranoid android\n"})
    text = on_a_terminal(tmp_path, *args)
    assert "paranoid android" in text.splitlines(), repr(text)


def test_write_without_colour_tty(tmp_path):
    """honcho: tests/test_printer.py::TestPrinter::test_write_without_colour_tty"""
    write(tmp_path, {"Procfile": "foo: echo paranoid android\n"})
    text = on_a_terminal(tmp_path, "--no-colour")
    assert re.search(rf"^{STAMP} foo\.1  \| paranoid android$", text, re.M) and "\x1b" not in text, repr(text)


def test_write_without_prefix_non_tty(tmp_path):
    """honcho: tests/test_printer.py::TestPrinter::test_write_without_prefix_non_tty"""
    write(tmp_path, {"Procfile": "foo: echo paranoid android\n"})
    ret, out, err = up(tmp_path, "--no-prefix")
    assert "paranoid android" in out.splitlines()


def test_write_flushes_output(tmp_path):
    """honcho: tests/test_printer.py::TestPrinter::test_write_flushes_output

    End to end: a line reaches a pipe while its entry is still running, not at exit.
    """
    write(tmp_path, {"Procfile": "foo: echo paranoid android; sleep 300\n"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctree", "up", "--no-prefix", "--grace", "2"],
        cwd=str(tmp_path),
        env=environ(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        seen = b""
        deadline = time.monotonic() + 30
        while b"paranoid android\n" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                seen += chunk
        assert b"paranoid android\n" in seen
        assert proc.poll() is None  # still running: the line was not held back until the end
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- tests/test_command.py (the start options, and where PORT and PROCFILE come from) ---


@pytest.mark.parametrize(
    "orders",
    [
        pytest.param([["-f", "Procfile"], ["foo", "-f", "Procfile"]], id="#173"),
        pytest.param([["--no-prefix", "--no-colour"], ["--no-colour", "--no-prefix"]], id="#223"),
    ],
)
def test_command_equivalence(tmp_path, orders):
    """honcho: tests/test_command.py::test_command_equivalence

    CHOICE: up's options follow `up` (any order, before or after the names), as foreman's
    follow `start`; honcho also takes them before `start` (`honcho -f Procfile start`).
    """
    write(tmp_path, {"Procfile": "foo: echo same\n"})
    outputs = set()
    for args in orders:
        ret, out, err = up(tmp_path, "--no-timestamp", *args)
        assert ret == 0, err
        outputs.add(re.sub(r"pid[ =]\d+", "pid", out))
    assert len(outputs) == 1, outputs
    before = subprocess.run(
        [sys.executable, "-m", "proctree", "-f", "Procfile", "up"],
        cwd=str(tmp_path),
        env=environ(),
        capture_output=True,
        timeout=60,
    )
    assert before.returncode == 2  # refused before anything runs


def test_port_precedence(tmp_path):
    """honcho: tests/test_command.py::test_port_precedence: default, then the environment, then .env, then -p."""
    write(tmp_path, {"Procfile": "foo: echo port=$PORT\n"})
    assert "port=5000" in up(tmp_path, "--no-prefix")[1].splitlines()
    assert "port=4200" in up(tmp_path, "--no-prefix", env={"PORT": "4200"})[1].splitlines()
    write(tmp_path, {".env": "PORT=4300\n"})
    assert "port=4300" in up(tmp_path, "--no-prefix", env={"PORT": "4200"})[1].splitlines()
    assert "port=4400" in up(tmp_path, "--no-prefix", "-p", "4400", env={"PORT": "4200"})[1].splitlines()


def test_procfile_precedence(tmp_path):
    """honcho: tests/test_command.py::test_procfile_precedence: default, then the environment, then .env, then -f."""
    for name in ("Procfile", "Procfile.osenv", "Procfile.appenv", "Procfile.cli"):
        write(tmp_path, {name: f"foo: echo from {name}\n"})
    assert "from Procfile" in up(tmp_path, "--no-prefix")[1].splitlines()
    osenv = {"PROCFILE": "Procfile.osenv"}
    assert "from Procfile.osenv" in up(tmp_path, "--no-prefix", env=osenv)[1].splitlines()
    write(tmp_path, {".env": "PROCFILE=Procfile.appenv\n"})
    assert "from Procfile.appenv" in up(tmp_path, "--no-prefix", env=osenv)[1].splitlines()
    assert "from Procfile.cli" in up(tmp_path, "--no-prefix", "-f", "Procfile.cli", env=osenv)[1].splitlines()
