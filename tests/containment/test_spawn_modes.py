"""Contained spawning on real processes, by mode: what each containment catches and how a tree ends.

cgroup, subreaper and session mode: daemons and orphans are caught, marked and
ended (with and without cgroup.kill or pidfds), nested trees, the choice of
mode and its fallbacks, and the cgroup plumbing. Every test registers what it
starts through the Tree (or pids reported on a pipe, never guessed) and ends
it in a finally/fixture; the autouse leak check catches anything that
survives, keepers included.
"""

import errno
import os
import signal
import subprocess
import sys
import time

import pytest

import proctree
from proctree._containment import cgroup as _cgroup
from proctree._containment.evidence import marker as _marker
from proctree._containment.spawn import ContainmentUnavailable, spawn
from support.spawnkit import (
    ALL_MODES,
    CGROUP_OK,
    CGROUP_WHY,
    CONTAINING,
    LINUX,
    alive,
    cgroup_dirs,
    end_daemon,
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
    pidns, timens = os.stat("/proc/self/ns/pid").st_ino, os.stat("/proc/self/ns/time").st_ino
    assert m == (me.pid, me.start_time, "job-7.a_b", pidns, timens, os.geteuid())
    assert t.marker == f"{me.pid}:{me.start_time}:job-7.a_b@{pidns}.{timens}.{os.geteuid()}"
    try:
        for pid in (t.pid, pids["daemon"], t.keeper_pid):
            assert environ_marker(pid) == m
    finally:
        if mode == "session":
            end_daemon(pids["daemon"])  # session mode's documented escape: the reaper's job


@pytest.mark.parametrize("mode", ALL_MODES)
def test_detached_from_the_callers_session(trees, mode):
    t = spawn(["sleep", "60"], contain=mode)
    trees.append(t)
    keeper, cmd, me = (proctree.proc(p) for p in (t.keeper_pid, t.pid, os.getpid()))
    assert keeper.sid == keeper.pid != me.sid  # the keeper leads a session of its own
    assert cmd.sid == keeper.pid and cmd.pgid == cmd.pid  # the command: that session, its own group
    assert cmd.ppid == keeper.pid


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


@pytest.mark.skipif(not CGROUP_OK, reason=f"no writable cgroup v2: {CGROUP_WHY}")
def test_nested_trees_are_removed_with_the_outer_one(trees, pipe):
    r, w = pipe
    inner = (
        "import os, sys, time; sys.path.insert(0, sys.argv[1]); from proctree._containment.spawn import spawn; "
        "t = spawn(['sleep', '300'], contain='cgroup'); "
        "os.write(int(sys.argv[2]), b'inner %d\\n' % t.pid); time.sleep(300)"
    )
    root = os.path.dirname(os.path.dirname(proctree.__file__))
    t = spawn([sys.executable, "-c", inner, root, str(w)], contain="cgroup", pass_fds=(w,))
    trees.append(t)
    os.close(w)
    pid = read_lines(r, 1)["inner"]
    assert _cgroup.own_cgroup(pid).startswith(_cgroup.own_cgroup(t.pid) + "/proctree-")
    rep = t.terminate(grace=1)
    assert rep.ok and pid in {p.pid for p in rep.found}
    assert not os.path.exists(t.cgroup)


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
    t = spawn(
        ["sh", "-c", "(sleep 100 &); echo ok; read x; exit 2"],
        contain="session",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    trees.append(t)
    assert t.stdout.readline() == b"ok\n"
    orphan = [p for p in t.members() if p.pid != t.pid]
    assert orphan and all(p.ppid != t.pid and p.sid == t.keeper_pid for p in orphan)
    t.stdin.write(b"go\n")
    t.stdin.close()
    assert t.wait(timeout=10) == 2
    assert wait_gone([p.pid for p in orphan], 3.0), "the command's leftover in its session survived it"


def test_session_mode_sweeps_a_daemon_that_left_the_session_at_the_commands_exit(trees, pipe):
    """The keeper skips its sweep only when no pid was handed out after the command's: a daemon moved it."""
    t, pids = start_daemonizer(trees, pipe, "session", then="exit", grace=2)
    daemon = proctree.proc(pids["daemon"])
    assert daemon.sid != t.keeper_pid  # it left the session: only its marker makes it a member
    assert t.wait(timeout=10) == 3
    assert wait_gone([daemon.pid], 3.0), "the daemon that left the session survived its command"


def test_session_mode_command_that_started_nothing_ends_clean(trees):
    """A command that started nothing (where the keeper may skip its sweep): exit, done, and nothing left behind."""
    for _ in range(3):
        t = spawn(["true"], contain="session")
        trees.append(t)
        assert t.wait(timeout=10) == 0
        assert t.parts.life.done and t.members() == []


def test_session_mode_keep_orphans_keeps_what_kept_the_session(trees):
    t = spawn(["sh", "-c", "(sleep 100 &); exit 2"], contain="session", keep_orphans=True)
    trees.append(t)
    assert t.wait(timeout=10) == 2
    orphan = [p for p in t.members() if p.pid != t.pid]
    time.sleep(0.3)
    assert orphan and all(alive(p.pid, p.start_time) for p in orphan)
    rep = t.terminate(grace=1)
    assert rep.ok and {p.identity for p in orphan} <= {p.identity for p in rep.found}


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
        for _ in range(200):
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
    assert _marker.parse_marker("12:345:t.1")[:3] == (12, 345, "t.1")
    assert _marker.parse_marker(b"12:345")[:3] == (12, 345, None)
    for junk in ["", "12", "0:1", "-1:2", "1:2:", "1:2:a b", "1:x", "1:2:3:4", b"\xff", None, 5, "1:2:" + "x" * 65]:
        assert _marker.parse_marker(junk) is None, junk
    assert _marker.from_environ_block(b"A=1\0PROCTREE_OWNER=5:6:x\0B=2")[:3] == (5, 6, "x")
    assert _marker.from_environ_block(b"A=1\0") is None
    with pytest.raises(ValueError):
        _marker.format_marker(0, 1)
    with pytest.raises(ValueError):
        _marker.format_marker(1, 2, "bad tag")


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("12:345@7.8.1000", (12, 345, None, 7, 8, 1000)),
        ("12:345:t.1@7.0.0", (12, 345, "t.1", 7, 0, 0)),
        (f"1:2@{2**64 - 1}.{2**64 - 1}.{2**32 - 1}", (1, 2, None, 2**64 - 1, 2**64 - 1, 2**32 - 1)),
        (f"1:2@{2**64}.1.1", None),  # past an inode's range
        (f"1:2@1.1.{2**32}", None),  # past a uid's range
        ("1:2@1.1", None),
        ("1:2@1.1.1.1", None),
        ("1:2@a.b.c", None),
        ("1:2@", None),
        ("1:2:@1.1.1", None),
        ("1:2@1.1.1:tag", None),
        ("1:2@-1.1.1", None),
    ],
)
def test_placed_marker_format_and_parse(value, want):
    got = _marker.parse_marker(value)
    assert got == want
    if want is not None:
        assert not got.legacy
        assert str(got) == value
        assert _marker.format_marker(want[0], want[1], want[2], want[3:]) == value
    assert _marker.parse_marker("12:345").legacy


