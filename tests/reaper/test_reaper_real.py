"""The reaper on real processes: owners SIGKILLed with their keepers, live owners, bystanders, rules.

Every selection is scoped with `within` to the pids the test started, so a
test never selects (let alone signals) anything else on the machine.
"""

import json
import os
import re
import subprocess
import sys
import time

import pytest

import proctree
from support.reapkit import COMMAND, orphaned_tree, start_detached
from support.spawnkit import ALL_MODES, alive, read_lines, wait_gone


@pytest.mark.parametrize("mode", ALL_MODES)
def test_owner_and_keeper_sigkilled_leaves_orphans_that_reap_finds_and_ends(mode, started, pipe):
    pids = orphaned_tree(mode, started, pipe)
    members = {pids["cmd"], pids["scrubbed"], pids["daemon"]}
    assert all(alive(p) for p in members), "the tree must outlive its owner and keeper for this test"

    found = {o.proc.pid: o for o in proctree.find_orphans(within=members | {pids["owner"], pids["keeper"]})}
    assert set(found) == members
    want = "cgroup-owner-gone" if mode == "cgroup" else "owner-exited"
    assert found[pids["cmd"]].reason == want
    assert found[pids["daemon"]].reason == want
    assert found[pids["cmd"]].owner[0] == pids["owner"]
    # The scrubbed child carries no marker: attributed through its parent (or, in a cgroup, by the cgroup).
    if mode == "cgroup":
        assert found[pids["scrubbed"]].via.startswith("cgroup ")
    else:
        assert found[pids["scrubbed"]].via == f"ancestor {pids['cmd']}"
    for o in found.values():
        assert o.evidence

    report = proctree.reap_orphans(within=members, grace=1.0)
    assert report.ok, report
    assert wait_gone(members, 5)
    assert {o.proc.pid for o in report.candidates} == members
    ended = {p.pid for p in report.exited + report.killed}
    assert members <= ended | {p.pid for p in report.late} or not any(alive(p) for p in members)
    if mode == "cgroup":
        assert len(report.cgroups_removed) == 1
        assert not os.path.exists(report.cgroups_removed[0])
    assert proctree.find_orphans(within=members) == []


def test_dry_run_selects_and_signals_nothing(started, pipe):
    pids = orphaned_tree("session", started, pipe)
    members = {pids["cmd"], pids["scrubbed"], pids["daemon"]}
    report = proctree.reap_orphans(within=members, dry_run=True)
    assert report.dry_run and report.ok
    assert {o.proc.pid for o in report.candidates} == members
    assert not report.exited and not report.killed
    assert all(alive(p) for p in members)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_live_owners_tree_is_never_a_candidate(mode, trees, pipe):
    r, w = pipe
    t = proctree.spawn([sys.executable, "-c", COMMAND, str(w)], contain=mode, pass_fds=(w,), grace=0.5)
    trees.append(t)
    pids = read_lines(r, 3)
    scope = set(pids.values()) | {t.keeper_pid}
    assert proctree.find_orphans(within=scope) == []
    report = proctree.reap_orphans(within=scope, grace=0.5)
    assert report.candidates == () and report.ok
    assert all(alive(p) for p in pids.values())


def test_an_unmarked_bystander_is_untouched(started):
    env = {k: v for k, v in os.environ.items() if k != "PROCTREE_OWNER"}
    pid = start_detached(["sleep", "300"], started, env=env)
    assert proctree.find_orphans(within={pid}) == []
    assert proctree.reap_orphans(within={pid}).candidates == ()
    assert alive(pid)


def test_a_marker_whose_owner_pid_was_reused_is_proof(started):
    """A marker naming this test process with an earlier start time: the pid now holds a later process."""
    me = proctree.proc(os.getpid())
    env = dict(os.environ, PROCTREE_OWNER=f"{me.pid}:{me.start_time - 1}")
    pid = start_detached(["sleep", "300"], started, env=env)
    (o,) = proctree.find_orphans(within={pid})
    assert o.reason == "owner-pid-reused" and o.owner == (me.pid, me.start_time - 1)


