"""The keeper protocol (proctree/_containment/protocol.py), and a conformance suite for any keeper.

The first half is pure logic: the keeper's argv round trip and its rejection
(table-driven, plus a fuzz that must never crash the decoders with anything
but ProtocolError), and the status lines. The second half drives a real
keeper program through the protocol only, in every mode that works here:
PROCTREE_KEEPER (a command line) selects the program, by default the
package's keeper as spawn() starts it, so another build can be checked by the
same tests. Every process a test starts is recorded by pid and start time and
ended in a finally block; the suite's leak check catches the rest.
"""

import errno
import json
import os
import random
import signal
import subprocess
import sys

import pytest

import proctree
from proctree._containment import protocol
from proctree._containment.protocol import Done, Err, Exit, KeeperArgs, Ok, ProtocolError, Stopped, parse_status
from support.spawnkit import ALL_MODES, KeeperRun, alive, new_cgroup, read_lines, wait_gone

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/, where `support` lives
V = f"v{protocol.PROTOCOL_VERSION}"


def args(**kw):
    base = dict(
        status_fd=3,
        mode="subreaper",
        owner_pid=100,
        grace=2.0,
        keep_orphans=False,
        cgroup=None,
        restore_signals=True,
        exe=None,
        receipts=None,
        pty=False,
        argv=("sleep", "1"),
    )
    base.update(kw)
    return KeeperArgs(**base)


# ---------------------------------------------------------------------------
# argv: round trip and rejection


@pytest.mark.parametrize(
    "a",
    [
        args(),
        args(mode="session", grace=0.0, keep_orphans=True, restore_signals=False),
        args(mode="cgroup", cgroup="/sys/fs/cgroup/x y/proctree-1-2/t-1"),
        args(exe="/bin/bash", argv=("sh", "-c", "echo -- - ''")),
        args(argv=("-",), exe=None),
        args(argv=("--", "-", "", " a b ", "é"), exe="--"),
        args(exe="-"),  # a program named "-": the exe field has no placeholder
        args(exe=""),  # refused by the keeper at exec, as by Popen (PermissionError)
        args(grace=1e-3),
        args(grace=12345.678),
        args(receipts="/run/user/1000/proctree"),
        args(mode="session", receipts="/tmp/proctree-0", exe="/bin/sh"),
        args(pty=True),
        args(mode="cgroup", cgroup="/c/proctree-1-2/t", pty=True, argv=("vim",)),
        args(stop_signal=signal.SIGINT),
        args(stop_signal=signal.SIGUSR1, pty=True),
    ],
)
def test_argv_round_trip(a):
    argv = a.to_argv()
    assert argv[0] == V and all(isinstance(x, str) for x in argv)
    assert KeeperArgs.from_argv(argv) == a


GOOD = args().to_argv()


def _with(i, value):
    out = list(GOOD)
    out[i] = value
    return out