@pytest.mark.parametrize("place", [(-1, 0, 0), (0, 2**64, 0), (0, 0, 2**32), (True, 0, 0), ("1", 0, 0)])
def test_placed_marker_refuses_bad_places(place):
    with pytest.raises(ValueError):
        _marker.format_marker(1, 2, None, place)


def test_marker_parser_never_raises_on_garbage():
    import random

    rng = random.Random(1729)
    alphabet = "0123456789:@.-_abcXYZ \x00\xff"
    for _ in range(20000):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        got = _marker.parse_marker(value)
        assert got is None or str(got) == value or _marker.parse_marker(str(got)) == got
        _marker.parse_marker(value.encode("utf-8", "surrogateescape"))


def test_find_mount_parses_mountinfo(tmp_path):
    f = tmp_path / "mountinfo"
    f.write_text(
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "41 31 0:38 / /odd\\040place/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n"
    )
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


def test_cgroup_remove_of_a_tree_already_removed_reads_nothing(monkeypatch, tmp_path):
    """A tree cgroup and parent both gone (ENOENT): True at once; a look-alike that exists is still refused."""

    def no_mount_table(*a):
        raise AssertionError("the mount table was read for a cgroup that is gone")

    monkeypatch.setattr(_cgroup, "_read_mount", no_mount_table)
    assert _cgroup.remove(str(tmp_path / "proctree-1-2" / "tree-1-abc"))
    (tmp_path / "proctree-1-2").mkdir()
    monkeypatch.undo()
    with pytest.raises(ValueError):
        _cgroup.remove(str(tmp_path / "proctree-1-2" / "tree-1-abc"))
    assert (tmp_path / "proctree-1-2").is_dir()


