"""proctree-init's command line as tini's users type it: -s, -e CODE, -w, -v..., -l, --version, -h, and tini's
environment variables; every message names the program as invoked; the program itself is on the PATH, beside the
`proctree` script (pip puts it there from the wheel's .data/scripts/).
"""

import importlib.metadata
import os
import signal
import subprocess
import sys

import pytest

from proctree.cli import _native

RUNNER = _native.runner_path()
pytestmark = pytest.mark.skipif(RUNNER is None, reason="proctree-init is not built here (Linux only)")
ON_PATH = os.path.join(os.path.dirname(sys.executable), "proctree-init")


def run(*argv, env=None, name=None):
    """proctree-init ARGV (named NAME in its argv[0]): its completed process, text."""
    full = {**os.environ, **(env or {})}
    for key in ("TINI_SUBREAPER", "TINI_KILL_PROCESS_GROUP", "TINI_VERBOSITY"):
        if env is None or key not in env:
            full.pop(key, None)
    return subprocess.run(
        [name or RUNNER, *argv], executable=RUNNER, capture_output=True, text=True, env=full, timeout=30
    )


@pytest.mark.skipif(not os.path.exists(ON_PATH), reason="not an installed proctree (a source checkout on PYTHONPATH)")
def test_installed_on_the_path_as_the_program_itself():
    with open(ON_PATH, "rb") as f:
        assert f.read(4) == b"\x7fELF"  # the native program, not a Python wrapper
    assert os.access(ON_PATH, os.X_OK)
    r = subprocess.run([ON_PATH, "--", "true"], capture_output=True, timeout=30)
    assert r.returncode == 0 and r.stderr == b""


@pytest.mark.parametrize(
    "argv, code",
    [
        (["-e", "3", "--", "sh", "-c", "exit 3"], 0),  # tini's -e: CODE returned as 0
        (["-e3", "-e", "4", "--", "sh", "-c", "exit 4"], 0),  # repeatable, getopt's spellings
        (["-e", "3", "--", "sh", "-c", "exit 4"], 4),
        (["-e", str(128 + signal.SIGTERM), "--", "sh", "-c", "kill -TERM $$"], 0),  # 128+N, as tini remaps it
        (["-e", "0", "--", "true"], 0),
        (["-s", "--", "sh", "-c", "exit 5"], 5),  # tini's subreaper: what the runner always is
        (["-sg", "-e", "6", "--", "sh", "-c", "exit 6"], 0),
        (["-e", "256", "--", "true"], 2),
        (["-e", "x", "--", "true"], 2),
        (["-e"], 2),
        (["-x", "--", "true"], 2),
        (["-sx", "--", "true"], 2),
    ],
)
def test_exit_statuses_with_tinis_options(argv, code):
    r = run(*argv)
    assert r.returncode == code, r.stderr


def test_version_help_and_license_answer_on_stdout():
    r = run("--version")
    assert (r.returncode, r.stdout) == (0, f"proctree-init version {importlib.metadata.version('proctree')}\n")
    r = run("-h")
    assert r.returncode == 0 and "Usage: proctree-init " in r.stdout and "TINI_VERBOSITY" in r.stdout
    r = run("-l")
    assert (
        r.returncode == 0
        and r.stdout.startswith("MIT License\n")
        and "Copyright (c) the proctree developers" in (r.stdout)
    )
    license_file = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "LICENSE")
    if os.path.exists(license_file):
        with open(license_file) as f:
            assert r.stdout == f.read()


def test_every_message_names_the_program_as_invoked():
    r = run("--bogus", "--", "true", name="/usr/local/bin/tini")
    assert r.returncode == 2 and r.stderr.startswith("tini: unrecognized argument '--bogus' (usage: tini "), r.stderr
    r = run("--", "no-such-command-here", name="tini")
    assert r.returncode == 127 and r.stderr == "tini: no-such-command-here: command not found\n"
    r = run("--", "sh", "-c", "sleep 30 &", name="init")
    assert r.stderr.startswith("init: ended 1 process CMD left running"), r.stderr
    assert "proctree run" not in r.stderr


def test_dash_w_says_each_orphan_reaped():
    r = run("-w", "--", "sh", "-c", "(sleep 0.1 &); sleep 0.5")
    assert r.returncode == 0
    assert "proctree-init: reaped zombie process with pid=" in r.stderr, r.stderr


def test_verbosity_levels_and_tini_verbosity():
    left = ["--", "sh", "-c", "sleep 30 &"]
    assert run(*left).stderr.startswith("proctree-init: ended 1 process CMD left running: ")
    assert run("-q", *left).stderr == ""
    assert run(*left, env={"TINI_VERBOSITY": "0"}).stderr == ""  # tini's level 0: quiet
    assert run("-v", *left, env={"TINI_VERBOSITY": "0"}).stderr != ""  # the command line wins
    assert run("--", "true", env={"TINI_VERBOSITY": "2"}).stderr == "proctree-init: CMD left nothing running\n"
    assert run("-v", "--", "true").stderr == "proctree-init: CMD left nothing running\n"
    vv = run("-vv", "--", "true").stderr
    assert vv.startswith("proctree-init: CMD runs in a ") and vv.endswith("CMD left nothing running\n"), vv
    vvv = run("-vvv", "--", "sh", "-c", "(sleep 0.1 &); sleep 0.5").stderr
    assert "reaped zombie process with pid=" in vvv, vvv


def test_subreaper_environment_is_accepted():
    r = run("--", "sh", "-c", "exit 9", env={"TINI_SUBREAPER": ""})  # set, to anything: tini's test
    assert (r.returncode, r.stderr) == (9, "")


def test_the_leftover_line_counts_every_name_exactly():
    script = "i=0; while [ $i -lt 300 ]; do sleep 60 & i=$((i+1)); done; sleep 1"
    r = subprocess.run([RUNNER, "--grace", "5", "--", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0
    assert r.stderr == "proctree-init: ended 300 processes CMD left running: sleep x300\n", r.stderr