@pytest.mark.parametrize(
    "argv, why",
    [
        ([], "version"),
        (["1"] + GOOD[1:], "version"),
        (["v0"] + GOOD[1:], "version"),
        (["v1"] + GOOD[1:], "not the supported"),  # v1 had no receipts field
        (["v2"] + GOOD[1:], "not the supported"),  # v2 had no pty field
        (["v3"] + GOOD[1:], "not the supported"),  # v3 had no done line, and cgroup mode needed a go fd
        (["v4"] + GOOD[1:], "not the supported"),  # v4's exe field had "-" for argv[0]
        (["v5"] + GOOD[1:], "not the supported"),  # v5 had no stop signal field
        (["v6"] + GOOD[1:], "not the supported"),  # v6 had a go fd field
        (["v8"] + GOOD[1:], "not the supported"),
        (["v6"] + GOOD[1:2] + ["-"] + GOOD[2:], "not the supported"),  # a whole v6 line, go fd "-" included
        (GOOD[:12], "need"),  # no command after "--"
        (GOOD[:13], "need"),
        (_with(12, "++"), "need"),
        (_with(9, "relative/dir"), "receipts"),
        (GOOD[:10] + GOOD[11:], "need"),  # a v2 line: the pty field missing
        (GOOD[:11] + GOOD[12:], "need"),  # a v5 line: the stop signal field missing
        (GOOD[:2] + ["-"] + GOOD[2:], "need"),  # a v6 line's go fd under v7: one field too many
        (_with(11, "9"), "stop_signal"),  # SIGKILL cannot be a stop signal
        (_with(11, "19"), "stop_signal"),  # nor SIGSTOP
        (_with(11, "18"), "stop_signal"),  # nor SIGCONT
        (_with(11, "0"), "stop_signal"),
        (_with(11, "TERM"), "stop_signal"),
        (_with(11, "65"), "stop_signal"),
        (_with(10, "2"), "pty"),
        (_with(10, "-"), "pty"),
        (_with(10, "yes"), "pty"),
        (_with(1, "x"), "status_fd"),
        (_with(1, "-1"), "status_fd"),
        (_with(1, "+3"), "status_fd"),
        (_with(1, "٣"), "status_fd"),  # a digit, but not ASCII
        (_with(2, "jail"), "mode"),
        (_with(3, "0"), "owner_pid"),
        (_with(3, ""), "owner_pid"),
        (_with(4, "nan"), "grace"),
        (_with(4, "inf"), "grace"),
        (_with(4, "-1.0"), "grace"),
        (_with(4, "soon"), "grace"),
        (_with(5, "2"), "keep_orphans"),
        (_with(6, "/sys/fs/cgroup/x"), "cgroup"),  # a cgroup outside cgroup mode
        (_with(7, "yes"), "restore_signals"),
        (_with(2, "cgroup"), "cgroup"),  # cgroup mode without a cgroup
        (GOOD[:13] + ["a\0b"], "argv"),
    ],
)
def test_argv_rejected(argv, why):
    with pytest.raises(ProtocolError, match=why):
        KeeperArgs.from_argv(argv)


@pytest.mark.parametrize(
    "kw",
    [
        dict(status_fd=-1),
        dict(status_fd=True),
        dict(mode="auto"),
        dict(owner_pid=0),
        dict(grace=float("nan")),
        dict(grace=-1),
        dict(grace="1"),
        dict(keep_orphans=1),
        dict(restore_signals=None),
        dict(argv=()),
        dict(argv=["sleep"]),
        dict(argv=("a\0",)),
        dict(mode="session", cgroup="/c"),
        dict(receipts=""),
        dict(receipts="-"),
        dict(receipts="rel/dir"),
        dict(receipts="/a\0b"),
        dict(receipts=3),
        dict(pty=1),
        dict(pty=None),
    ],
)
def test_args_rejected_before_anything_runs(kw):
    with pytest.raises(ProtocolError):
        args(**kw)


def test_protocol_error_is_a_value_error():
    assert issubclass(ProtocolError, ValueError)


def test_argv_fuzz_never_crashes_the_decoder():
    rng = random.Random(1234)
    alphabet = GOOD + [
        "",
        "-",
        "--",
        "v1",
        "v2",
        "v3",
        "v4",
        "v5",
        "v6",
        "v7",
        "9",
        "15",
        "0",
        "1",
        "-1",
        "nan",
        "1e309",
        "cgroup",
        "session",
        "\0",
        "٣",
        "+1",
        " 1",
        "1_0",
        "0x10",
        "9" * 30,
    ]
    for _ in range(5000):
        n = rng.randrange(0, 16)
        if rng.random() < 0.5:  # mostly valid, one or two fields spoiled
            argv = list(GOOD) + [rng.choice(alphabet) for _ in range(rng.randrange(0, 3))]
            for _ in range(rng.randrange(1, 3)):
                argv[rng.randrange(len(argv))] = rng.choice(alphabet)
        else:
            argv = [rng.choice(alphabet) for _ in range(n)]
        try:
            got = KeeperArgs.from_argv(argv)
        except ProtocolError:
            continue
        assert KeeperArgs.from_argv(got.to_argv()) == got


