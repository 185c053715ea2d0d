"""The `proctree` command's conventions: -q/-v, one-line --json, the subcommand's usage on its
errors, exit statuses in --help, run's line on what it ended, reap's aggregated warnings,
command lines in tree, demo without --json.

Commands run through `python -m proctree` (what users see on stdout and
stderr), except reap's printing, which is fed a made-up report in process.
"""

import io
import json
import os
import re
import subprocess
import sys

import pytest

import proctree
from proctree.cli import reap as reap_cli
from proctree.cli.reap import aggregated, kind_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
ENV = dict(os.environ, PYTHONPATH=ROOT)
ENV.pop("COLUMNS", None)
COMMANDS = ["tree", "kill", "run", "reap", "up", "demo"]


def cli(*args, timeout=60, env=None, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "proctree", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or ENV,
        cwd=cwd,
    )


# A process whose argv holds an escape character, which the drawing must escape.
SLEEPER = [sys.executable, "-c", "import time; time.sleep(30)", "tree\x1bmark"]
SHOWN = " ".join(SLEEPER[:-1]) + " tree\\x1bmark"


@pytest.fixture
def sleeper():
    child = subprocess.Popen(SLEEPER)
    yield child
    child.kill()
    child.wait()


# -- usage, help, options common to every command --------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unknown_option_prints_the_subcommands_usage(command):
    # kill's PID is not a pid at all: nothing could be signalled even if the parse went wrong.
    extra = {"run": ["--", "true"], "kill": ["not-a-pid"]}.get(command, [])
    args = [command, "--no-such-option", *extra]
    r = cli(*args)
    assert r.returncode == 2
    assert r.stderr.startswith(f"usage: proctree {command} ")
    assert f"proctree {command}: unrecognized arguments: --no-such-option" in r.stderr
    assert r.stdout == ""


def test_an_extra_argument_prints_the_subcommands_usage():
    r = cli("tree", "1", "2")
    assert r.returncode == 2 and r.stderr.startswith("usage: proctree tree ")


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_every_help_lists_its_exit_statuses(command):
    r = cli(*([command] if command else []), "--help")
    assert r.returncode == 0, r.stderr
    statuses = r.stdout.split("exit status:\n", 1)[1]
    rows = [line.split()[0] for line in statuses.splitlines() if line.startswith("  ") and line[2] != " "]
    assert "2" in rows or command == "demo"
    assert "0" in rows or command == "run"  # run's is CMD's own: N


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_q_and_not_q_with_v(command):
    r = cli(command, "--help")
    # up's -q also takes honcho's NAMES (the entries whose output to hide): `-q [NAMES], --quiet [NAMES]`.
    assert re.search(r"-q( \[NAMES\])?, --quiet", r.stdout)
    if "-v, --verbose" in r.stdout:
        r = cli(command, "-q", "-v", *(["not-a-pid"] if command == "kill" else []))
        assert r.returncode == 2 and "not allowed with argument" in r.stderr


def test_demo_json_is_a_usage_error_in_text():
    r = cli("demo", "--json")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("usage: proctree demo ")
    assert "--json is not supported" in r.stderr


