"""Contained spawning on real processes: spawn(), Tree, every mode, owner death.

Every test registers what it starts through the Tree (or pids reported on a
pipe, never guessed) and ends it in a finally/fixture; the autouse leak check
in conftest catches anything that survives, keepers included (they carry the
test run's environment marker like every other process).
"""
import asyncio
import errno
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import proctree
from proctree._containment import cgroup as _cgroup
from proctree._containment import marker as _marker
from proctree._containment.spawn import ContainmentUnavailable, Tree, spawn, spawn_async

from support.spawnkit import (
    ALL_MODES,
    CGROUP_OK,
    CGROUP_WHY,
    CONTAINING,
    DAEMONIZER,
    LINUX,
    alive,
    cgroup_dirs,
    environ_marker,
    read_lines,
    start_daemonizer,
    wait_gone,
)


# ---------------------------------------------------------------------------
# Containment

@pytest.mark.parametrize("mode", CONTAINING)
def test_double_forked_daemon_is_caught_and_named(trees, pipe, mode):
    t, pids = start_daemonizer(trees, pipe, mode)
    assert t.mode == mode and t.pid == pids["cmd"]
    daemon = proctree.proc(pids["daemon"])
    assert daemon.sid != t.pid and daemon.ppid != t.pid  # it really left the command's tree
    assert daemon.pid in {p.pid for p in t.members()}
    rep = t.terminate(grace=2)
    assert rep.ok and rep.mode == mode
    assert daemon.identity in {p.identity for p in rep.found}
    assert not alive(daemon.pid, daemon.start_time) and not alive(t.pid)
    assert t.returncode == -signal.SIGTERM


@pytest.mark.parametrize("mode", CONTAINING)
def test_sigterm_ignorer_needs_the_kill(trees, pipe, mode):
    t, pids = start_daemonizer(trees, pipe, mode, ignore=True)
    t0 = time.monotonic()
    rep = t.terminate(grace=0.3)
    assert rep.ok
    assert pids["daemon"] in {p.pid for p in rep.killed}
    assert time.monotonic() - t0 < 0.3 + 3.0
    assert not alive(pids["daemon"])


@pytest.mark.parametrize("mode", ALL_MODES)
def test_marker_is_inherited_by_every_member(trees, pipe, mode):
    t, pids = start_daemonizer(trees, pipe, mode, tag="job-7.a_b")
    me = proctree.proc(os.getpid())
    m = _marker.parse_marker(t.marker)
    assert m == (me.pid, me.start_time, "job-7.a_b")
    assert t.marker == f"{me.pid}:{me.start_time}:job-7.a_b"
    try:
        for pid in (t.pid, pids["daemon"], t.keeper_pid):
            assert environ_marker(pid) == m
    finally:
        if mode == "session":
            _end_daemon(pids["daemon"])  # session mode's documented escape: the reaper's job


@pytest.mark.parametrize("mode", ALL_MODES)
def test_detached_from_the_callers_session(trees, mode):
    t = spawn(["sleep", "60"], contain=mode)
    trees.append(t)
    keeper, cmd, me = (proctree.proc(p) for p in (t.keeper_pid, t.pid, os.getpid()))
    assert keeper.sid == keeper.pid != me.sid  # the keeper leads a session of its own
    assert cmd.sid == keeper.pid and cmd.pgid == cmd.pid  # the command: that session, its own group
    assert cmd.ppid == keeper.pid