def test_a_marker_whose_owner_is_gone_is_proof_and_its_child_follows(started):
    owner = subprocess.Popen(["true"])
    owner.wait()
    env = dict(os.environ, PROCTREE_OWNER=f"{owner.pid}:1")
    pid = start_detached(["sh", "-c", "sleep 300 & wait"], started, env=env)
    found = {o.proc.pid: o for o in proctree.find_orphans(within=set(_subtree(pid)))}
    assert pid in found and found[pid].reason in ("owner-exited", "owner-pid-reused")
    kids = [p for p in found if p != pid]
    assert len(kids) == 1 and found[kids[0]].via in ("marker", f"ancestor {pid}")
    report = proctree.reap_orphans(within=set(found), grace=0.5)
    assert report.ok and wait_gone(list(found), 5)


def _subtree(pid, want=2, timeout=10.0):
    """pid and its descendants, once there are want of them (the shell forks after it was reported)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = [pid] + [p.pid for p in proctree.descendants(pid)]
        if len(pids) >= want or time.monotonic() > deadline:
            return pids
        time.sleep(0.01)


@pytest.mark.parametrize(
    "value",
    ["", "garbage", "0:5", "1:5", "-5:3", "12:abc", "4194305:1", "99999999999:1", "5:" + "9" * 30, "7:1:" + "x" * 100],
)
def test_a_malformed_marker_is_never_proof(value, started):
    pid = start_detached(["sleep", "300"], started, env=dict(os.environ, PROCTREE_OWNER=value))
    assert proctree.find_orphans(within={pid}) == []
    assert alive(pid)


@pytest.fixture(scope="module")
def fake_claude(tmp_path_factory):
    """A program named claude (compiled here: a script's argv[0] would be its interpreter)."""
    d = tmp_path_factory.mktemp("rule")
    src = d / "claude.c"
    src.write_text("#include <unistd.h>\nint main(void) { for (;;) pause(); }\n")
    exe = d / "claude"
    try:
        subprocess.run(["gcc", "-o", str(exe), str(src)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"no C compiler to build the fake claude: {exc}")
    return str(exe)


def _start_claude(exe, spawner_pid, started):
    """The fake claude daemon, detached (a child of this process is always protected: it is the caller's)."""
    blob = json.dumps({"label": "claude", "cwd": "/", "pid": spawner_pid})
    # A rule's helper is one that scrubbed its environment: it carries no PROCTREE_OWNER (this test run's
    # own, a live owner's, would protect it).
    env = {k: v for k, v in os.environ.items() if k != "PROCTREE_OWNER"}
    return start_detached([exe, "daemon", "run", "--origin", "transient", "--spawned-by", blob], started, env=env)


def test_rule_a_claude_daemon_whose_spawner_died_is_an_orphan(fake_claude, started):
    spawner = subprocess.Popen(["sleep", "300"])
    helper = _start_claude(fake_claude, spawner.pid, started)
    spawner.kill()
    spawner.wait()  # gone (reaped) after the helper started
    (o,) = proctree.find_orphans(within={helper})
    assert o.reason == "claude-daemon" and o.owner == (spawner.pid, None) and o.via == "rule claude-daemon"
    report = proctree.reap_orphans(within={helper}, grace=1.0)
    assert report.ok and [p.pid for p in report.exited] == [helper]
    assert wait_gone([helper], 5)


def test_rule_a_claude_daemon_whose_spawner_lives_is_left_alone(fake_claude, started):
    helper = _start_claude(fake_claude, os.getpid(), started)
    assert proctree.find_orphans(within={helper}) == []
    assert proctree.find_orphans(within={helper}, rules=()) == []
    assert alive(helper)


def test_the_reapers_own_children_are_never_candidates(started):
    """A child of the caller is the caller's business, whatever its evidence says."""
    owner = subprocess.Popen(["true"])
    owner.wait()
    p = subprocess.Popen(["sleep", "300"], env=dict(os.environ, PROCTREE_OWNER=f"{owner.pid}:1"))
    try:
        started.append((p.pid, proctree.proc(p.pid).start_time))
        assert proctree.find_orphans(within={p.pid}) == []
        assert proctree.reap_orphans(within={p.pid}, grace=0).candidates == ()
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()


def test_a_process_quoting_the_rule_is_not_the_helper(started):
    """argv that quotes the claude rule's shape, run by another executable, is never a seed."""
    argv = ["sh", "-c", "sleep 300; :", "claude", "daemon", "run", "--spawned-by", '{"pid": 999999}']
    pid = start_detached(argv, started)
    assert proctree.find_orphans(within={pid}) == []


def test_protect_patterns_spare_a_candidate_and_its_subtree(started, pipe):
    pids = orphaned_tree("session", started, pipe)
    members = {pids["cmd"], pids["scrubbed"], pids["daemon"]}
    found = proctree.find_orphans(within=members, protect=[r"^sleep 300$"])
    assert {o.proc.pid for o in found} == {pids["cmd"], pids["daemon"]}
    # The command's argv (the daemon, forked from it, shares it): both spared, and the child below the command.
    assert proctree.find_orphans(within=members, protect=[re.compile(r"import os")]) == []
    report = proctree.reap_orphans(within=members, protect=[r"import os"], grace=0.5)
    assert report.candidates == () and {s.pid for s in report.skipped} >= {pids["cmd"], pids["scrubbed"]}
    assert all(alive(p) for p in members)


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [
        ({"marker": 5}, TypeError),
        ({"marker": ""}, ValueError),
        ({"marker": "A=B"}, ValueError),
        ({"tag": "bad tag"}, ValueError),
        ({"tag": 3}, TypeError),
        ({"rules": "claude"}, TypeError),
        ({"rules": [object()]}, TypeError),
        ({"within": 5}, TypeError),
        ({"within": [True]}, TypeError),
        ({"within": [0]}, ValueError),
        ({"within": [-1]}, ValueError),
        ({"protect": "x"}, TypeError),
        ({"protect": ["("]}, ValueError),
        ({"protect": [re.compile(b"x")]}, TypeError),
    ],
)
def test_bad_selection_arguments_are_refused(kwargs, exc):
    with pytest.raises(exc):
        proctree.find_orphans(**kwargs)
    with pytest.raises(exc):
        proctree.reap_orphans(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "exc"), [({"grace": -1}, ValueError), ({"grace": "1"}, TypeError), ({"dry_run": 1}, TypeError)]
)
def test_bad_reap_arguments_are_refused(kwargs, exc):
    with pytest.raises(exc):
        proctree.reap_orphans(**kwargs)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "proctree", "reap", *args], capture_output=True, text=True, timeout=60)