def test_demo_quiet_says_one_line_per_scene():
    r = cli("demo", "-q", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 5 and all(line.endswith(": ok") for line in lines[:4])
    assert lines[-1] == "All scenes done; nothing left running."


# -- --json: one object per line ---------------------------------------------------


def test_json_is_one_line_through_a_pipe(sleeper):
    for args in (["tree", str(os.getpid()), "--json"], ["kill", str(sleeper.pid), "--json"]):
        r = cli(*args)
        assert r.returncode == 0, r.stderr
        assert r.stdout.count("\n") == 1
        assert json.loads(r.stdout)["ok"] is True


def test_json_errors_are_one_line_too():
    r = cli("kill", "abc", "--json")
    assert r.returncode == 2 and r.stdout.count("\n") == 1
    assert json.loads(r.stdout)["error"]["type"] == "UsageError"


# -- kill -q / -v --------------------------------------------------------------------


def test_kill_quiet_prints_nothing_and_verbose_lists_every_member():
    a = subprocess.Popen(["sleep", "30"])
    b = subprocess.Popen(["sh", "-c", "sleep 31 & wait"])
    try:
        r = cli("kill", "-q", str(a.pid))
        assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
        r = cli("kill", "-v", str(b.pid))
        assert r.returncode == 0, r.stderr
        found = r.stdout.split("found:\n", 1)[1].splitlines()
        assert any(str(b.pid) in line and "(exited)" in line for line in found)
        assert any("sleep" in line for line in found)
    finally:
        for p in (a, b):
            p.kill()
            p.wait()


# -- run: what it ended ---------------------------------------------------------------

LEAVER = "sleep 30 & sleep 31 & sleep 0.3"  # the two sleeps have exec'd when CMD exits


def test_run_says_in_one_line_what_cmd_left_running():
    r = cli("run", "--grace", "1", "--", "sh", "-c", LEAVER)
    assert r.returncode == 0
    assert r.stderr == "proctree run: ended 2 processes CMD left running: sleep x2\n"


def test_run_verbose_names_pids_and_says_when_nothing_was_left():
    r = cli("run", "-v", "--", "sh", "-c", "sleep 30 & sleep 0.3; exit 3")
    assert r.returncode == 3
    (line,) = r.stderr.splitlines()
    assert line.startswith("proctree run: ended 1 process CMD left running: sleep (")
    r = cli("run", "-v", "--", "true")
    assert r.stderr == "proctree run: CMD left nothing running\n"


def test_run_quiet_says_nothing_and_clean_runs_say_nothing():
    r = cli("run", "-q", "--", "sh", "-c", LEAVER)
    assert (r.returncode, r.stderr) == (0, "")
    r = cli("run", "--", "true")
    assert (r.returncode, r.stderr) == (0, "")


def test_run_json_carries_what_it_ended():
    r = cli("run", "--json", "--", "sh", "-c", LEAVER)
    assert r.returncode == 0
    (line,) = r.stderr.splitlines()
    doc = json.loads(line)
    names = {p["pid"]: p["name"] for p in doc["found"]}
    assert len(doc["ended"]) == 2 and {names[pid] for pid in doc["ended"]} == {"sleep"}


# -- reap: warnings on stderr, one line per kind ---------------------------------------


def _reaped(warnings, verbose=False):
    """What reap prints (stdout, stderr) for a report with these warnings."""
    out, err = io.StringIO(), io.StringIO()
    reap_cli._print_text(proctree.ReapReport(warnings=tuple(warnings)), out, err, verbose)
    return out.getvalue(), err.getvalue()


RECEIPTS = [f"receipt /run/proctree/{i}.json ignored: written in other (or unrecorded) namespaces" for i in range(75)]
OTHER = ["3 process(es) with a malformed PROCTREE_OWNER: never proof of anything"]


def test_reap_warnings_are_aggregated_on_stderr():
    out, err = _reaped(RECEIPTS + OTHER)
    assert "warning" not in out
    assert err.splitlines() == [
        "proctree reap: warning: receipt PATH ignored: written in other (or unrecorded) namespaces "
        "(75 times; -v lists each)",
        "proctree reap: warning: " + OTHER[0],
    ]


def test_reap_verbose_lists_every_warning():
    _, err = _reaped(RECEIPTS + OTHER, verbose=True)
    assert len(err.splitlines()) == 76


def test_reap_quiet_prints_nothing_at_all():
    r = cli("reap", "--dry-run", "-q")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


@pytest.mark.parametrize(
    "a,b,same",
    [
        ("rule x: pid 12 is in another namespace", "rule x: pid 4031 is in another namespace", True),
        ("cgroup /a/b: not proof", "cgroup /c/d/e: not proof", True),
        ("receipt /a ignored: bad json", "receipt /a ignored: too big", False),
        ("marker 1:2@4026532175.4026531834.0: other", "marker 3:4@4026531836.4026531834.0: other", True),
        ("marker 1:2@4026532175.4026531834.0: other", "marker 3:4: other", False),
    ],
)
def test_warning_kinds(a, b, same):
    assert (kind_of(a) == kind_of(b)) is same
    assert len(aggregated([a, b])) == (1 if same else 2)


# -- tree: command lines --------------------------------------------------------------


def test_tree_shows_command_lines_escaped(sleeper):
    r = cli("tree", str(os.getpid()))
    assert r.returncode == 0, r.stderr
    (line,) = [x for x in r.stdout.splitlines() if f"{sleeper.pid} [" in x]
    assert line.endswith(SHOWN)
    r = cli("tree", "--names", str(os.getpid()))
    (line,) = [x for x in r.stdout.splitlines() if f"{sleeper.pid} [" in x]
    assert line.endswith("] " + proctree.proc(sleeper.pid).name)


def test_tree_json_carries_argv(sleeper):
    doc = json.loads(cli("tree", "--json", str(os.getpid())).stdout)
    (rec,) = [p for p in doc["procs"] if p["pid"] == sleeper.pid]
    assert rec["argv"] == SLEEPER and rec["name"] == proctree.proc(sleeper.pid).name


def test_tree_cuts_lines_to_the_width_and_verbose_does_not(sleeper):
    env = dict(ENV, COLUMNS="30")
    lines = cli("tree", str(os.getpid()), env=env).stdout.splitlines()
    assert lines and all(len(line) <= 30 for line in lines)
    lines = cli("tree", "-v", str(os.getpid()), env=env).stdout.splitlines()
    assert any(line.endswith(SHOWN) for line in lines)


def test_tree_quiet_prints_the_pids_in_drawing_order(sleeper):
    r = cli("tree", "-q", str(os.getpid()))
    pids = [int(x) for x in r.stdout.split()]
    assert pids[0] == os.getpid() and sleeper.pid in pids


def test_tree_shows_a_kernel_thread_or_zombie_by_name_in_brackets():
    zombie = subprocess.Popen(["true"])
    try:
        os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
        r = cli("tree", str(os.getpid()))
        (line,) = [x for x in r.stdout.splitlines() if f"{zombie.pid} [" in x]
        assert line.endswith("Z] [true]")
    finally:
        zombie.wait()


# -- up -q ------------------------------------------------------------------------------


def test_up_quiet_prints_the_entries_output_only(tmp_path):
    (tmp_path / "Procfile").write_text("say: echo hello; sleep 0.2; echo bye\n")
    r = cli("up", "-q", "--no-timestamp", "-f", str(tmp_path / "Procfile"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [" ".join(line.split()) for line in r.stdout.splitlines()] == ["say.1 | hello", "say.1 | bye"]
    loud = cli("up", "--no-timestamp", "-f", str(tmp_path / "Procfile"), cwd=tmp_path)
    assert "system | say.1 started" in loud.stdout and "nothing left running" in loud.stdout


def test_up_quiet_still_says_when_an_entry_fails(tmp_path):
    (tmp_path / "Procfile").write_text("bad: echo oops; exit 3\n")
    r = cli("up", "-q", "--no-timestamp", "-f", str(tmp_path / "Procfile"), cwd=tmp_path)
    assert r.returncode == 3
    lines = [" ".join(line.split()) for line in r.stdout.splitlines()]
    assert lines == ["bad.1 | oops", "system | bad.1 exited with code 3: stopping everything (grace 3 s)"]


def test_reap_groups_skipped_processes_by_reason():
    from proctree._reaper.model import Skipped

    skipped = tuple(Skipped(100 + i, f"marker {100 + i}:55: owner alive") for i in range(10)) + (
        Skipped(None, "cgroup /x: owner 4 alive"),
    )
    out = io.StringIO()
    reap_cli._print_text(proctree.ReapReport(skipped=skipped), out, io.StringIO())
    lines = [line for line in out.getvalue().splitlines() if line.startswith("skipped")]
    assert lines == [
        "skipped 10: marker N:N: owner alive (pids 100, 101, 102, 103, 104, 105, 106, 107, ...); -v lists each",
        "skipped -: cgroup /x: owner 4 alive",
    ]
    out = io.StringIO()
    reap_cli._print_text(proctree.ReapReport(skipped=skipped), out, io.StringIO(), verbose=True)
    assert len([line for line in out.getvalue().splitlines() if line.startswith("skipped")]) == 11


def _on_a_terminal(args, columns):
    """Run `proctree ARGS` with stdout a pseudo-terminal `columns` wide; its output, lines without CRs."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        p = subprocess.Popen([sys.executable, "-m", "proctree", *args], stdout=slave, env=ENV)
        os.close(slave)
        slave = None
        data = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                break
            if not chunk:
                break
            data += chunk
        assert p.wait(timeout=60) == 0
    finally:
        os.close(master)
        if slave is not None:
            os.close(slave)
    return data.decode().replace("\r\n", "\n").splitlines()


def test_tree_on_a_terminal_cuts_to_its_width_and_json_is_indented_there(sleeper):
    lines = _on_a_terminal(["tree", str(os.getpid())], 40)
    assert any(f"{sleeper.pid} [" in line for line in lines)
    assert all(len(line) <= 40 for line in lines)
    lines = _on_a_terminal(["tree", "--json", str(os.getpid())], 40)
    assert len(lines) > 1 and json.loads("\n".join(lines))["ok"] is True


def test_an_unknown_option_before_the_command_is_the_top_levels():
    r = cli("--no-such-option", "tree")
    assert r.returncode == 2 and r.stderr.startswith("usage: proctree [-h]")


def test_tree_drops_an_argv_whose_pid_was_reused_or_gone(monkeypatch):
    from proctree.cli import tree

    def p(pid, start):
        return proctree.Proc(pid, 1, pid, pid, 0, "S", start, "x")

    before = proctree.Snapshot([p(10, 100), p(11, 100), p(12, 100)])
    after = proctree.Snapshot([p(10, 100), p(11, 999)])  # 11 is another process now; 12 is gone
    monkeypatch.setattr(proctree, "snapshot", lambda: after)
    monkeypatch.setattr(proctree, "cmdline", lambda pid: [f"cmd{pid}"])
    steps = [(pid, 0, True, []) for pid in (10, 11, 12)]
    assert tree.argvs_of(before, steps) == {10: ["cmd10"], 11: None, 12: None}


# One error format across subcommands: `proctree SUBCOMMAND: message`, after the usage for a usage error.
@pytest.mark.parametrize(
    "args, prefix",
    [
        (["tree", "--", "abc"], "proctree tree: "),
        (["kill", "--", "abc"], "proctree kill: "),
        (["kill", "--grace", "-1", "1"], "proctree kill: "),
        (["run", "--"], "proctree run: "),
        (["run", "--no-pty", "--", "no-such-command-here"], "proctree run: "),
        (["reap", "--within", "x"], "proctree reap: "),
        (["up", "-f", "/no/such/Procfile"], "proctree up: "),
        (["check", "-f", "/no/such/Procfile"], "proctree check: "),
        (["demo", "--bogus"], "proctree demo: "),
    ],
)
def test_every_error_names_its_subcommand(args, prefix):
    r = cli(*args)
    assert r.returncode in (2, 127), r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(prefix), r.stderr
    assert "error:" not in last.split(":", 2)[1] and not last.startswith("proctree: "), r.stderr


def test_no_python_warning_reaches_cmds_output(tmp_path):
    # No usable receipt directory: spawn() warns (ReceiptWarning); `proctree run` says it only with -v, its way.
    env = {**os.environ, "PROCTREE_RECEIPTS_DIR": "relative/dir", "PROCTREE_RUN_NATIVE": "0"}
    r = subprocess.run(
        [sys.executable, "-m", "proctree", "run", "--no-pty", "--", "true"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = subprocess.run(
        [sys.executable, "-m", "proctree", "run", "-v", "--no-pty", "--", "true"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 0 and "Warning" not in r.stderr, r.stderr
    assert r.stderr.startswith("proctree run: warning: "), r.stderr