# ---------------------------------------------------------------------------
# status lines


@pytest.mark.parametrize(
    "line, record",
    [
        ("ok 123 456", Ok(123, 456)),
        ("ok 1 0", Ok(1, 0)),
        ("err 2 exec", Err(errno.ENOENT, "exec")),
        ("err 0 owner", Err(0, "owner")),
        ("err 1 cgroup", Err(1, "cgroup")),
        ("err 22 subreaper", Err(22, "subreaper")),
        ("err 25 pty", Err(errno.ENOTTY, "pty")),
        ("stopped 20", Stopped(signal.SIGTSTP)),
        ("stopped 19", Stopped(signal.SIGSTOP)),
        (b"stopped 21", Stopped(signal.SIGTTIN)),
        ("exit 0", Exit(0)),
        ("exit 768", Exit(3 << 8)),
        ("exit 9", Exit(signal.SIGKILL)),
        (b"exit 15", Exit(15)),
        ("done 1", Done(True)),
        ("done 0", Done(False)),
        ("held", protocol.Held()),
        ("sweep", protocol.Sweep()),
    ],
)
def test_status_lines(line, record):
    assert parse_status(line) == record
    text = line.decode() if isinstance(line, bytes) else line
    formatted = {
        Ok: lambda r: protocol.ok_line(r.pid, r.start_time),
        Err: lambda r: protocol.err_line(r.errno, r.stage),
        Stopped: lambda r: protocol.stopped_line(r.signal),
        Exit: lambda r: protocol.exit_line(r.wait_status),
        Done: lambda r: protocol.done_line(r.clean),
        protocol.Held: lambda r: protocol.held_line(),
        protocol.Sweep: lambda r: protocol.sweep_line(),
    }[type(record)](record)
    assert formatted == text


@pytest.mark.parametrize(
    "line",
    [
        "",
        "ok",
        "ok 1",
        "ok 1 2 3",
        "ok 0 5",
        "ok -1 5",
        "ok x 5",
        "ok 1  2",
        " ok 1 2",
        "ok 1 2 ",
        "OK 1 2",
        "err 2",
        "err 2 exec x",
        "err x exec",
        "err 2 spawn",
        "err -2 exec",
        "exit",
        "exit x",
        "exit -1",
        "exit 65536",
        "exit 1 2",
        "exit ٣",
        "stopped",
        "stopped 0",
        "stopped 128",
        "stopped -20",
        "stopped 20 1",
        "stopped x",
        "done",
        "done 2",
        "done 1 1",
        "done true",
        "hello",
        b"\xff\xfe",
        "ok 1 2\n",
    ],
)
def test_malformed_status_lines(line):
    with pytest.raises(ProtocolError):
        parse_status(line)


@pytest.mark.parametrize(
    "bad",
    [
        lambda: protocol.ok_line(0, 1),
        lambda: protocol.err_line(2, "nope"),
        lambda: protocol.exit_line(-1),
        lambda: protocol.exit_line(1 << 20),
    ],
)
def test_the_keeper_cannot_write_a_malformed_line(bad):
    with pytest.raises(ProtocolError):
        bad()


def test_status_fuzz_never_crashes_the_decoder():
    rng = random.Random(99)
    words = ["ok", "err", "exit", "1", "0", "-1", "exec", "owner", "x", "", " ", "65535", "٣", "\n", "\0"]
    for _ in range(5000):
        line = " ".join(rng.choice(words) for _ in range(rng.randrange(0, 5)))
        data = line.encode() if rng.random() < 0.5 else bytes(rng.randrange(256) for _ in range(rng.randrange(8)))
        for value in (line, data):
            try:
                parse_status(value)
            except ProtocolError:
                pass


