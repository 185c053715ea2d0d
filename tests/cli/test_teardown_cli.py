"""`proctree kill` on real trees: the report it prints and the exit status it returns."""

import io
import json
import os
import subprocess
import sys

from proctree.cli import main
from support.treekit import alive, run_as_nobody


def proctree_cli(*args):
    return subprocess.run([sys.executable, "-m", "proctree", *args], capture_output=True, text=True, timeout=60)


def test_kill_json_reports_the_tree_and_exits_0(kit):
    tree = kit.term_ignorer()
    r = proctree_cli("kill", str(tree.root), "--grace", "0.2", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["ok"] is True
    assert sorted(p["pid"] for p in rep["found"]) == sorted(tree.pids)
    assert [p["pid"] for p in rep["killed"]] == [tree.role("ignorer")]
    assert not any(alive(p) for p in tree.pids)


def test_kill_text_output(kit, capsys):
    tree = kit.sleeper()
    assert main(["kill", str(tree.root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"tree of {tree.root} ") and "2 found" in out and "0 survived" in out


def test_kill_bad_input_exits_2_without_signalling(kit):
    tree = kit.sleeper()
    for args in (
        ["kill", "0"],
        ["kill", "-5"],
        ["kill", "abc"],
        ["kill", "1"],
        ["kill", str(os.getpid())],
        ["kill", str(tree.root), "--grace", "-1"],
        ["kill", "4000000"],
    ):
        r = proctree_cli(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.startswith("proctree kill: ") or "usage" in r.stderr
    assert all(alive(p) for p in tree.pids)


def test_kill_exits_1_when_something_survives(kit):
    # The caller runs as nobody: it can end the member that dropped to nobody,
    # not the root-owned root, which survives (and is listed as such).
    tree = kit.member_of_nobody()

    def as_nobody():
        from proctree.cli import kill

        class Args:
            pass

        a = Args()
        a.pid, a.grace, a.json, a.signal, a.hangup = str(tree.root), 0.1, False, "SIGTERM", False
        buf = io.StringIO()
        code = kill.run(a, out=buf)
        return buf.getvalue().encode(), code

    data, code = run_as_nobody(as_nobody)
    out = data.decode()
    assert code == 1, out
    assert "SURVIVORS:" in out and str(tree.root) in out.split("SURVIVORS:")[1]
    assert alive(tree.root) and not alive(tree.role("nobody"))


def test_demo_teardown_scene_shows_the_leak_and_leaves_nothing():
    from proctree.demo import teardown_scene

    out = io.StringIO()
    assert teardown_scene.run(out) is True, out.getvalue()
    text = out.getvalue()
    assert "LEFT RUNNING" in text and "0 survived" in text
    # conftest's leak check proves the scene ended both trees.
