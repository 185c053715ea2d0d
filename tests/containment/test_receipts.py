"""Receipts (proctree/_containment/evidence/receipt.py) and PROCTREE_TREE in session mode.

The first half is the receipt file format and directory on their own: write,
read back, remove; every kind of bad file reported with its reason and never
raised on; the directory checks. The second half runs real trees: every
spawned tree has a receipt that its clean end removes (in every mode), a
receipt survives an owner and keeper both SIGKILLed, and a session-mode
teardown follows the tree's own PROCTREE_TREE marker, and only its own. Every
process a test starts is ended by pid and start time; the leak check catches
the rest.
"""

import json
import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest

import proctree
from proctree._containment import cgroup as _cgroup
from proctree._containment import cgroupworld as _cgroupworld
from proctree._containment import spawn as _spawn
from proctree._containment.evidence import marker as _marker
from proctree._containment.evidence import receipt
from support.spawnkit import ALL_MODES, DAEMONIZER, LINUX, alive, end_daemon, read_lines, wait_gone

ROOT = os.geteuid() == 0
TREE = "0123456789abcdef0123456789abcdef"


def fields(**kw):
    base = dict(
        owner=(100, 5),
        keeper=(200, 7),
        command=(201, 8),
        sid=200,
        pgid=201,
        cgroup=None,
        tag="web",
        mode="session",
        marker="100:5:web",
        tree=TREE,
    )
    base.update(kw)
    return base


def write_receipt(directory, **kw):
    """receipt.write of fields(**kw), encoded as the owner encodes them."""
    f = fields(**kw)
    return receipt.write(directory, receipt.encode(**f), f["keeper"])


@pytest.fixture
def rdir(tmp_path, monkeypatch):
    d = tmp_path / "receipts"
    monkeypatch.setenv(receipt.ENV_DIR, str(d))
    got = receipt.directory()
    assert got == str(d)
    return got


# ---------------------------------------------------------------------------
# The format


def test_write_read_remove(rdir):
    path = write_receipt(rdir)
    assert path == os.path.join(rdir, "200-7.json")
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
    assert os.path.getsize(path) < 1024
    assert json.load(open(path))["version"] == 1
    good, bad = receipt.read_all(rdir)
    assert bad == []
    (r,) = good
    assert r == receipt.Receipt(path=path, created=r.created, uid=os.geteuid(), **fields())
    assert abs(r.created - time.time()) < 60
    assert os.listdir(rdir) == ["200-7.json"]  # no temporary file left
    receipt.remove(path)
    receipt.remove(path)  # a missing file is fine
    assert receipt.read_all(rdir) == ([], [])


def test_read_all_defaults_to_the_directory(rdir):
    write_receipt(rdir, command=None, tag=None, marker="100:5")
    (r,), bad = receipt.read_all()
    assert bad == [] and r.command is None and r.tag is None


def test_a_rewrite_replaces_the_receipt_whole(rdir):
    write_receipt(rdir)
    write_receipt(rdir, pgid=333)
    (r,), _ = receipt.read_all(rdir)
    assert r.pgid == 333 and os.listdir(rdir) == ["200-7.json"]


def test_a_receipt_too_long_is_not_written(rdir):
    long_cgroup = "/sys/fs/cgroup/" + "x" * 4000
    with pytest.raises(ValueError, match="4096"):
        write_receipt(rdir, mode="cgroup", cgroup=long_cgroup)
    assert os.listdir(rdir) == []


@pytest.mark.parametrize(
    "kw",
    [
        dict(owner=(1, 5), marker="1:5:web"),
        dict(keeper=(200, -1)),
        dict(command=(0, 1)),
        dict(sid=1),
        dict(mode="auto"),
        dict(mode="cgroup"),  # cgroup mode without a cgroup
        dict(cgroup="/c/proctree-1-2/t"),  # a cgroup outside cgroup mode
        dict(tag="a b"),
        dict(marker="100:6:web"),  # not the owner's
        dict(tree="XYZ"),
    ],
)
def test_invalid_fields_are_refused_before_writing(rdir, kw):
    with pytest.raises(ValueError):
        write_receipt(rdir, **kw)
    assert os.listdir(rdir) == []


def _good_doc():
    doc = {"version": 1, **{k: list(v) if isinstance(v, tuple) else v for k, v in fields().items()}}
    doc["created"] = time.time()
    return doc