def test_forward_lists_the_forwarded_signals():
    assert set(protocol.FORWARD) == {
        signal.SIGHUP,
        signal.SIGINT,
        signal.SIGQUIT,
        signal.SIGTERM,
        signal.SIGUSR1,
        signal.SIGUSR2,
        signal.SIGWINCH,
    }


def test_a_keeper_refuses_a_malformed_command_line():
    from support.spawnkit import keeper_command

    p = subprocess.run(keeper_command() + ["v999", "3"], capture_output=True, timeout=30)
    assert p.returncode != 0 and b"version" in p.stderr


# ---------------------------------------------------------------------------
# Conformance: a keeper driven through the protocol, in each mode that works here.


@pytest.fixture
def keeper(request):
    """Start keepers with start(mode, argv, **kw); each is ended, reaped and its cgroup removed afterwards."""
    runs, procs = [], []

    def start(mode, argv, **kw):
        cgroup = new_cgroup(f"conf-{len(runs)}") if mode == "cgroup" else None
        try:
            run = KeeperRun(mode, argv, cgroup=cgroup, **kw)
        except BaseException:
            if cgroup is not None:
                from proctree._containment import cgroup as _cgroup

                _cgroup.remove(cgroup)
            raise
        runs.append(run)
        return run

    start.record = procs.append  # Proc records of members the test learned of, ended if still there
    yield start
    for run in runs:
        run.close()
    _end_recorded(procs)


def _end_recorded(procs):
    for p in procs:
        if alive(p.pid, p.start_time):
            try:
                proctree.terminate_tree(p.pid, grace=0)
            except (proctree.NoSuchProcess, ValueError):
                pass


def _orphaner(w, then):
    """sh that starts a background sleep (left behind if sh ends first), reports its pid on fd w, then `then`."""
    return ["/bin/sh", "-c", f'sleep 300 & echo "orphan $!" >/dev/fd/{w}; {then}']


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_command_runs_and_its_exit_status_is_reported(keeper, mode):
    k = keeper(mode, ["/bin/sh", "-c", "exit 7"])
    ok = k.status()
    assert isinstance(ok, Ok) and ok.pid > 0
    assert k.status() == Exit(7 << 8)
    assert k.popen.wait(10) == 7
    assert k.status() == Done(True)  # the keeper's last line: it ended the tree, nothing was left
    assert k.status() is None  # EOF: nothing after Done


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_killed_command_is_reported_with_its_signal(keeper, mode):
    k = keeper(mode, ["/bin/sh", "-c", "kill -KILL $$"])
    assert isinstance(k.status(), Ok)
    assert k.status() == Exit(signal.SIGKILL)
    assert k.popen.wait(10) == -signal.SIGKILL  # the keeper dies of it too, as a shell would


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_missing_command_is_err_enoent(keeper, mode):
    k = keeper(mode, ["/nonexistent/proctree-no-such-program"])
    assert k.status() == Err(errno.ENOENT, "exec")
    assert k.popen.wait(10) != 0


@pytest.mark.parametrize("mode", ALL_MODES)
def test_exe_replaces_the_program_but_not_argv0(keeper, mode, pipe):
    r, w = pipe
    k = keeper(mode, ["my-name", "-c", f'echo "name $0" >/dev/fd/{w}'], exe="/bin/sh", pass_fds=(w,))
    os.close(w)
    assert isinstance(k.status(), Ok)
    assert os.read(r, 100) == b"name my-name\n"
    assert k.status() == Exit(0)


FORWARD_CATCHER = """
import os, signal, sys
w = int(sys.argv[1])
def report(n, frame):
    os.write(w, b"sig %d\\n" % n)
    if n == signal.SIGTERM:
        os._exit(0)
for s in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2,
          signal.SIGWINCH):
    signal.signal(s, report)
os.write(w, b"ready %d\\n" % os.getpid())
while True:
    signal.pause()
"""


