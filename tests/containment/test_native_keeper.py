"""The native keeper (csrc/keeper/), as the package ships it, beyond the protocol.

tests/containment/test_keeper_protocol.py holds every keeper to the protocol (with
pidfds where the kernel has them); this module runs that suite once more
without pidfds (PROCTREE_NO_PIDFD), and checks what the suite does not: argv
fuzzing (never a crash), the defects a keeper must not have (a stopped
command, ignored signals, an empty command), that it is the package's small
C program and not an interpreter, its resident memory and its start latency
(loose bounds; docs/benchmarks.md has the measured numbers).
"""

import errno
import os
import random
import select
import signal
import statistics
import struct
import subprocess
import sys
import time

import pytest

from proctree._containment import cgroup as _cgroup
from proctree._containment import launch as _launch
from proctree._containment import protocol
from proctree._containment.protocol import Done, Err, Exit, Ok
from support.spawnkit import (
    ALL_MODES,
    CGROUP_OK,
    DAEMONIZER,
    KeeperRun,
    alive,
    end_daemon,
    new_cgroup,
    read_lines,
    wait_gone,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS_DIR = os.path.join(ROOT, "tests")

pytestmark = pytest.mark.skipif(
    not (sys.platform.startswith("linux") or sys.platform == "darwin"), reason="the native keeper is POSIX-only"
)


def _elf_is_static(path):
    """True if path is an ELF executable without a program interpreter (statically linked)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit only; anything else: not known static
            return False
        (phoff,) = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    PT_INTERP = 3
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != PT_INTERP for i in range(phnum))


@pytest.fixture(scope="module")
def native():
    """(path of the package's keeper, True if it is statically linked)."""
    path = _launch._KEEPER
    assert os.access(path, os.X_OK), f"the package has no keeper program at {path}"
    return path, sys.platform.startswith("linux") and _elf_is_static(path)


@pytest.fixture
def use_native(native):
    return native[0]


# ---------------------------------------------------------------------------
# The conformance suite again, without pidfds


def test_the_keeper_passes_the_conformance_suite_without_pidfds(native):
    env = dict(os.environ, PROCTREE_NO_PIDFD="1")
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PROCTREE_KEEPER", None)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            os.path.join(TESTS_DIR, "containment", "test_keeper_protocol.py"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = "\n".join((p.stdout + p.stderr).splitlines()[-40:])
    assert p.returncode == 0, f"the keeper ({native[0]}) failed the conformance suite without pidfds:\n{tail}"
    assert " passed" in p.stdout


@pytest.mark.parametrize("problem", ["missing", "not executable"])
def test_a_broken_keeper_installation_is_a_clear_error_and_starts_nothing(monkeypatch, tmp_path, problem):
    import proctree

    path = tmp_path / "proctree-keeper"
    if problem == "not executable":
        path.write_bytes(b"")
        path.chmod(0o644)
    monkeypatch.setattr(_launch, "_KEEPER", str(path))
    for mode in ("auto", "session"):
        with pytest.raises(proctree.ContainmentUnavailable, match=f"keeper program {path} is {problem}") as info:
            proctree.spawn(["sleep", "300"], contain=mode)
        assert info.value.errno == (errno.ENOENT if problem == "missing" else errno.EACCES)


# ---------------------------------------------------------------------------
# Bad input: an err line or a clean refusal, never a crash


STATUS_FD = 50  # the status fd number every direct run passes (so that a command line can name it in advance)


def _run_keeper(path, argv, status="w", extra_fds=(), timeout=20):
    """(returncode, status lines, stderr) of one keeper run whose owner is this process.

    status: "w" puts the status pipe's write end at STATUS_FD, "full" the same
    pipe filled to the brim first (a owner that never reads), "r" its read end
    (a status fd the keeper cannot write), None nothing there.
    """
    r, w = os.pipe()
    fds = tuple(extra_fds)
    if status == "full":
        os.set_blocking(w, False)
        try:
            while os.write(w, b"x" * 65536):
                pass
        except BlockingIOError:
            pass
        os.set_blocking(w, True)
    try:
        if status is not None:
            os.dup2(r if status == "r" else w, STATUS_FD)
            fds += (STATUS_FD,)
        p = subprocess.Popen(
            [path, *argv], pass_fds=fds, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
    finally:
        if status is not None:
            os.close(STATUS_FD)
        os.close(w)
    try:
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise
        data = b""
        while chunk := os.read(r, 4096):
            data += chunk
    finally:
        os.close(r)
    if status == "full":
        data = data.lstrip(b"x")
    return p.returncode, [protocol.parse_status(x) for x in data.splitlines()], err.decode(errors="replace")


def _good(w=STATUS_FD, argv=("true",)):
    return protocol.KeeperArgs(
        status_fd=w,
        mode="subreaper" if sys.platform.startswith("linux") else "session",
        owner_pid=os.getpid(),
        grace=0.5,
        keep_orphans=False,
        cgroup=None,
        restore_signals=True,
        exe=None,
        receipts=None,
        argv=tuple(argv),
    ).to_argv()


def test_argv_fuzz_never_crashes_the_native_keeper(native):
    """Mutated and random command lines: a status line, or exit 2 with one line on stderr; never a signal."""
    rng = random.Random(4321)
    good = _good()
    alphabet = good + [
        "",
        "-",
        "--",
        "v1",
        "v2",
        "0",
        "1",
        "3",
        "-1",
        "nan",
        "1e309",
        "cgroup",
        "session",
        "٣",
        "+1",
        " 1",
        "1_0",
        "0x10",
        "9" * 30,
        "/tmp",
        "/sys/fs/cgroup/proctree-1-2/t",
        "é",
    ]
    outcomes = {"refused": 0, "err": 0, "ran": 0}
    for i in range(150):
        if i % 3:
            argv = list(good)
            for _ in range(rng.randrange(1, 3)):
                argv[rng.randrange(len(argv))] = rng.choice(alphabet)
        else:
            argv = [rng.choice(alphabet) for _ in range(rng.randrange(0, 16))]
        try:
            protocol.KeeperArgs.from_argv(argv)
            valid = True
        except protocol.ProtocolError:
            valid = False
        rc, lines, err = _run_keeper(native[0], argv)
        assert rc >= 0, f"the native keeper died of signal {-rc} on {argv!r}"
        # The same verdict as the codec: it refuses what from_argv refuses (and a
        # grace Python's float() reads but the C keeper does not, such as ' 1' or '1_0'; or a status fd
        # number that is valid but not open for writing).
        if not valid:
            assert rc == 2 and not lines, ("accepted what the protocol refuses", argv, rc, lines)
        elif rc == 2 and not lines:
            assert "grace" in err or "status fd" in err, ("refused what the protocol accepts", argv, err)
        if rc == 2 and not lines:
            assert err.startswith("proctree keeper: ") and err.count("\n") == 1, (argv, err)
            outcomes["refused"] += 1
        elif lines and isinstance(lines[0], Err):
            outcomes["err"] += 1
        else:
            assert lines and isinstance(lines[0], Ok), (argv, rc, lines, err)
            outcomes["ran"] += 1
    assert all(outcomes.values()), outcomes


def test_a_full_status_pipe_never_blocks_the_keeper(native):
    """An owner that never reads: the keeper still runs the command, ends its tree and exits with its status."""
    t = time.monotonic()
    rc, lines, _ = _run_keeper(native[0], _good(argv=("sh", "-c", "sleep 30 & exit 5")), status="full", timeout=30)
    assert rc == 5, (rc, lines)
    assert time.monotonic() - t < 15  # grace 0.5: the sleeper ended, nothing waited on the pipe


FLOOD = """
import os, sys, time
w = int(sys.argv[1])
for i in range(3000):
    try:
        pid = os.fork()
    except OSError:
        time.sleep(0.001)
        continue
    if pid == 0:
        os.write(w, b"%d\\n" % os.getpid())
        time.sleep(120)
        os._exit(0)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/status")
def test_a_fork_flood_is_ended_and_the_keeper_stays_small(native, runs, pipe):
    """A command that forks 3000 sleepers as fast as it can, then exits: the keeper ends them all, staying small."""
    r, w = pipe
    k = KeeperRun("subreaper", [sys.executable, "-c", FLOOD, str(w)], grace=0.5, pass_fds=(w,))
    runs.append(k)
    os.close(w)
    assert isinstance(k.status(), Ok)
    peak, data = 0, b""
    t = time.monotonic()
    while k.popen.poll() is None and time.monotonic() - t < 90:
        try:
            with open(f"/proc/{k.popen.pid}/status") as f:
                peak = max(peak, next(int(x.split()[1]) for x in f if x.startswith("RssAnon")))
        except (OSError, StopIteration):
            pass
        while select.select([r], [], [], 0.01)[0]:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
    pids = [int(x) for x in data.split()]
    try:
        assert k.popen.poll() is not None, "the keeper did not finish within 90 s"
        assert k.status() == Exit(0)
        assert len(pids) > 1000, len(pids)
        assert wait_gone(pids, 10), "sleepers of the flood outlived the keeper's teardown"
        assert peak < 2048, f"the keeper's own memory grew to {peak} kB"
    finally:
        for pid in pids:
            end_daemon(pid)


def test_a_status_fd_that_is_not_open_is_refused_on_stderr(native):
    rc, lines, err = _run_keeper(native[0], _good(99), status=None)
    assert rc == 2 and lines == [] and "status fd 99" in err


def test_a_read_only_status_fd_is_refused_on_stderr(native):
    rc, lines, err = _run_keeper(native[0], _good(), status="r")
    assert rc == 2 and "not open for writing" in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="cgroup mode is Linux-only")
def test_a_cgroup_that_is_not_ours_is_refused_before_anything_is_written(native, tmp_path):
    fake = tmp_path / "proctree-1-2" / "t"
    fake.mkdir(parents=True)
    (tmp_path / "cgroup.procs").write_text("")
    argv = protocol.KeeperArgs(
        status_fd=STATUS_FD, mode="cgroup", owner_pid=os.getpid(), grace=0.5, keep_orphans=False,
        cgroup=str(fake), restore_signals=True, exe=None, receipts=None, argv=("true",),
    ).to_argv()  # fmt: skip
    rc, lines, _ = _run_keeper(native[0], argv)
    assert lines == [Err(errno.EINVAL, "cgroup")] and rc != 0
    assert (tmp_path / "cgroup.procs").read_text() == "", "the keeper wrote to a cgroup.procs that is not ours"


def test_a_command_line_of_another_protocol_version_is_refused_on_stderr(native):
    """A v6 owner's line (it had a go fd field): exit status 2 and the versions named, before anything runs."""
    v7 = _good()
    v6 = ["v6", v7[1], "-", *v7[2:]]
    rc, lines, err = _run_keeper(native[0], v6)
    assert rc == protocol.REFUSED and lines == []
    assert f"keeper protocol version '6' is not the supported {protocol.PROTOCOL_VERSION}" in err


def test_a_keeper_that_refuses_its_command_line_is_a_clear_error_of_spawn(monkeypatch, tmp_path):
    """A keeper program of another build (another protocol version) exits 2: spawn() says what that means."""
    import proctree

    path = tmp_path / "proctree-keeper"
    path.write_text(
        "#!/bin/sh\necho \"proctree keeper: keeper protocol version '7' is not the supported 6\" >&2\nexit 2\n"
    )
    path.chmod(0o755)
    monkeypatch.setattr(_launch, "_KEEPER", str(path))
    with pytest.raises(subprocess.SubprocessError, match="refused its command line .* another build") as info:
        proctree.spawn(["sleep", "300"], contain="session", stderr=subprocess.DEVNULL)
    assert str(path) in str(info.value)


@pytest.mark.skipif(not CGROUP_OK, reason="no writable cgroup v2")
def test_an_owner_gone_before_the_keeper_watches_it_leaves_no_cgroup(native):
    """The owner made the tree's cgroup and died before its keeper could watch it: the keeper removes the cgroup.

    A parent that is not the owner named on the command line is what a dead
    owner looks like to the keeper (it was reparented away).
    """
    cgroup = new_cgroup("owner-gone")
    try:
        argv = protocol.KeeperArgs(
            status_fd=STATUS_FD, mode="cgroup", owner_pid=os.getpid() + 1, grace=0.5, keep_orphans=False,
            cgroup=cgroup, restore_signals=True, exe=None, receipts=None, argv=("sleep", "60"),
        ).to_argv()  # fmt: skip
        rc, lines, _ = _run_keeper(native[0], argv)
        assert lines == [Err(0, "owner")] and rc != 0
        assert not os.path.exists(cgroup), "the dead owner's tree cgroup was left behind"
    finally:
        if os.path.exists(cgroup):
            _cgroup.remove(cgroup)


# ---------------------------------------------------------------------------
# Defects a keeper must not have (issue 11)


@pytest.fixture
def runs():
    started = []
    yield started
    for k in started:
        k.close()


@pytest.mark.parametrize("argv", [[""], ["", "x"]])
def test_an_empty_command_is_eacces_as_popen(use_native, runs, argv):
    with pytest.raises(PermissionError):
        subprocess.Popen(argv)
    k = KeeperRun("session", argv)
    runs.append(k)
    assert k.status() == Err(errno.EACCES, "exec")
    assert k.popen.wait(10) != 0


def _sig_mask(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1], 16)
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/status")
def test_signals_the_owner_ignores_stay_ignored_and_are_still_forwarded(use_native, runs, pipe):
    """As Popen: SIGHUP ignored by the owner (nohup) is ignored by the command; restore_signals resets SIGPIPE."""
    r, w = pipe
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        k = KeeperRun("session", ["/bin/sh", "-c", f'echo "ready $$" >/dev/fd/{w}; exec sleep 300'], pass_fds=(w,))
    finally:
        signal.signal(signal.SIGHUP, old)
    runs.append(k)
    os.close(w)
    ok = k.status()
    assert isinstance(ok, Ok)
    assert os.read(r, 100).startswith(b"ready")
    ignored = _sig_mask(ok.pid, "SigIgn")
    assert ignored & (1 << (signal.SIGHUP - 1)), "an ignored SIGHUP was not inherited (Popen keeps it)"
    assert not ignored & (1 << (signal.SIGPIPE - 1)), "restore_signals did not reset SIGPIPE"
    assert _sig_mask(ok.pid, "SigBlk") == 0, "the keeper's blocked signals leaked into the command"
    k.popen.send_signal(signal.SIGHUP)  # forwarded, and ignored by the command
    k.popen.send_signal(signal.SIGTERM)
    assert k.status() == Exit(signal.SIGTERM)
    assert k.popen.wait(10) == -signal.SIGTERM


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stopped_command_ends_on_a_forwarded_signal(use_native, runs, sig):
    """TERM/INT/HUP are followed by SIGCONT: a command that stopped itself cannot wedge its runner."""
    k = KeeperRun("session", ["/bin/sh", "-c", "kill -STOP $$; sleep 300"])
    runs.append(k)
    ok = k.status()
    assert isinstance(ok, Ok)
    deadline = time.monotonic() + 10
    import proctree

    while proctree.proc(ok.pid).state != "T":
        assert time.monotonic() < deadline, "the command never stopped"
        time.sleep(0.01)
    k.popen.send_signal(sig)
    assert k.status(timeout=10) == Exit(sig)
    assert k.popen.wait(10) == -sig


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/status")
@pytest.mark.parametrize("restore", [True, False])
def test_restore_signals_decides_sigpipe_as_popen(native, pipe, restore):
    """restore_signals=1: SIGPIPE/SIGXFSZ default in the command; 0: ignored, as a Python owner's Popen leaves them."""
    r, w = pipe
    argv = protocol.KeeperArgs(
        status_fd=STATUS_FD, mode="session", owner_pid=os.getpid(), grace=0.5, keep_orphans=False,
        cgroup=None, restore_signals=restore, exe=None, receipts=None,
        argv=("/bin/sh", "-c", f"grep SigIgn /proc/$$/status >/dev/fd/{w}"),
    ).to_argv()  # fmt: skip
    rc, lines, _ = _run_keeper(native[0], argv, extra_fds=(w,))
    os.close(w)
    assert rc == 0 and lines[-2:] == [Exit(0), Done(True)]
    ignored = int(os.read(r, 200).split()[1], 16)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        assert bool(ignored & (1 << (sig - 1))) is not restore, (sig, hex(ignored))


def test_session_keep_orphans_keeps_the_keeper_while_an_orphan_runs(use_native, runs, pipe, tmp_path):
    """Issue 11's session-mode defect: the keeper (and the receipt) stay while what the command left still runs."""
    import proctree

    r, w = pipe
    k = KeeperRun(
        "session",
        ["/bin/sh", "-c", f'sleep 300 & echo "orphan $!" >/dev/fd/{w}; exit 0'],
        keep_orphans=True,
        pass_fds=(w,),
        receipts=str(tmp_path),
    )
    runs.append(k)
    os.close(w)
    assert isinstance(k.status(), Ok)
    receipt = k.place_receipt()
    orphan = proctree.proc(read_lines(r, 1)["orphan"])
    try:
        assert k.status() == Exit(0)
        with pytest.raises(subprocess.TimeoutExpired):
            k.popen.wait(0.6)  # the orphan runs: the keeper stays
        assert alive(orphan.pid, orphan.start_time) and os.path.exists(receipt)
    finally:
        proctree.terminate_tree(orphan.pid, grace=0)
    assert k.popen.wait(10) == 0  # its last member gone, the keeper ends
    assert not os.path.exists(receipt), "the tree ended with nothing left, but the receipt stayed"


# ---------------------------------------------------------------------------
# Cost: resident memory and start latency (loose bounds; benchmarks/ measures)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/exe")
@pytest.mark.parametrize("mode", ALL_MODES)
def test_spawn_starts_the_packaged_c_keeper_and_no_interpreter(native, mode):
    """No Python interpreter per contained tree: spawn()'s keeper is the package's program."""
    import proctree

    with proctree.spawn(["sleep", "300"], contain=mode) as tree:
        exe = os.path.realpath(f"/proc/{tree.keeper_pid}/exe")
        with open(f"/proc/{tree.keeper_pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0")[0].decode()
        assert exe == os.path.realpath(native[0]), exe
        assert argv0 == native[0]
        assert os.path.realpath(sys.executable) != exe
        tree.terminate(0.5)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/status")
def test_the_native_keeper_is_small(native, use_native, runs):
    k = KeeperRun("subreaper", ["sleep", "300"])
    runs.append(k)
    assert isinstance(k.status(), Ok)
    pid = k.popen.pid
    assert os.path.realpath(f"/proc/{pid}/exe") == os.path.realpath(native[0]), "not the native keeper"
    with open(f"/proc/{pid}/status") as f:
        st = {line.split(":")[0]: int(line.split()[1]) for line in f if line.startswith(("VmRSS", "RssAnon"))}
    print(f"native keeper: VmRSS {st['VmRSS']} kB, RssAnon {st['RssAnon']} kB, static={native[1]}")
    assert st["RssAnon"] < 512, st  # its own memory, whatever the libc maps
    if native[1]:
        assert st["VmRSS"] < 1536, st  # issue 11's bound: 1.5 MB


def test_the_native_keeper_starts_about_as_fast_as_popen(use_native):
    def popen_true():
        t = time.perf_counter()
        subprocess.Popen(["true"]).wait()
        return time.perf_counter() - t

    def keeper_true():
        t = time.perf_counter()
        k = KeeperRun("session", ["true"])
        try:
            assert isinstance(k.status(), Ok) and k.status() == Exit(0)
            assert k.popen.wait(10) == 0
        finally:
            k.close()
        return time.perf_counter() - t

    pairs = [(popen_true(), keeper_true()) for _ in range(15)]
    popen = statistics.median(p for p, _ in pairs)
    native = statistics.median(k for _, k in pairs)
    print(f"Popen(true) {popen * 1e3:.2f} ms, native keeper + true {native * 1e3:.2f} ms")
    assert native < popen + 0.05, (popen, native)  # a hang or an interpreter would exceed it; the target is +3 ms


def test_the_conformance_helpers_drive_the_native_keeper(use_native, runs, pipe):
    """Sanity: KeeperRun runs the package's keeper program (what the conformance suite tests is what spawn() runs)."""
    k = KeeperRun("session", ["sleep", "300"])
    runs.append(k)
    ok = k.status()
    assert isinstance(ok, Ok) and alive(ok.pid)
    with open(f"/proc/{k.popen.pid}/cmdline", "rb") if sys.platform.startswith("linux") else open(os.devnull) as f:
        cmdline = f.read()
    assert not sys.platform.startswith("linux") or cmdline.split(b"\0")[0] == use_native.encode()
    k.popen.send_signal(signal.SIGTERM)
    assert k.status() == Exit(signal.SIGTERM)
    assert wait_gone([ok.pid], 10)


# ---------------------------------------------------------------------------
# Owner death with an adversarial tree: a setsid daemon that ignores SIGTERM

OWNER = """
import json, os, sys, time
sys.path.insert(0, {tests!r})
from support.spawnkit import KeeperRun
spec = json.loads(sys.argv[1])
k = KeeperRun(spec["mode"], spec["argv"], pass_fds=spec["fds"], cgroup=spec["cgroup"], grace=0.5, env=spec["env"])
rec = k.status()
os.write(1, ("keeper %d\\n" % k.popen.pid).encode())
time.sleep(300)
"""


@pytest.mark.parametrize("mode", ALL_MODES)
def test_owner_sigkill_ends_a_term_ignoring_daemon_within_the_grace(use_native, mode, pipe):
    """Owner SIGKILL: the command, and a double-forked setsid daemon that ignores SIGTERM, gone within grace + 1.5 s."""
    import json

    import proctree
    from proctree._containment.evidence import marker

    r, w = pipe
    cgroup = new_cgroup("native-owner") if mode == "cgroup" else None
    env = dict(os.environ, PROCTREE_TREE=marker.new_tree_id())  # session mode follows it to the daemon
    spec = {
        "mode": mode,
        "argv": [sys.executable, "-c", DAEMONIZER, str(w), "1", "sleep"],
        "fds": [w],
        "cgroup": cgroup,
        "env": env,
    }
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER.format(tests=TESTS_DIR), json.dumps(spec)], pass_fds=(w,), stdout=subprocess.PIPE
    )
    os.close(w)
    recorded = []
    try:
        pids = read_lines(owner.stdout.fileno(), 1)
        pids.update(read_lines(r, 2))
        recorded = [proctree.proc(pids[n]) for n in ("keeper", "cmd", "daemon")]
        t0 = time.monotonic()
        owner.kill()
        owner.wait(10)
        assert wait_gone([pids["cmd"], pids["daemon"], pids["keeper"]], 10), "the tree outlived its owner"
        took = time.monotonic() - t0
        assert took < 0.5 + 1.5, f"the tree took {took:.2f} s to end after its owner's death (grace 0.5 s)"
        if cgroup is not None:
            assert not os.path.exists(cgroup), "the keeper left its cgroup behind"
    finally:
        if owner.poll() is None:
            owner.kill()
        owner.wait(10)
        owner.stdout.close()
        for p in recorded:
            if alive(p.pid, p.start_time):
                os.kill(p.pid, signal.SIGKILL)
        if cgroup is not None and os.path.exists(cgroup):
            from proctree._containment import cgroup as _cgroup
            from proctree._containment import cgroupworld as _cgroupworld

            _cgroupworld.terminate(cgroup, 0)
            _cgroup.remove(cgroup)
