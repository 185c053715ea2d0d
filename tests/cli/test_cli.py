"""The `proctree` command as users run it: tree, demo, and bad arguments."""

import json
import os
import subprocess
import sys

import pytest

import proctree

# Run the installed package (or the in-place build), never bare sources.
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__))))


def cli(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "proctree", *args], capture_output=True, text=True, timeout=timeout, env=ENV
    )


def test_demo_runs_every_scene_and_leaves_nothing():
    r = cli("demo", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    for title in ("1. Snapshot", "2. Teardown", "3. Containment"):
        assert title in r.stdout
    assert "nothing left running" in r.stdout
    # the autouse fixture proves that nothing the demo started is left


def test_tree_of_own_process_shows_its_children():
    child = subprocess.Popen(["sleep", "30"])
    try:
        r = cli("tree", str(os.getpid()))
        assert r.returncode == 0, r.stderr
        first = r.stdout.splitlines()[0]
        assert first.startswith(f"{os.getpid()} [pgid {os.getpgid(0)} sid {os.getsid(0)} ")
        assert any(f"{child.pid} [" in line and "sleep" in line for line in r.stdout.splitlines())
        j = cli("tree", str(os.getpid()), "--json")
        doc = json.loads(j.stdout)
        assert doc["ok"] is True and doc["roots"] == [os.getpid()]
        root = doc["procs"][0]
        assert root["pid"] == os.getpid() and root["depth"] == 0
        assert child.pid in root["children"]
        (kid,) = [p for p in doc["procs"] if p["pid"] == child.pid]
        assert kid["depth"] == 1 and kid["ppid"] == os.getpid() and kid["name"] == "sleep"
    finally:
        child.kill()
        child.wait()


def test_whole_table_tree_lists_every_process_once():
    r = cli("tree", "--json")
    assert r.returncode == 0, r.stderr

    doc = json.loads(r.stdout)
    pids = [p["pid"] for p in doc["procs"]]
    assert len(pids) == len(set(pids))
    assert 1 in pids and os.getpid() in pids
    assert 1 in doc["roots"]
    # every listed child is listed itself, one level deeper
    depth = {p["pid"]: p["depth"] for p in doc["procs"]}
    for p in doc["procs"]:
        assert all(depth[c] == p["depth"] + 1 for c in p["children"])


@pytest.mark.parametrize("arg", ["abc", "0", "-5", "1.5", "99999999"])
def test_tree_bad_pid_is_a_clear_error(arg):
    r = cli("tree", "--", arg)
    assert r.returncode == 2
    assert r.stderr.startswith("proctree tree: ") and "Traceback" not in r.stderr


def test_unknown_command_is_a_usage_error():
    r = cli("frobnicate")
    assert r.returncode == 2 and "invalid choice" in r.stderr