@pytest.mark.parametrize("mode", ALL_MODES)
def test_cat_round_trip_through_the_keeper(trees, mode):
    t = spawn(["cat"], contain=mode, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    trees.append(t)
    t.stdin.write(b"hello\n")
    t.stdin.flush()
    assert t.stdout.readline() == b"hello\n"
    out, err = t.communicate(b"more bytes")
    assert out == b"more bytes" and err is None
    assert t.returncode == 0


def test_text_mode_and_env_and_cwd(trees, tmp_path):
    t = spawn(["sh", "-c", 'echo "$FOO $(pwd) $PROCTREE_OWNER"'], stdout=subprocess.PIPE, text=True,
              env={**os.environ, "FOO": "bar"}, cwd=str(tmp_path))
    trees.append(t)
    out, _ = t.communicate(timeout=10)
    assert out.split() == ["bar", str(tmp_path), t.marker]


@pytest.mark.parametrize("mode", ALL_MODES)
def test_exit_status_and_signal_status(trees, mode):
    t = spawn(["sh", "-c", "exit 7"], contain=mode)
    trees.append(t)
    assert t.wait(timeout=10) == 7 and t.returncode == 7
    t = spawn(["sh", "-c", "kill -9 $$"], contain=mode)
    trees.append(t)
    assert t.wait(timeout=10) == -9


def test_wait_timeout(trees):
    t = spawn(["sleep", "60"])
    trees.append(t)
    with pytest.raises(subprocess.TimeoutExpired):
        t.wait(timeout=0.05)
    assert t.poll() is None and t.returncode is None


@pytest.mark.parametrize("mode", CONTAINING)
def test_leftovers_are_ended_when_the_command_exits(trees, pipe, mode):
    t, pids = start_daemonizer(trees, pipe, mode, then="exit")
    assert t.wait(timeout=15) == 3
    assert wait_gone([pids["daemon"]], 2.0), "the command's leftover survived it"


@pytest.mark.parametrize("mode", CONTAINING)
def test_keep_orphans_keeps_them_until_terminate(trees, pipe, mode):
    t, pids = start_daemonizer(trees, pipe, mode, then="exit", keep_orphans=True)
    assert t.wait(timeout=15) == 3
    time.sleep(0.3)
    assert alive(pids["daemon"])
    assert [p.pid for p in t.members()] == [pids["daemon"]]
    rep = t.terminate(grace=1)
    assert rep.ok and pids["daemon"] in {p.pid for p in rep.found}
    assert not alive(pids["daemon"])


@pytest.mark.parametrize("mode", ALL_MODES)
def test_signals_are_forwarded_to_the_command(trees, mode):
    t = spawn(["sh", "-c", 'trap "echo got-usr1; exit 5" USR1; echo ready; while :; do sleep 0.05; done'],
              contain=mode, stdout=subprocess.PIPE, text=True)
    trees.append(t)
    assert t.stdout.readline() == "ready\n"
    t.send_signal(signal.SIGUSR1)
    assert t.stdout.readline() == "got-usr1\n"
    assert t.wait(timeout=10) == 5


@pytest.mark.parametrize("mode", CONTAINING)
def test_sigkill_goes_to_the_command_not_the_keeper(trees, pipe, mode):
    t, pids = start_daemonizer(trees, pipe, mode)
    t.send_signal(signal.SIGKILL)
    assert t.wait(timeout=10) == -signal.SIGKILL
    assert wait_gone([pids["daemon"]], 3.0)  # the keeper lived to end the leftovers


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("sig", [signal.SIGPROF, signal.SIGALRM])
def test_signals_the_keeper_does_not_forward_reach_the_command(trees, mode, sig):
    # SIGPROF's default action would kill the keeper (and free its tree);
    # SIGALRM is the keeper's own wake-up. Both must go to the command.
    t = spawn(["sleep", "60"], contain=mode)
    trees.append(t)
    cmd = proctree.proc(t.pid)
    t.send_signal(sig)
    assert t.wait(timeout=10) == -sig
    assert not alive(cmd.pid, cmd.start_time)
    assert t.join(timeout=10) == -sig  # the keeper ended by itself, not of the signal
    assert t._popen.returncode == -sig  # it re-raised the command's signal, as documented


@pytest.mark.skipif(not CGROUP_OK, reason=f"no writable cgroup v2: {CGROUP_WHY}")
def test_nested_trees_are_removed_with_the_outer_one(trees, pipe):
    r, w = pipe
    inner = ("import os, sys, time; sys.path.insert(0, sys.argv[1]); from proctree._containment.spawn import spawn; "
             "t = spawn(['sleep', '300'], contain='cgroup'); "
             "os.write(int(sys.argv[2]), b'inner %d\\n' % t.pid); time.sleep(300)")
    root = os.path.dirname(os.path.dirname(proctree.__file__))
    t = spawn([sys.executable, "-c", inner, root, str(w)], contain="cgroup", pass_fds=(w,))
    trees.append(t)
    os.close(w)
    pid = read_lines(r, 1)["inner"]
    assert _cgroup.own_cgroup(pid).startswith(_cgroup.own_cgroup(t.pid) + "/proctree-")
    rep = t.terminate(grace=1)
    assert rep.ok and pid in {p.pid for p in rep.found}
    assert not os.path.exists(t.cgroup)


def test_context_manager_tears_down(pipe):
    r, w = pipe
    with spawn([sys.executable, "-c", DAEMONIZER, str(w), "0", "sleep"], pass_fds=(w,)) as t:
        os.close(w)
        pids = read_lines(r, 2)
    assert not alive(pids["daemon"]) and not alive(pids["cmd"])
    assert t.returncode is not None


def test_async_flavour():
    async def main():
        t = await spawn_async(["sh", "-c", "sleep 0.1; exit 4"])
        try:
            assert await t.wait_async(timeout=10) == 4
            t2 = await spawn_async(["sleep", "60"])
            with pytest.raises(subprocess.TimeoutExpired):
                await t2.wait_async(timeout=0.05)
            rep = await t2.terminate_async(grace=1)
            assert rep.ok and t2.returncode == -signal.SIGTERM
        finally:
            t.terminate(grace=0)

    asyncio.run(main())


def test_members_of_a_finished_tree_is_empty(trees):
    t = spawn(["true"])
    trees.append(t)
    t.wait(timeout=10)
    assert t.members() == []
    assert t.terminate().ok


@pytest.mark.skipif(not CGROUP_OK, reason=f"no writable cgroup v2: {CGROUP_WHY}")
def test_cgroup_freeze_then_kill_without_cgroup_kill(trees, pipe, monkeypatch):
    monkeypatch.setattr(_cgroup, "has_kill", lambda path: False)  # kernels before 5.14
    t, pids = start_daemonizer(trees, pipe, "cgroup", ignore=True)
    rep = t.terminate(grace=0.2)
    assert rep.ok and pids["daemon"] in {p.pid for p in rep.killed}
    assert not alive(pids["daemon"]) and not os.path.exists(t.cgroup)


@pytest.mark.skipif(not CGROUP_OK, reason=f"no writable cgroup v2: {CGROUP_WHY}")
@pytest.mark.parametrize("freezes", [True, False])
def test_freeze_kill_spares_a_pid_that_left_the_cgroup(trees, monkeypatch, freezes):
    # Without cgroup.kill the members are SIGKILLed one by one from a read of
    # cgroup.procs; a pid that is no longer a member by then (reused by a
    # process elsewhere: played here by one of ours outside the cgroup) is spared.
    t = spawn(["sleep", "60"], contain="cgroup")
    trees.append(t)
    outsider = subprocess.Popen(["sleep", "60"])
    try:
        real_pids = _cgroup.pids
        with monkeypatch.context() as m:
            m.setattr(_cgroup, "has_kill", lambda path: False)
            m.setattr(_cgroup, "pids", lambda path, *a: real_pids(path, *a) + [outsider.pid])
            if not freezes:  # the freezer refused: members can exit (and pids be reused) meanwhile
                real_open = open

                def no_freezer(f, *a, **kw):
                    if str(f).endswith("cgroup.freeze"):
                        raise PermissionError(errno.EACCES, "Permission denied")
                    return real_open(f, *a, **kw)

                m.setattr("builtins.open", no_freezer)
            _cgroup.kill(t.cgroup)
        assert t.wait(timeout=10) == -signal.SIGKILL
        assert outsider.poll() is None, "a pid outside the cgroup was killed"
    finally:
        outsider.kill()
        outsider.wait()


@pytest.mark.parametrize("mode", CONTAINING)
def test_without_pidfds_teardown_still_works(trees, pipe, monkeypatch, mode):
    monkeypatch.setenv("PROCTREE_NO_PIDFD", "1")
    t, pids = start_daemonizer(trees, pipe, mode, ignore=True)
    rep = t.terminate(grace=0.2)
    assert rep.ok and pids["daemon"] in {p.pid for p in rep.found}


def test_session_mode_catches_what_kept_the_session(trees):
    t = spawn(["sh", "-c", "(sleep 100 &); echo ok; sleep 100"], contain="session", stdout=subprocess.PIPE)
    trees.append(t)
    assert t.stdout.readline() == b"ok\n"
    orphan = [p for p in t.members() if p.ppid != t.pid and p.pid != t.pid]
    assert orphan and all(p.sid == t.keeper_pid for p in orphan)
    rep = t.terminate()
    assert rep.ok and {p.identity for p in orphan} <= {p.identity for p in rep.found}


def test_session_mode_ends_what_kept_the_session_when_the_command_exits(trees):
    t = spawn(["sh", "-c", "(sleep 100 &); echo ok; read x; exit 2"], contain="session",
              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    trees.append(t)
    assert t.stdout.readline() == b"ok\n"
    orphan = [p for p in t.members() if p.pid != t.pid]
    assert orphan and all(p.ppid != t.pid and p.sid == t.keeper_pid for p in orphan)
    t.stdin.write(b"go\n")
    t.stdin.close()
    assert t.wait(timeout=10) == 2
    assert wait_gone([p.pid for p in orphan], 3.0), "the command's leftover in its session survived it"


def test_session_mode_keep_orphans_keeps_what_kept_the_session(trees):
    t = spawn(["sh", "-c", "(sleep 100 &); exit 2"], contain="session", keep_orphans=True)
    trees.append(t)
    assert t.wait(timeout=10) == 2
    orphan = [p for p in t.members() if p.pid != t.pid]
    time.sleep(0.3)
    assert orphan and all(alive(p.pid, p.start_time) for p in orphan)
    rep = t.terminate(grace=1)
    assert rep.ok and {p.identity for p in orphan} <= {p.identity for p in rep.found}


# ---------------------------------------------------------------------------
# Owner death

OWNER = textwrap.dedent(r"""
    import os, sys, threading, time
    sys.path.insert(0, sys.argv[1])
    from proctree._containment.spawn import spawn
    w, mode, how = int(sys.argv[2]), sys.argv[3], sys.argv[4]
    daemonizer, OWNER_GRACE = sys.argv[5], float(sys.argv[6])
    r2, w2 = os.pipe()
    box = []
    def go():
        box.append(spawn([sys.executable, "-c", daemonizer, str(w2), "1", "sleep"],
                         contain=mode, grace=OWNER_GRACE, pass_fds=(w2,)))
    if how == "thread":
        th = threading.Thread(target=go)
        th.start()
        th.join()  # the spawning thread is gone from here on
    else:
        go()
    os.close(w2)
    data = b""
    while data.count(b"\n") < 2:
        data += os.read(r2, 100)
    os.write(w, data + b"keeper %d\nready 1\n" % box[0].keeper_pid)
    time.sleep(300)
""")


OWNER_GRACE = 1.0


def start_owner(pipe, mode, how, **env):
    r, w = pipe
    root = os.path.dirname(os.path.dirname(proctree.__file__))
    owner = subprocess.Popen([sys.executable, "-c", OWNER, root, str(w), mode, how, DAEMONIZER, str(OWNER_GRACE)],
                             pass_fds=(w,),
                             env={**os.environ, **env})
    os.close(w)
    try:
        pids = read_lines(r, 4, timeout=30)
    except BaseException:
        owner.kill()
        owner.wait()
        raise
    return owner, pids


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("watch", ["pidfd", "pdeathsig"])
def test_owner_sigkill_ends_the_tree(pipe, mode, watch):
    owner, pids = start_owner(pipe, mode, "main", **({"PROCTREE_NO_PIDFD": "1"} if watch == "pdeathsig" else {}))
    try:
        tree = [pids["keeper"], pids["cmd"]] + ([pids["daemon"]] if mode != "session" else [])
        assert all(alive(p) for p in tree)
        owner.kill()
        owner.wait()
        t0 = time.monotonic()
        # The daemon ignores SIGTERM: it needs the SIGKILL after the grace.
        assert wait_gone(tree, 3 * OWNER_GRACE), f"tree outlived its owner: {[p for p in tree if alive(p)]}"
        took = time.monotonic() - t0
        assert OWNER_GRACE * 0.9 <= took <= 3 * OWNER_GRACE or mode == "session", took
        if mode == "cgroup":
            assert not cgroup_dirs_of(owner.pid)
    finally:
        owner.kill()
        owner.wait()
    if mode == "session":
        _end_daemon(pids["daemon"])  # session mode's documented escape: the reaper's job


def cgroup_dirs_of(pid):
    try:
        base = _cgroup.base_dir()
    except _cgroup.Unavailable:
        return []
    return [n for n in os.listdir(base) if n.startswith(f"proctree-{pid}-")]


def _end_daemon(pid):
    """Kill a daemon we started if it is still ours (it carries this run's leak marker)."""
    try:
        p = proctree.proc(pid)
        with open(f"/proc/{pid}/environ", "rb") as f:
            if os.environ["PROCTREE_TEST_RUN"].encode() in f.read():
                os.kill(p.pid, signal.SIGKILL)
    except (OSError, proctree.NoSuchProcess):
        pass


@pytest.mark.parametrize("mode", CONTAINING)
@pytest.mark.parametrize("watch", ["pidfd", "pdeathsig"])
def test_spawned_from_a_thread_survives_the_thread(pipe, mode, watch):
    # "pdeathsig": the keeper's path for kernels without pidfds, where
    # PR_SET_PDEATHSIG fires when the spawning THREAD exits: it must only wake
    # the keeper, never end the tree while the owner process lives.
    owner, pids = start_owner(pipe, mode, "thread", **({"PROCTREE_NO_PIDFD": "1"} if watch == "pdeathsig" else {}))
    try:
        time.sleep(0.5)  # long past the spawning thread's exit (PR_SET_PDEATHSIG would have fired)
        assert all(alive(pids[k]) for k in ("keeper", "cmd", "daemon"))
        owner.kill()
        owner.wait()
        assert wait_gone([pids[k] for k in ("keeper", "cmd", "daemon")], 3 * OWNER_GRACE)
    finally:
        owner.kill()
        owner.wait()


# ---------------------------------------------------------------------------
# Bad input and limits

def test_missing_executable_raises_like_popen_and_leaves_nothing():
    with pytest.raises(FileNotFoundError) as popen_err:
        subprocess.Popen(["/nonexistent/proctree-test-binary"])
    before = cgroup_dirs()
    for mode in ["auto", "subreaper", "session"] + (["cgroup"] if CGROUP_OK else []):
        with pytest.raises(FileNotFoundError) as ours:
            spawn(["/nonexistent/proctree-test-binary"], contain=mode)
        assert (ours.value.errno, ours.value.filename, str(ours.value)) == \
               (popen_err.value.errno, popen_err.value.filename, str(popen_err.value))
        with pytest.raises(FileNotFoundError):
            spawn(["proctree-no-such-command-on-path"], contain=mode)
    assert cgroup_dirs() == before  # no keeper either: the leak check would see it


@pytest.mark.parametrize("mode", ALL_MODES)
def test_missing_executable_keeper_exits_by_itself(monkeypatch, mode):
    # After "err ... exec" the keeper cleans up and exits 127 on its own; it is
    # not left to be SIGKILLed by spawn()'s cleanup (in cgroup mode it used to
    # sit inside the cgroup it was trying to remove).
    seen = []
    real = Tree._abandon

    def abandon(self, *a, **kw):
        real(self, *a, **kw)
        seen.append(self._popen.returncode)

    monkeypatch.setattr(Tree, "_abandon", abandon)
    before = cgroup_dirs()
    with pytest.raises(FileNotFoundError):
        spawn(["/nonexistent/proctree-test-binary"], contain=mode)
    assert seen == [127]
    assert cgroup_dirs() == before


def test_missing_cwd_raises_like_popen(tmp_path):
    with pytest.raises(FileNotFoundError) as ours:
        spawn(["true"], cwd=str(tmp_path / "nope"))
    assert ours.value.filename == str(tmp_path / "nope")


def test_not_executable_raises_permission_error(tmp_path):
    f = tmp_path / "script"
    f.write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        spawn([str(f)])


@pytest.mark.parametrize("kw, exc", [
    ({"contain": "docker"}, ValueError), ({"contain": ""}, ValueError), ({"contain": 1}, TypeError),
    ({"grace": -1}, ValueError), ({"grace": float("nan")}, ValueError), ({"grace": float("inf")}, ValueError),
    ({"grace": "1"}, TypeError), ({"grace": True}, TypeError),
    ({"tag": ""}, ValueError), ({"tag": "a b"}, ValueError), ({"tag": "x" * 65}, ValueError),
    ({"tag": "a:b"}, ValueError), ({"tag": "é"}, ValueError), ({"tag": 5}, TypeError),
    ({"keep_orphans": 1}, TypeError),
    ({"process_group": 5}, ValueError), ({"process_group": True}, TypeError),
    ({"preexec_fn": os.getpid}, ValueError), ({"user": "nobody"}, ValueError),
    ({"group": "nogroup"}, ValueError), ({"extra_groups": [0]}, ValueError), ({"user": 1.5}, TypeError),
])
def test_bad_arguments_are_refused_before_anything_starts(kw, exc):
    before = cgroup_dirs()
    with pytest.raises(exc) as e:
        spawn(["sleep", "60"], **kw)
    assert str(e.value)
    assert cgroup_dirs() == before


def test_rejected_kwarg_names_the_reason():
    with pytest.raises(ValueError, match="preexec_fn=.*would run in the keeper"):
        spawn(["true"], preexec_fn=os.getpid)


def test_cgroup_unavailable_is_a_clear_error_and_auto_falls_back(monkeypatch, trees):
    monkeypatch.setattr(_cgroup, "find_mount", lambda *a: None)
    with pytest.raises(ContainmentUnavailable, match="cgroup.*no cgroup v2 hierarchy is mounted"):
        spawn(["true"], contain="cgroup")
    t = spawn(["sleep", "60"], contain="auto")
    trees.append(t)
    assert t.mode == ("subreaper" if LINUX else "session")
    assert "no cgroup v2 hierarchy" in t.mode_reason


@pytest.mark.skipif(not CGROUP_OK, reason=f"no writable cgroup v2: {CGROUP_WHY}")
def test_auto_picks_cgroup_here(trees):
    t = spawn(["sleep", "60"])
    trees.append(t)
    assert t.mode == "cgroup" and t.mode_reason is None
    assert _cgroup.pids(t.cgroup) == [t.pid]  # the command was born there; the keeper moved back out
    assert _cgroup.own_cgroup(t.keeper_pid) == _cgroup.own_cgroup()
    assert _cgroup.own_cgroup(t.pid).endswith(os.path.basename(t.cgroup))
    t.terminate()
    assert not os.path.exists(t.cgroup)


def test_two_hundred_trees_at_once():
    made = []
    try:
        for i in range(200):
            made.append(spawn(["sleep", "120"], grace=1))
        assert len({t.pid for t in made}) == 200
        keepers = [t.keeper_pid for t in made]
        assert all(alive(k) for k in keepers)
    finally:
        reports = [t.terminate() for t in made]
    assert all(r.ok for r in reports)
    assert not any(alive(k) for k in keepers)
    assert cgroup_dirs() == []


def test_marker_format_and_parse():
    assert _marker.format_marker(12, 345) == "12:345"
    assert _marker.format_marker(12, 345, "t.1") == "12:345:t.1"
    assert _marker.parse_marker("12:345:t.1") == (12, 345, "t.1")
    assert _marker.parse_marker(b"12:345") == (12, 345, None)
    for junk in ["", "12", "0:1", "-1:2", "1:2:", "1:2:a b", "1:x", "1:2:3:4", b"\xff", None, 5, "1:2:" + "x" * 65]:
        assert _marker.parse_marker(junk) is None, junk
    assert _marker.from_environ_block(b"A=1\0PROCTREE_OWNER=5:6:x\0B=2") == (5, 6, "x")
    assert _marker.from_environ_block(b"A=1\0") is None
    with pytest.raises(ValueError):
        _marker.format_marker(0, 1)
    with pytest.raises(ValueError):
        _marker.format_marker(1, 2, "bad tag")


def test_find_mount_parses_mountinfo(tmp_path):
    f = tmp_path / "mountinfo"
    f.write_text(
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "41 31 0:38 / /odd\\040place/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n")
    assert _cgroup.find_mount(str(f)) == "/odd place/unified"
    f.write_text("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")
    assert _cgroup.find_mount(str(f)) is None


def test_cgroup_functions_refuse_foreign_cgroups(tmp_path):
    lookalike = tmp_path / "proctree-1-2" / "x"  # the right names, outside the cgroup mount
    lookalike.mkdir(parents=True)
    for path in ["/sys/fs/cgroup/unified", "/sys/fs/cgroup/unified/system.slice/x", str(tmp_path), str(lookalike)]:
        assert not _cgroup.is_ours(path)
        with pytest.raises(ValueError):
            _cgroup.kill(path)
        with pytest.raises(ValueError):
            _cgroup.remove(path)


def test_tree_is_exported_type(trees):
    t = spawn(["true"])
    trees.append(t)
    assert isinstance(t, Tree)
    t.wait(timeout=10)


PTY_OWNER = textwrap.dedent(r"""
    import os, sys
    sys.path.insert(0, sys.argv[1])
    from proctree._containment.spawn import spawn
    # We lead a session whose controlling terminal is the pty; the tree must not
    # be in it, so job control (SIGTTIN/SIGTTOU) can never stop it.
    t = spawn(["sh", "-c", "read x; echo got:$x; exec cat /proc/self/stat"], contain=sys.argv[2])
    print("spawned", t.pid, flush=True)
    rc = t.wait(timeout=20)
    print("rc", rc, flush=True)
""")


@pytest.mark.parametrize("mode", ALL_MODES)
def test_tree_has_no_controlling_terminal_but_can_use_the_tty(mode):
    import pty

    root = os.path.dirname(os.path.dirname(proctree.__file__))
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader with the pty as its controlling terminal
        try:
            os.execv(sys.executable, [sys.executable, "-c", PTY_OWNER, root, mode])
        finally:
            os._exit(127)
    out = b""
    try:
        deadline = time.monotonic() + 30
        sent = False
        while time.monotonic() < deadline and not re.search(rb"rc -?[0-9]+\r?\n", out):
            if b"spawned" in out and not sent:
                os.write(fd, b"hi\n")
                sent = True
            if select.select([fd], [], [], 0.5)[0]:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
    finally:
        try:
            os.kill(pid, signal.SIGKILL)  # our own pty child; its keeper then ends the tree
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
    text = out.decode(errors="replace")
    assert "got:hi" in text and "rc 0" in text, text
    stat = next(line for line in text.splitlines() if ") " in line and line.split()[0].isdigit())
    fields = stat.rsplit(")", 1)[1].split()
    assert fields[4] == "0", f"tty_nr should be 0 (no controlling terminal): {stat}"


@pytest.mark.parametrize("args, kw", [
    (["echo", "plain"], {}),
    ([b"echo", b"bytes"], {}),
    ("echo $0 from-shell", {"shell": True}),
    (["foo", "bar"], {"executable": "echo"}),
])
def test_args_behave_as_with_popen(trees, args, kw):
    expected = subprocess.run(args, stdout=subprocess.PIPE, timeout=10, **kw).stdout
    t = spawn(args, stdout=subprocess.PIPE, **kw)
    trees.append(t)
    assert t.communicate(timeout=10)[0] == expected


@pytest.mark.parametrize("mode", ALL_MODES)
def test_pass_fds_with_close_fds_false_behaves_as_with_popen(pipe, mode, trees):
    # Popen lets pass_fds override close_fds=False (with a RuntimeWarning).
    r, w = pipe
    with pytest.warns(RuntimeWarning, match="pass_fds overriding close_fds"):
        t = spawn([sys.executable, "-c", "import os, sys; os.write(int(sys.argv[1]), b'hi\\n')", str(w)],
                  contain=mode, close_fds=False, pass_fds=(w,))
    trees.append(t)
    assert t.wait(timeout=10) == 0
    assert os.read(r, 10) == b"hi\n"


@pytest.mark.parametrize("args", [[], ["echo", 3], ["echo", "a\0b"]])
def test_bad_args_raise_what_popen_raises(args):
    with pytest.raises(Exception) as popen_err:
        subprocess.Popen(args)
    with pytest.raises(type(popen_err.value)):
        spawn(args)


@pytest.mark.skipif(not CGROUP_OK, reason=f"no writable cgroup v2: {CGROUP_WHY}")
def test_cgroup_that_cannot_be_entered(monkeypatch, trees):
    # A delegation can allow mkdir but not the move: the keeper is refused, the
    # command never starts, "cgroup" says why and "auto" falls back.
    import builtins

    real_open = builtins.open

    def refusing_open(path, *a, **kw):
        if str(path).endswith("cgroup.procs") and "/proctree-" in str(path) and a[:1] == ("w",):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, *a, **kw)

    monkeypatch.setattr(builtins, "open", refusing_open)
    before = cgroup_dirs()
    with pytest.raises(ContainmentUnavailable, match="cannot move the keeper"):
        spawn(["sleep", "60"], contain="cgroup")
    t = spawn(["sleep", "60"])
    trees.append(t)
    assert t.mode == "subreaper" and "Permission denied" in t.mode_reason
    assert cgroup_dirs() == before


def test_wait_without_timeout_outlasts_a_long_select(trees, monkeypatch):
    # wait() with no timeout must wait for as long as the command runs: a
    # select() slice that ends with nothing to read (here: one that would
    # have been an hour long) is not a timeout.
    from proctree._containment import spawn as _spawn

    real_select = _spawn.select.select

    def select(r, w, x, timeout=None):
        if timeout is not None and timeout >= 3600:
            return [], [], []  # as if an hour went by
        return real_select(r, w, x, timeout)

    monkeypatch.setattr(_spawn.select, "select", select)
    t = spawn(["sh", "-c", "sleep 0.3; exit 6"])
    trees.append(t)
    assert t.wait() == 6


def test_terminate_from_another_thread_while_one_waits(trees):
    import threading

    t = spawn(["sleep", "30"])
    trees.append(t)
    got = []
    th = threading.Thread(target=lambda: got.append(t.wait()))
    th.start()
    try:
        time.sleep(0.2)  # let the waiter block
        t0 = time.monotonic()
        assert t.terminate(grace=1).ok
        assert time.monotonic() - t0 < 10, "terminate() waited for the waiter"
        th.join(10)
        assert got == [-signal.SIGTERM]
    finally:
        t.kill()
        th.join(10)


def test_keeper_confirming_scan_finds_what_the_children_lists_find():
    """The keeper's full-scan walk (which confirms every "nothing left") agrees with the live walk."""
    from proctree._containment import keeper as _keeper

    r, w = os.pipe()
    # python -> (sleep, python -> sleep): says "ok" on the pipe once all four run
    inner = "import subprocess, sys; s = subprocess.Popen(['sleep', '30']); print('ok', flush=True); s.wait()"
    outer = ("import subprocess, sys; a = subprocess.Popen(['sleep', '30']); "
             f"b = subprocess.Popen([sys.executable, '-c', {inner!r}], stdout={w}); b.wait()")
    p = subprocess.Popen([sys.executable, "-c", outer], pass_fds=(w,))
    os.close(w)
    try:
        with os.fdopen(r, "rb") as f:
            assert f.readline().strip() == b"ok"
        want = {d.pid for d in proctree.descendants(p.pid)}
        assert len(want) == 3
        assert set(_keeper.walk_by_scan(p.pid)) == want
        assert set(_keeper.walk(p.pid)) == want
    finally:
        proctree.terminate_tree(p.pid, grace=0.5)
        p.wait()