@pytest.mark.skipif(not CGROUP_OK, reason=f"no writable cgroup v2: {CGROUP_WHY}")
def test_owner_teardown_spares_a_pid_that_is_not_in_the_cgroup(trees, monkeypatch):
    # A pid read from cgroup.procs may exit and be reused by a process
    # elsewhere before it is signalled (played here by one of ours outside
    # the cgroup): the owner's teardown holds it, sees it is no member, spares it.
    from proctree._containment import cgroupworld as _cgroupworld

    t = spawn(["sleep", "60"], contain="cgroup")
    trees.append(t)
    outsider = subprocess.Popen(["sleep", "60"])
    try:
        real_pids = _cgroup.pids
        calls = []

        def stale_first_read(path, *a):
            # The first listing is stale (names the outsider); the reads after it are true.
            calls.append(path)
            return real_pids(path, *a) + ([outsider.pid] if len(calls) == 1 else [])

        monkeypatch.setattr(_cgroup, "pids", stale_first_read)
        rep = _cgroupworld.terminate(t.cgroup, 0.5)
        assert outsider.pid not in {p.pid for p in rep.found}
        assert outsider.poll() is None, "a pid outside the cgroup was signalled"
        assert t.pid in {p.pid for p in rep.found} and rep.ok
    finally:
        outsider.kill()
        outsider.wait()


@pytest.mark.parametrize("mode", ALL_MODES)
def test_keep_orphans_holds_the_orphan_in_every_mode(trees, mode):
    """wait() returns at the command's exit; the orphan is a member, join() waits for it, terminate() finds it."""
    t = spawn(["sh", "-c", "(sleep 30 &); exit 0"], contain=mode, keep_orphans=True, grace=0.5)
    trees.append(t)
    assert t.wait(timeout=10) == 0
    deadline = time.monotonic() + 5
    while not any(p.name == "sleep" for p in t.members()) and time.monotonic() < deadline:
        time.sleep(0.01)
    sleeper = [p for p in t.members() if p.name == "sleep"]
    assert sleeper, f"{mode}: the orphan is not a member"
    with pytest.raises(subprocess.TimeoutExpired):
        t.join(timeout=0.3)
    rep = t.terminate()
    assert sleeper[0].pid in {p.pid for p in rep.found} and rep.ok
    assert not alive(sleeper[0].pid)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_keep_orphans_holds_a_setsid_daemon_in_every_mode(trees, mode):
    """A daemon as --daemonize makes one (fork, setsid, exec): a member, however soon after the command's exit."""
    t = spawn(["sh", "-c", "(setsid sh -c 'exec sleep 30' &); exit 0"], contain=mode, keep_orphans=True, grace=0.5)
    trees.append(t)
    assert t.wait(timeout=10) == 0
    deadline = time.monotonic() + 5
    while not any(p.name == "sleep" for p in t.members()) and time.monotonic() < deadline:
        time.sleep(0.02)
    daemon = [p for p in t.members() if p.name == "sleep"]
    assert daemon, f"{mode}: the daemon is not a member"
    rep = t.terminate()
    assert daemon[0].pid in {p.pid for p in rep.found} and rep.ok


def test_a_cgroup_check_that_cannot_read_mountinfo_is_unavailable_not_a_refusal(monkeypatch):
    """Out of descriptors, "is it ours?" has no answer: Unavailable (EMFILE), never "not a cgroup proctree created"
    (which a second read, once another thread freed a descriptor, used to say)."""
    import errno

    from proctree._containment import cgroup

    def emfile(*a):
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(cgroup, "_read_mount", emfile)
    with pytest.raises(cgroup.Unavailable) as info:
        cgroup._require_ours("/sys/fs/cgroup/proctree-1-2/tree-1")
    assert info.value.errno == errno.EMFILE and "cannot check" in str(info.value)
    assert cgroup.find_mount() is None


@pytest.mark.skipif(not CGROUP_OK, reason=f"no writable cgroup v2: {CGROUP_WHY}")
def test_a_held_cgroup_keeper_exits_when_its_cgroup_empties_not_at_its_next_look():
    # After the owner's teardown the held keeper waits for its cgroup to empty; it used to
    # look every 250 ms, so every cgroup-mode terminate() took 250 ms. cgroup.events now
    # wakes it: a median far below that bound (loose: the machine is shared).
    took = []
    for _ in range(5):
        t = spawn(["sh", "-c", "sleep 60 & sleep 60 & wait"], contain="cgroup")
        try:
            time.sleep(0.1)
            t0 = time.monotonic()
            assert t.terminate().ok
            took.append(time.monotonic() - t0)
        finally:
            t.kill()
    took.sort()
    assert took[2] < 0.2, f"terminate() medians {took[2] * 1000:.0f} ms: the keeper waited for its poll"