def _put(rdir, name, content, mode=0o600):
    path = os.path.join(rdir, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.write(fd, content if isinstance(content, bytes) else json.dumps(content).encode())
    os.close(fd)
    os.chmod(path, mode)
    return path


def _spoil(**changes):
    doc = _good_doc()
    for k, v in changes.items():
        if v is KeyError:
            del doc[k]
        else:
            doc[k] = v
    return doc


BAD_CONTENT = [
    ("truncated", json.dumps(_good_doc()).encode()[:60], "malformed"),
    ("not-json", b"\x00\xff garbage", "malformed"),
    ("a-list", b"[1, 2]", "not a JSON object"),
    ("version-2", _spoil(version=2), "version"),
    ("version-missing", _spoil(version=KeyError), "version"),
    ("version-true", _spoil(version=True), "version"),
    ("field-missing", _spoil(tree=KeyError), "missing"),
    ("sid-str", _spoil(sid="200"), "sid"),
    ("sid-bool", _spoil(sid=True), "sid"),
    ("pid-1", _spoil(keeper=[1, 7]), "keeper"),
    ("pid-0-command", _spoil(command=[0, 8]), "command"),
    ("negative-start", _spoil(owner=[100, -5]), "owner"),
    ("keeper-triple", _spoil(keeper=[200, 7, 9]), "keeper"),
    ("mode", _spoil(mode="jail"), "mode"),
    ("tag", _spoil(tag=["x"]), "tag"),
    ("marker", _spoil(marker=5), "marker"),
    ("tree", _spoil(tree="0123"), "tree"),
    ("created", _spoil(created="now"), "created"),
]


@pytest.mark.parametrize(("label", "content", "why"), BAD_CONTENT, ids=[b[0] for b in BAD_CONTENT])
def test_a_bad_receipt_is_reported_not_raised(rdir, label, content, why):
    path = _put(rdir, "200-7.json", content)
    good, bad = receipt.read_all(rdir)
    assert good == [] and len(bad) == 1
    assert bad[0][0] == path and why in bad[0][1], bad


def test_a_name_that_does_not_match_its_content(rdir):
    path = _put(rdir, "200-8.json", _good_doc())
    assert receipt.read_all(rdir) == ([], [(path, "its name does not match its keeper 200-7")])


def test_a_symlink_is_not_followed(rdir, tmp_path):
    target = _put(str(tmp_path), "elsewhere.json", _good_doc())
    os.symlink(target, os.path.join(rdir, "200-7.json"))
    good, bad = receipt.read_all(rdir)
    assert good == [] and bad == [(os.path.join(rdir, "200-7.json"), "a symlink")]


def test_not_a_regular_file(rdir):
    os.mkfifo(os.path.join(rdir, "200-7.json"))  # opened without blocking
    os.mkdir(os.path.join(rdir, "201-7.json"))
    good, bad = receipt.read_all(rdir)
    assert good == [] and sorted(why for _, why in bad) == ["not a regular file"] * 2


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_group_or_world_writable(rdir, mode):
    _put(rdir, "200-7.json", _good_doc(), mode)
    assert receipt.read_all(rdir)[1][0][1] == "group or world writable"


def test_over_4096_bytes(rdir):
    doc = _good_doc()
    doc["padding"] = "x" * 5000
    _put(rdir, "200-7.json", doc)
    assert receipt.read_all(rdir)[1][0][1] == "over 4096 bytes"


@pytest.mark.skipif(not ROOT, reason="chown to another uid needs root")
def test_owned_by_another_uid(rdir):
    path = _put(rdir, "200-7.json", _good_doc())
    os.chown(path, 65534, 65534)
    assert receipt.read_all(rdir) == ([], [(path, "owned by uid 65534")])


def test_temporary_files_young_skipped_old_reported(rdir):
    _put(rdir, ".tmp-200-7.json.0a0b0c0d", b'{"vers')
    old = _put(rdir, ".tmp-201-7.json.01020304", b'{"vers')
    past = time.time() - 60
    os.utime(old, (past, past))
    assert receipt.read_all(rdir) == ([], [(old, "a stale temporary file")])


def test_good_and_bad_together(rdir):
    write_receipt(rdir)
    _put(rdir, "300-1.json", b"{")
    good, bad = receipt.read_all(rdir)
    assert [r.keeper for r in good] == [(200, 7)] and [os.path.basename(p) for p, _ in bad] == ["300-1.json"]


# ---------------------------------------------------------------------------
# The directory


def test_directory_is_created_0700(tmp_path, monkeypatch):
    d = tmp_path / "new"
    monkeypatch.setenv(receipt.ENV_DIR, str(d))
    assert receipt.directory() == str(d)
    st = os.lstat(d)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700


def test_a_relative_override_is_refused(monkeypatch):
    monkeypatch.setenv(receipt.ENV_DIR, "relative/receipts")
    assert receipt.directory() is None


@pytest.mark.parametrize("mode", [0o750, 0o701, 0o777])
def test_a_directory_open_to_others_is_refused_and_left_alone(tmp_path, monkeypatch, mode):
    d = tmp_path / "open"
    d.mkdir()
    os.chmod(d, mode)
    monkeypatch.setenv(receipt.ENV_DIR, str(d))
    assert receipt.directory() is None
    assert stat.S_IMODE(os.lstat(d).st_mode) == mode  # never chmodded
    with pytest.raises(PermissionError):
        write_receipt(str(d))
    assert os.listdir(d) == []


def test_a_symlinked_directory_is_refused(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    monkeypatch.setenv(receipt.ENV_DIR, str(link))
    assert receipt.directory() is None


@pytest.mark.skipif(not ROOT, reason="chown to another uid needs root")
def test_a_directory_of_another_uid_is_refused_and_left_alone(tmp_path, monkeypatch):
    d = tmp_path / "theirs"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, 65534)
    monkeypatch.setenv(receipt.ENV_DIR, str(d))
    assert receipt.directory() is None
    assert os.lstat(d).st_uid == 65534


def test_xdg_runtime_dir_then_run_then_tempdir(tmp_path, monkeypatch):
    monkeypatch.delenv(receipt.ENV_DIR)
    monkeypatch.setattr(receipt, "RUN_ROOT", str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    assert receipt.directory() == str(xdg / "proctree")
    # Not ours, not absolute or missing: /run/user/<uid> (systemd's), root's /run/proctree, the temp directory.
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    last = (
        str(tmp_path / "run" / "proctree") if os.geteuid() == 0 else str(tmp_path / "tmp" / f"proctree-{os.geteuid()}")
    )
    for bad in ("relative/xdg", str(tmp_path / "missing")):
        monkeypatch.setenv("XDG_RUNTIME_DIR", bad)
        assert receipt.directory() == last
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert receipt.directory() == last
    (tmp_path / "run" / "user" / str(os.geteuid())).mkdir(parents=True, mode=0o700)
    assert receipt.directory() == str(tmp_path / "run" / "user" / str(os.geteuid()) / "proctree")


def _no_run(tmp_path, monkeypatch):
    """Receipts located as for a user with no runtime directory and no /run of its own: the temp directory."""
    import tempfile

    monkeypatch.delenv(receipt.ENV_DIR)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(receipt, "RUN_ROOT", str(tmp_path / "no-run"))  # missing: neither /run/user nor /run/proctree
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    os.chmod(tmp, 0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp / f"proctree-{os.geteuid()}"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory owned by another uid")
@pytest.mark.parametrize("how", ["directory", "symlink"])
def test_a_temp_location_taken_first_by_another_user_is_replaced_by_a_checked_one(tmp_path, monkeypatch, how):
    primary = _no_run(tmp_path, monkeypatch)
    if how == "directory":
        primary.mkdir(mode=0o700)
        os.chown(primary, 4242, 4242)  # another user made it first
    else:
        os.symlink(str(tmp_path), primary)
        os.lchown(primary, 4242, 4242)
    got = receipt.directory()
    assert got is not None and got != str(primary)
    assert os.path.basename(got).startswith(f"proctree-{os.geteuid()}.")
    st = os.lstat(got)
    assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
    # The same fallback is found again (spawn and reap agree), and the reaper says why.
    assert receipt.directory() == got
    path = write_receipt(got)
    good, bad = receipt.read_all()
    assert [r.path for r in good] == [path]
    assert len(bad) == 1 and bad[0][0] == str(primary)
    assert ("owned by uid 4242" if how == "directory" else "symlink") in bad[0][1]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory owned by another uid")
def test_another_users_look_alike_fallback_is_never_used(tmp_path, monkeypatch):
    primary = _no_run(tmp_path, monkeypatch)
    primary.mkdir(mode=0o700)
    os.chown(primary, 4242, 4242)
    fake = primary.parent / f"{primary.name}.aaaaaaaa"
    fake.mkdir(mode=0o700)
    os.chown(fake, 4242, 4242)
    got = receipt.directory()
    assert got is not None and got != str(fake)
    assert str(fake) not in {p for p, _ in receipt.read_all()[1]}


def test_no_location_at_all_is_said_and_spawn_warns_once(tmp_path, monkeypatch):
    import proctree
    from proctree._containment import launch as launch_module

    monkeypatch.setenv(receipt.ENV_DIR, "relative/not-allowed")
    assert receipt.directory() is None
    assert receipt.why_no_directory()
    monkeypatch.setattr(launch_module, "_receipts_warned", False)
    with pytest.warns(proctree.ReceiptWarning, match="no receipt directory"):
        t = proctree.spawn(["true"], contain="session")
    t.wait()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", proctree.ReceiptWarning)
        t2 = proctree.spawn(["true"], contain="session")  # once per process
        t2.wait()
    assert t.receipt is None and t2.receipt is None


# ---------------------------------------------------------------------------
# Receipts of real trees


def _waiting(trees, mode, **kw):
    """A tree whose command waits for a line on its stdin."""
    t = _spawn.spawn(["/bin/sh", "-c", "read x; exit 0"], contain=mode, stdin=subprocess.PIPE, grace=0.5, **kw)
    trees.append(t)
    return t


def _environ_once_execed(pid, timeout=10.0):
    """pid's environment block, read until it is not empty (a process may have none of its own yet just after clone)."""
    deadline = time.monotonic() + timeout
    while True:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
        if data or time.monotonic() > deadline:
            return data
        time.sleep(0.01)


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("end", ["terminate", "kill", "wait", "context"])
def test_every_tree_has_a_receipt_that_its_clean_end_removes(trees, mode, end, rdir):
    t = _waiting(trees, mode, tag="rcpt")
    assert t.receipt is not None and os.path.dirname(t.receipt) == rdir
    (r,), bad = receipt.read_all(rdir)
    assert bad == [] and r.path == t.receipt
    me = proctree.proc(os.getpid())
    keeper = proctree.proc(t.keeper_pid)
    cmd = proctree.proc(t.pid)
    assert r.owner == me.identity and r.keeper == keeper.identity and r.command == cmd.identity
    assert (r.sid, r.pgid) == (keeper.sid, cmd.pgid) == (t.keeper_pid, t.pid)
    assert (r.mode, r.cgroup, r.tag, r.marker, r.tree) == (t.mode, t.cgroup, "rcpt", t.marker, t.tree_id)
    assert _marker.parse_tree_id(t.tree_id) == t.tree_id
    if LINUX:
        assert _marker.tree_from_environ_block(_environ_once_execed(t.pid)) == t.tree_id
    if end == "wait":
        t.stdin.write(b"done\n")
        t.stdin.close()
        t.stdin = None
        assert t.wait(15) == 0
    elif end == "context":
        with t:
            pass
    else:
        assert getattr(t, end)().ok
    assert t.receipt is None
    assert os.listdir(rdir) == []


def test_no_receipt_where_the_directory_fails_its_checks(trees, tmp_path, monkeypatch):
    d = tmp_path / "open"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    monkeypatch.setenv(receipt.ENV_DIR, str(d))
    from proctree._containment import launch as launch_module

    monkeypatch.setattr(launch_module, "_receipts_warned", False)
    with pytest.warns(proctree.ReceiptWarning, match="mode 0755 is open to group or others") as caught:
        t = _waiting(trees, "session")
    assert caught[0].filename == __file__  # the warning points at the caller's line
    assert t.receipt is None and os.listdir(d) == []
    assert t.terminate().ok


def test_trees_have_distinct_tree_ids(trees, rdir):
    a, b = _waiting(trees, "session"), _waiting(trees, "session")
    assert a.marker == b.marker and a.tree_id != b.tree_id
    assert sorted(r.tree for r in receipt.read_all(rdir)[0]) == sorted([a.tree_id, b.tree_id])


OWNER = textwrap.dedent(r"""
    import os, sys, time
    import proctree
    w, mode = int(sys.argv[1]), sys.argv[2]
    t = proctree.spawn(["/bin/sh", "-c", "sleep 300"], contain=mode, grace=0.5)
    os.write(w, ("%d %d %s\n" % (t.keeper_pid, t.pid, t.receipt)).encode())
    time.sleep(300)
""")


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_receipt_outlives_an_owner_and_keeper_both_killed(mode, tmp_path, pipe):
    r, w = pipe
    d = tmp_path / "receipts"
    env = dict(os.environ, PROCTREE_RECEIPTS_DIR=str(d))
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(w), mode], pass_fds=(w,), env=env)
    os.close(w)
    started = [proctree.proc(owner.pid)]
    left = None
    try:
        buf = b""
        while b"\n" not in buf:
            chunk = os.read(r, 4096)
            assert chunk, "the owner exited before reporting"
            buf += chunk
        keeper_pid, cmd_pid, path = buf.split()
        keeper, cmd = proctree.proc(int(keeper_pid)), proctree.proc(int(cmd_pid))
        started += [keeper, cmd]
        # As if the host died at once: a running owner ends the tree when its keeper
        # dies, a live keeper when its owner dies. So: stop the owner, kill both.
        owner.send_signal(signal.SIGSTOP)
        os.kill(keeper.pid, 9)
        owner.kill()
        owner.wait(10)
        assert wait_gone([keeper.pid], 10)
        (left,), bad = receipt.read_all(str(d))
        assert bad == [] and left.path == path.decode()
        assert left.owner == started[0].identity and left.keeper == keeper.identity
        assert left.command == cmd.identity and left.mode == mode
        assert alive(cmd.pid, cmd.start_time), "the tree ended without its keeper?"
    finally:
        if owner.poll() is None:
            owner.kill()
        owner.wait(10)
        for p in started:
            if p.pid != owner.pid and alive(p.pid, p.start_time):
                proctree.terminate_tree(p.pid, grace=0)
        if left is not None and left.cgroup is not None and os.path.exists(left.cgroup):
            _cgroupworld.terminate(left.cgroup, 0)
            _cgroup.remove(left.cgroup)
            parent = os.path.dirname(left.cgroup)  # the dead owner's per-owner cgroup
            try:
                os.rmdir(parent)
            except OSError:
                pass


# ---------------------------------------------------------------------------
# Session mode follows its own PROCTREE_TREE marker

needs_environ = pytest.mark.skipif(not LINUX, reason="reads /proc/<pid>/environ")


def _daemonized(trees, pipe, **kw):
    r, w = pipe
    t = _spawn.spawn(
        [sys.executable, "-c", DAEMONIZER, str(w), "0", "sleep"], contain="session", pass_fds=(w,), grace=0.5, **kw
    )
    trees.append(t)
    os.close(w)
    return t, read_lines(r, 2)


@needs_environ
def test_terminate_ends_the_trees_own_daemon_only(trees):
    a_pipe, b_pipe = os.pipe(), os.pipe()
    a, pa = _daemonized(trees, a_pipe)
    b, pb = _daemonized(trees, b_pipe)
    for fd in (a_pipe[0], b_pipe[0]):
        os.close(fd)
    da, db = proctree.proc(pa["daemon"]), proctree.proc(pb["daemon"])
    try:
        assert a.marker == b.marker  # one owner: PROCTREE_OWNER cannot tell them apart
        rep = a.terminate()
        assert rep.ok and da.identity in {p.identity for p in rep.found}
        assert rep.extra["marked"] == [da.pid]
        assert wait_gone([da.pid], 5)
        assert alive(db.pid, db.start_time), "another tree's daemon was ended"
        assert db.identity not in {p.identity for p in rep.found}
        rep_b = b.terminate()
        assert db.identity in {p.identity for p in rep_b.found}
    finally:
        end_daemon(da.pid)
        end_daemon(db.pid)


@needs_environ
def test_a_process_older_than_the_keeper_is_never_taken(trees, monkeypatch, pipe):
    monkeypatch.setattr(_spawn, "_new_tree_id", lambda: TREE)
    env = dict(os.environ, PROCTREE_TREE=TREE)
    older = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env)
    try:
        old = proctree.proc(older.pid)
        t, pids = _daemonized(trees, pipe)
        assert t.tree_id == TREE
        assert proctree.proc(t.keeper_pid).start_time >= old.start_time
        rep = t.terminate()
        assert rep.ok and pids["daemon"] in {p.pid for p in rep.found}
        assert old.identity not in {p.identity for p in rep.found}
        assert older.poll() is None and alive(old.pid, old.start_time), "an older process was ended"
    finally:
        older.kill()
        older.wait()