@pytest.mark.parametrize("mode", ALL_MODES)
def test_forwarded_signals_reach_the_command(keeper, mode, pipe):
    r, w = pipe
    k = keeper(mode, [sys.executable, "-c", FORWARD_CATCHER, str(w)], pass_fds=(w,))
    os.close(w)
    ok = k.status()
    assert isinstance(ok, Ok)
    assert read_lines(r, 1) == {"ready": ok.pid}
    # SIGTERM last: the catcher exits on it.
    for sig in sorted(protocol.FORWARD, key=lambda s: s == signal.SIGTERM):
        k.popen.send_signal(sig)  # our own unreaped child
        assert read_lines(r, 1) == {"sig": int(sig)}
    assert k.status() == Exit(0)
    assert k.popen.wait(10) == 0


@pytest.mark.parametrize("mode", ALL_MODES)
def test_what_the_command_leaves_is_ended_when_it_exits(keeper, mode, pipe):
    r, w = pipe
    k = keeper(mode, _orphaner(w, "exit 3"), pass_fds=(w,))
    os.close(w)
    assert isinstance(k.status(), Ok)
    orphan = read_lines(r, 1)["orphan"]
    try:
        keeper.record(proctree.proc(orphan))
    except proctree.NoSuchProcess:
        pass  # already ended by the keeper
    assert k.status() == Exit(3 << 8)
    assert k.popen.wait(15) == 3
    assert wait_gone([orphan], 10), "the keeper left the command's orphan running"


@pytest.mark.parametrize("mode", ALL_MODES)
def test_keep_orphans_leaves_them_running(keeper, mode, pipe, tmp_path):
    r, w = pipe
    gate_r, gate_w = os.pipe()
    try:
        k = keeper(
            mode,
            _orphaner(w, f"read x </dev/fd/{gate_r}; exit 0"),
            keep_orphans=True,
            pass_fds=(w, gate_r),
            receipts=str(tmp_path),
        )
        os.close(w)
        assert isinstance(k.status(), Ok)
        receipt = k.place_receipt()
        os.write(gate_w, b"go\n")
    finally:
        os.close(gate_r)
        os.close(gate_w)
    orphan = proctree.proc(read_lines(r, 1)["orphan"])
    keeper.record(orphan)
    assert k.status() == Exit(0)
    try:
        k.popen.wait(0.5)  # a keeper may exit (session mode holds nothing), but must not end the orphan
    except subprocess.TimeoutExpired:
        pass
    assert alive(orphan.pid, orphan.start_time), "keep_orphans: the orphan was ended"
    assert os.path.exists(receipt), "the receipt went while a member may still run"
    proctree.terminate_tree(orphan.pid, grace=0)
    assert k.popen.wait(15) == 0  # with its last member gone, the keeper ends
    if mode != "session":  # session mode: the keeper left before the orphan ended; the receipt stays for the reaper
        assert not os.path.exists(receipt), "the keeper outlived its last member but left its receipt"


@pytest.mark.parametrize("mode", ALL_MODES)
def test_the_keeper_removes_the_receipt_when_it_ends_the_tree(keeper, mode, pipe, tmp_path):
    r, w = pipe
    gate_r, gate_w = os.pipe()
    try:
        k = keeper(
            mode, _orphaner(w, f"read x </dev/fd/{gate_r}; exit 3"), pass_fds=(w, gate_r), receipts=str(tmp_path)
        )
        os.close(w)
        assert isinstance(k.status(), Ok)
        receipt = k.place_receipt()
        # Recorded while the gate holds the command: once it opens, the keeper may end the orphan at once.
        keeper.record(proctree.proc(read_lines(r, 1)["orphan"]))
        os.write(gate_w, b"go\n")
    finally:
        os.close(gate_r)
        os.close(gate_w)
    assert k.status() == Exit(3 << 8)
    assert k.popen.wait(15) == 3
    assert not os.path.exists(receipt), "the keeper ended its tree but left the receipt"