def test_cli_reap_lists_with_evidence_then_ends_the_orphans(started, pipe):
    pids = orphaned_tree("session", started, pipe)
    members = {pids["cmd"], pids["scrubbed"], pids["daemon"]}
    first, *rest = sorted(members)
    dry = _cli("--dry-run", "--within", str(first), "--within", ",".join(map(str, rest)))  # repeated: all count
    assert dry.returncode == 0, dry.stderr
    assert f"would reap {pids['daemon']:>7}" in dry.stdout and "owner-exited via marker" in dry.stdout
    assert all(alive(p) for p in members)
    done = _cli("--json", "--grace", "0.5", "--within", ",".join(map(str, sorted(members))))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] and {c["proc"]["pid"] for c in doc["candidates"]} == members
    assert wait_gone(members, 5)


@pytest.mark.parametrize(
    "args", [["--grace", "-1"], ["--tag", "a b"], ["--within", "0"], ["--within", ""], ["--protect", "("]]
)
def test_cli_reap_bad_input_exits_2_with_one_json_object(args):
    r = _cli("--json", *args)
    assert r.returncode == 2
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["error"]["message"]


def test_a_scoped_sweep_leaves_another_owners_orphans_that_appear_meanwhile(started, monkeypatch):
    """A scoped sweep's later passes take new processes only as late forks of what it took (the same dead owner)."""
    from proctree._reaper import reap as _reap

    pipe_a, pipe_b = os.pipe(), os.pipe()
    try:
        a = orphaned_tree("session", started, pipe_a)
        ours = {a["cmd"], a["scrubbed"], a["daemon"]}
        other = {}
        real_end = _reap._end_selection

        def end_then_another_owner_dies(*args, **kwargs):
            out = real_end(*args, **kwargs)
            if not other:  # between the first pass and the next: another owner's tree is orphaned
                other.update(orphaned_tree("session", started, pipe_b))
            return out

        monkeypatch.setattr(_reap, "_end_selection", end_then_another_owner_dies)
        report = proctree.reap_orphans(within=ours, grace=0.5)
        monkeypatch.undo()
        theirs = {other["cmd"], other["scrubbed"], other["daemon"]}
        assert report.ok and wait_gone(ours, 5)
        assert all(alive(p) for p in theirs), "a scoped sweep ended another owner's orphans"
        assert not theirs & {o.proc.pid for o in report.candidates}
        assert proctree.reap_orphans(within=theirs, grace=0.5).ok
        assert wait_gone(theirs, 5)
    finally:
        for fd in (*pipe_a, *pipe_b):
            try:
                os.close(fd)
            except OSError:
                pass