SCRUBBER = textwrap.dedent(r"""
    import os, sys
    w = int(sys.argv[1])
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            env = {k: v for k, v in os.environ.items() if k != "PROCTREE_TREE"}
            os.write(w, b"daemon %d\n" % os.getpid())
            os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)"], env)
        os._exit(0)
    os.wait()
    os.write(w, b"cmd %d\n" % os.getpid())
    import time; time.sleep(300)
""")


@needs_environ
def test_a_daemon_that_scrubs_the_marker_and_leaves_the_session_escapes(trees, pipe):
    """The documented limit of session mode (docs/containment.md): nothing names such a daemon."""
    r, w = pipe
    t = _spawn.spawn([sys.executable, "-c", SCRUBBER, str(w)], contain="session", pass_fds=(w,), grace=0.5)
    trees.append(t)
    os.close(w)
    pids = read_lines(r, 2)
    daemon = proctree.proc(pids["daemon"])
    try:
        deadline = time.monotonic() + 10
        while proctree.proc(daemon.pid).name != "python3" and time.monotonic() < deadline:
            with open(f"/proc/{daemon.pid}/environ", "rb") as f:
                if _marker.tree_from_environ_block(f.read()) is None:
                    break  # exec'd without the marker
            time.sleep(0.01)
        rep = t.terminate()
        assert daemon.identity not in {p.identity for p in rep.found}
        assert alive(daemon.pid, daemon.start_time), "the limit moved: update docs/containment.md"
    finally:
        end_daemon(daemon.pid)