DAEMON_OF_TREE = r"""
import os, sys, time
w = int(sys.argv[1])
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, b"daemon %d\n" % os.getpid())
        os.write(ready_w, b"x")  # only now may the command exit: its exit starts the keeper's sweep
        time.sleep(300)
    os._exit(0)
os.close(ready_w)
os.wait()
os.read(ready_r, 1)
"""


def test_session_mode_follows_the_tree_marker(keeper, pipe):
    """A session-mode keeper ends a daemon that left its session but carries its PROCTREE_TREE, and only that."""
    from proctree._containment.evidence import marker

    r, w = pipe
    env = dict(os.environ, PROCTREE_TREE=marker.new_tree_id())
    k = keeper("session", [sys.executable, "-c", DAEMON_OF_TREE, str(w)], pass_fds=(w,), env=env)
    os.close(w)
    assert isinstance(k.status(), Ok)
    daemon = proctree.proc(read_lines(r, 1)["daemon"])
    keeper.record(daemon)
    assert daemon.sid != k.popen.pid  # out of the session: only the marker names it
    assert k.status() == Exit(0)
    assert k.popen.wait(15) == 0
    assert wait_gone([daemon.pid], 10), "the keeper left a daemon that carries its tree's marker"


DRIVER = """
import json, os, sys, time
sys.path.insert(0, {tests!r})
from support.spawnkit import KeeperRun
spec = json.loads(sys.argv[1])
k = KeeperRun(spec["mode"], spec["argv"], pass_fds=spec["fds"], cgroup=spec["cgroup"], grace=0.5,
              receipts=spec["receipts"])
rec = k.status()
k.place_receipt()
os.write(1, ("keeper %d\\ncmd %d\\n" % (k.popen.pid, rec.pid)).encode())
time.sleep(300)
"""


@pytest.mark.parametrize("mode", ALL_MODES)
def test_the_tree_ends_when_its_owner_dies(keeper, mode, pipe, tmp_path):
    """A keeper whose owner dies (SIGKILL: no goodbye) ends the whole tree, and itself, and removes the receipt."""
    r, w = pipe
    cgroup = new_cgroup("conf-owner") if mode == "cgroup" else None
    spec = {"mode": mode, "argv": _orphaner(w, "wait"), "fds": [w], "cgroup": cgroup, "receipts": str(tmp_path)}
    owner = subprocess.Popen(
        [sys.executable, "-c", DRIVER.format(tests=TESTS_DIR), json.dumps(spec)], pass_fds=(w,), stdout=subprocess.PIPE
    )
    os.close(w)
    recorded = []
    try:
        pids = read_lines(owner.stdout.fileno(), 2)
        pids.update(read_lines(r, 1))
        for name in ("keeper", "cmd", "orphan"):
            try:
                recorded.append(proctree.proc(pids[name]))
            except proctree.NoSuchProcess:
                pass
        assert len(recorded) == 3
        owner.kill()
        owner.wait(10)
        assert wait_gone([pids["cmd"], pids["orphan"]], 15), "the tree outlived its owner"
        assert wait_gone([pids["keeper"]], 15), "the keeper outlived its owner"
        assert os.listdir(tmp_path) == [], "the keeper ended its tree but left the receipt"
        if cgroup is not None:
            assert not os.path.exists(cgroup), "the keeper left its cgroup behind"
    finally:
        if owner.poll() is None:
            owner.kill()
        owner.wait(10)
        owner.stdout.close()
        _end_recorded(recorded)
        if cgroup is not None and os.path.exists(cgroup):
            from proctree._containment import cgroup as _cgroup
            from proctree._containment import cgroupworld as _cgroupworld

            _cgroupworld.terminate(cgroup, 0)
            _cgroup.remove(cgroup)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
