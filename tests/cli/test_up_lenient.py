"""`proctree up` runs what honcho runs: what honcho skips is skipped with a warning naming the file and line.

Real runs of `python -m proctree up` on Procfiles and .env files honcho
accepts: a line that is not an entry, a name starting with '-', an empty
command, an empty Procfile, a .env line that is not an assignment, a missing
-e file. Each also runs under --strict, which refuses it as before. Then a
table of the readers' lenient mode.
"""

import os
import subprocess
import sys

import pytest

import proctree
from proctree import ProcfileError, load_procfile
from proctree._procfile.dotenv import parse_dotenv
from proctree._procfile.procfile import parse_procfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))


def up(folder, *args):
    environ = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    environ.pop("PROCFILE", None)
    return subprocess.run(
        [sys.executable, "-m", "proctree", "up", "--no-prefix", "--grace", "1", *args],
        cwd=str(folder),
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "procfile, dot_env, args, warning, refusal",
    [
        ("web python\nok: echo $A\n", "A=ran\n", [], "Procfile:1: not a `name: command` line", "Procfile:1:"),
        ("+x: echo plus\nok: echo $A\n", "A=ran\n", [], "Procfile:1: '+x' is not a valid name", "Procfile:1:"),
        ("empty:\nok: echo $A\n", "A=ran\n", [], "Procfile:1: 'empty' has no command", "Procfile:1:"),
        ("ok: echo $A\n", "A=ran\nnot an assignment\n", [], ".env:2: 'not' has no '='", ".env:2:"),
        ("ok: echo $A\n", "A=ran\n", ["-e", ".env,missing.env"], "missing.env: no such .env file", "missing.env"),
    ],
)
def test_what_honcho_skips_is_skipped_with_a_warning_and_refused_under_strict(
    tmp_path, procfile, dot_env, args, warning, refusal
):
    (tmp_path / "Procfile").write_text(procfile)
    (tmp_path / ".env").write_text(dot_env)
    r = up(tmp_path, *args)
    assert r.returncode == 0, r.stderr
    assert "ran" in r.stdout.splitlines()
    assert f"proctree up: warning: {warning}" in r.stderr or f"/{warning}" in r.stderr, r.stderr
    r = up(tmp_path, "--strict", *args)
    assert r.returncode == 2 and refusal in r.stderr and r.stdout == ""


def test_a_name_starting_with_a_dash_runs_as_under_honcho(tmp_path):
    (tmp_path / "Procfile").write_text("-dash: echo dash ran\n")
    r = up(tmp_path)
    assert r.returncode == 0, r.stderr
    assert "dash ran" in r.stdout.splitlines()
    assert up(tmp_path, "--strict").returncode == 2


def test_old_mac_line_ends_run_as_under_honcho(tmp_path):
    (tmp_path / "Procfile").write_text("ok: echo ran\rother: sleep 300\r", newline="")
    r = up(tmp_path)
    assert r.returncode == 0, r.stderr
    assert "ran" in r.stdout.splitlines() and "other.1 started (pid=" in r.stdout
    r = up(tmp_path, "--strict")
    assert r.returncode == 2 and "Procfile:1: a carriage return inside the line" in r.stderr


@pytest.mark.parametrize("text", ["", "# only a comment\n\n"])
def test_an_empty_procfile_runs_nothing_and_exits_0(tmp_path, text):
    (tmp_path / "Procfile").write_text(text)
    r = up(tmp_path)
    assert r.returncode == 0 and r.stdout == ""
    assert "Procfile: no entries" in r.stderr and "nothing to run" in r.stderr
    r = up(tmp_path, "web")
    assert r.returncode == 2 and "no entry named 'web'" in r.stderr
    assert up(tmp_path, "--strict").returncode == 2


# -- the readers' lenient mode, as a table ------------------------------------------


@pytest.mark.parametrize(
    "text, names, skipped",
    [
        ("web: a\n", ["web"], []),
        ("web python\nweb: a\n", ["web"], ["P:1: not a `name: command` line (no colon): 'web python': skipped"]),
        ("-w: a\n", ["-w"], []),
        ("w:\n", [], ["P:1: 'w' has no command after the colon: skipped", "P: no entries"]),
        ("", [], ["P: no entries"]),
        ("a b: c\nx: y\n", ["x"], ["P:1: 'a b' is not a valid name"]),
        ("a: x\rb: y\r\nc: z\r", ["a", "b", "c"], []),  # a lone CR ends a line, as honcho reads it
        ("a: x\rjunk\n", ["a"], ["P:2: not a `name: command` line"]),
    ],
)
def test_parse_procfile_leniently(text, names, skipped):
    noted: list[str] = []
    assert [e.name for e in parse_procfile(text, "P", skipped=noted)] == names
    assert len(noted) == len(skipped)
    for note, start in zip(noted, skipped):
        assert note.startswith(start)


@pytest.mark.parametrize(
    "text, values, lines",
    [
        ("A=1\n", {"A": "1"}, []),
        ("A=1\nnonsense\nB=2\n", {"A": "1", "B": "2"}, [2]),
        ("A=1\n=x\nB 2\n", {"A": "1"}, [2, 3]),
        ("A='x\n", None, None),  # an unclosed quote is refused either way
    ],
)
def test_parse_dotenv_leniently(text, values, lines):
    noted: list[str] = []
    if values is None:
        with pytest.raises(ProcfileError):
            parse_dotenv(text, "E", skipped=noted)
        return
    assert parse_dotenv(text, "E", skipped=noted) == values
    assert [int(n.split(":")[1]) for n in noted] == lines


def test_a_lone_cr_in_a_procfile_is_refused_under_strict():
    with pytest.raises(ProcfileError, match="P:1: a carriage return inside the line"):
        parse_procfile("a: x\rb: y\n", "P")


def test_load_procfile_is_strict_unless_asked(tmp_path):
    (tmp_path / "Procfile").write_text("junk\nweb: a\n")
    with pytest.raises(ProcfileError, match="Procfile:1:"):
        load_procfile(tmp_path / "Procfile")
    plan = load_procfile(tmp_path / "Procfile", strict=False, env_files=[str(tmp_path / "nope.env")])
    assert [s.name for s in plan.services] == ["web.1"]
    assert plan.warnings[0].endswith("Procfile:1: not a `name: command` line (no colon): 'junk': skipped")
    assert plan.warnings[1].endswith("nope.env: no such .env file: skipped")