@needs_environ
def test_the_keeper_follows_the_marker_when_the_command_exits(trees, pipe):
    r, w = pipe
    t = _spawn.spawn(
        [sys.executable, "-c", DAEMONIZER, str(w), "0", "exit"], contain="session", pass_fds=(w,), grace=0.5
    )
    trees.append(t)
    os.close(w)
    pids = read_lines(r, 2)
    daemon = proctree.proc(pids["daemon"])
    try:
        assert t.wait(15) == 3
        assert wait_gone([daemon.pid], 10), "the keeper left its tree's marked daemon"
        assert t.receipt is None
    finally:
        end_daemon(daemon.pid)


@pytest.mark.parametrize("seed", range(4))
def test_parse_never_raises_on_random_or_mutated_receipts(seed):
    """Mutated good receipts, JSON of the wrong shapes and random bytes: a Receipt or a reason, nothing else."""
    rng = random.Random(seed)
    good = receipt.encode(
        owner=(1234, 5678),
        keeper=(2345, 6789),
        command=(3456, 7000),
        sid=2345,
        pgid=3456,
        cgroup=None,
        tag="t",
        mode="session",
        marker="1234:5678:t",
        tree="0" * 32,
        created=1.5,
    )
    name = receipt.file_name(2345, 6789)
    doc = json.loads(good)
    odd = [None, True, -1, 0, 1, 2**64, 1.5, "", "x" * 5000, [], [1], [1, 2, 3], {}, {"a": 1}, float("nan")]
    for _ in range(1500):
        r = rng.random()
        if r < 0.4:
            data = bytearray(good)
            for _ in range(rng.randint(1, 6)):
                op = rng.random()
                if op < 0.4 and data:
                    data[rng.randrange(len(data))] = rng.randrange(256)
                elif op < 0.7:
                    data.insert(rng.randrange(len(data) + 1), rng.randrange(256))
                elif data:
                    del data[rng.randrange(len(data)) :]
            data = bytes(data)
        elif r < 0.8:
            d = dict(doc)
            for _ in range(rng.randint(1, 3)):
                key = rng.choice([*d, "extra"])
                if rng.random() < 0.2:
                    d.pop(key, None)
                else:
                    d[key] = rng.choice(odd)
            data = json.dumps(d).encode()
        else:
            data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
        got = receipt.parse(data, os.path.join("/r", name))
        assert isinstance(got, (receipt.Receipt, str))
    deep = b"[" * 100000 + b"]" * 100000
    assert isinstance(receipt.parse(deep, name), str)


def test_the_temp_location_is_fixed_never_where_tempfile_moves_when_tmp_is_full(monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.setattr(tempfile, "gettempdir", lambda: "/var/tmp")  # what it answers while /tmp is full
    assert receipt._tempdir_location() == f"/tmp/proctree-{os.geteuid()}"
    monkeypatch.setenv("TMPDIR", "/somewhere")
    assert receipt._tempdir_location() == f"/somewhere/proctree-{os.geteuid()}"
