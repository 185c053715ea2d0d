"""proctree.environ(), proctree.cmdline() and the binding's env_scan on real processes.

Children are started with known environments and argv (raw bytes, duplicate
names, entries without '=', huge environments) and ended by the `children`
fixture; env_scan is compared with /proc/<pid>/environ read in Python for
every process on the machine this test can read (read only, nothing signalled).
"""

import errno
import os
import random
import resource
import select
import signal
import subprocess
import sys
import time

import pytest

import proctree
from proctree._table import binding
from support.leakcheck import MARKER
from support.treekit import run_as_nobody

LINUX = sys.platform.startswith("linux")
pytestmark = pytest.mark.skipif(not LINUX, reason="compared with /proc (the macOS paths run in tools/macos_sim)")

MARK = (MARKER.encode(), os.environ[MARKER].encode())  # the leak check finds what carries it

# A child that says "ready" on stdout and lives until its stdin closes.
PARK = "import sys; sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()"


class Children:
    """Processes a test starts: each ended (stdin closed, then SIGKILL) and reaped by the fixture."""

    def __init__(self):
        self.popens = []

    def start(self, argv, env):
        p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.popens.append(p)
        ready, _, _ = select.select([p.stdout], [], [], 30)
        assert ready and p.stdout.readline() == b"ready\n", "child did not start"
        return p.pid

    def start_raw(self, entries):
        """A child whose environment is exactly entries (bytes, any shape), via execve of `cat`."""
        script = (
            "import ctypes, sys\n"
            "e = [bytes.fromhex(h) for h in sys.argv[1].split(',') if h] + [None]\n"
            "envp = (ctypes.c_char_p * len(e))(*e)\n"
            "argv = (ctypes.c_char_p * 2)(b'cat', None)\n"
            "ctypes.CDLL(None).execve(b'/bin/cat', argv, envp)\n"
        )
        p = subprocess.Popen(
            [sys.executable, "-c", script, ",".join(x.hex() for x in entries)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
        )
        self.popens.append(p)
        deadline = time.monotonic() + 30
        while proctree.cmdline(p.pid) != ["cat"]:  # the exec is done once argv is cat's
            assert p.poll() is None and time.monotonic() < deadline, "execve did not happen"
            time.sleep(0.01)
        return p.pid

    def close(self):
        for p in self.popens:
            if p.stdin:
                p.stdin.close()
            if p.stdout:
                p.stdout.close()
        for p in self.popens:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)  # Popen signals only its own unreaped child
                p.wait(timeout=10)


@pytest.fixture
def children():
    c = Children()
    try:
        yield c
    finally:
        c.close()


def environ_file(pid):
    """/proc/<pid>/environ as Python reads it: bytes, "gone" or "denied" (b"" for a task without mm)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except FileNotFoundError:
        return "gone"
    except ProcessLookupError:
        return b"" if os.path.exists(f"/proc/{pid}") else "gone"
    except PermissionError:
        return "denied"


def expected_scan(data, key):
    """What env_scan must say for a process whose environ_file() is data."""
    if isinstance(data, str):
        return data
    cut = len(data) > binding.BLOCK_MAX  # then only a complete entry in the first BLOCK_MAX bytes counts
    entries = data[: binding.BLOCK_MAX].split(b"\0")
    for i, entry in enumerate(entries):
        if entry.startswith(key + b"="):
            value = entry[len(key) + 1 :]
            if len(value) >= binding.ENV_SLOT:
                return "too-long"
            return "unreadable" if cut and i == len(entries) - 1 else value
    return "unreadable" if cut else "absent"


def test_self():
    me = os.getpid()
    assert proctree.cmdline(me) == [os.fsdecode(a) for a in environ_file_like(f"/proc/{me}/cmdline")]
    block = binding.environ_block(me)
    assert block == environ_file(me)
    # The block is the one execve gave us: setenv() (the leak marker) does not rewrite it.
    first = {}
    for entry in block.split(b"\0"):
        if b"=" in entry:
            k, v = entry.split(b"=", 1)
            first.setdefault(os.fsdecode(k), os.fsdecode(v))
    assert proctree.environ(me) == first
    assert binding.env_scan("PATH", [me])[me] == expected_scan(block, b"PATH")


def environ_file_like(path):
    with open(path, "rb") as f:
        return f.read().split(b"\0")[:-1]


def test_known_child(children):
    env = {
        MARK[0]: MARK[1],
        b"FOO": b"1",
        b"FOOBAR": b"2",
        b"EQ": b"a=b=c",
        b"SUB": b"xxFOO=inside",
        b"RAW": b"\xff\xfe\x80",
        b"EMPTY": b"",
    }
    argv = [sys.executable.encode(), b"-c", PARK.encode(), b"", b"\xff raw", b"a=b"]
    pid = children.start(argv, env)
    got = proctree.environ(pid)
    assert got == {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()}
    assert os.fsencode(got["RAW"]) == b"\xff\xfe\x80"
    assert proctree.cmdline(pid) == [os.fsdecode(a) for a in argv]
    assert binding.cmdline_block(pid) == b"\0".join(argv) + b"\0"

    scan = lambda key: binding.env_scan(key, [pid])[pid]  # noqa: E731
    assert scan("FOO") == b"1"
    assert scan("FOOBAR") == b"2"
    assert scan("FO") == "absent"
    assert scan("EQ") == b"a=b=c"
    assert scan("SUB") == b"xxFOO=inside"
    assert scan("RAW") == b"\xff\xfe\x80"
    assert scan("EMPTY") == b""
    assert scan("inside") == "absent"
    assert scan(MARKER) == MARK[1]


def test_raw_environment(children):
    # Duplicates, entries without '=', an empty name: the first of a name wins, as in the C search.
    entries = [MARK[0] + b"=" + MARK[1], b"DUP=first", b"NOEQ", b"DUP=second", b"=empty-name", b"K=\xff"]
    pid = children.start_raw(entries)
    assert binding.environ_block(pid) == b"\0".join(entries) + b"\0"
    assert proctree.environ(pid) == {MARKER: MARK[1].decode(), "DUP": "first", "": "empty-name", "K": "\udcff"}
    assert binding.env_scan("DUP", [pid]) == {pid: b"first"}
    assert binding.env_scan("NOEQ", [pid]) == {pid: "absent"}


def test_stream_matches_block_on_real_environments(children):
    # The streaming search through a tiny scratch gives the in-memory search's answer on the same block.
    rng = random.Random(5)
    keys = [b"FOO", b"FOOBAR", b"F", b"K"]
    for _ in range(4):
        entries = [MARK[0] + b"=" + MARK[1]]
        for _ in range(rng.randrange(5, 40)):
            k = rng.choice(keys)
            entries.append(rng.choice((k, k[:-1], b"x" + k)) + rng.choice((b"=", b"", b"==")) + b"v" * rng.randrange(9))
        pid = children.start_raw(entries)
        block = binding.environ_block(pid)
        for key in keys:
            want_val = binding.ffi.new("char[]", 64)
            want = binding.lib.pt_block_find(block, len(block), key, len(key), want_val, 64)
            for scratchcap in (1, 2, 5, 64, 4096):
                val = binding.ffi.new("char[]", 64)
                scratch = binding.ffi.new("char[]", scratchcap)
                rc = binding.lib.pt_env_find(pid, key, len(key), val, 64, scratch, scratchcap)
                assert rc == want, (entries, key, scratchcap)
                if rc >= 0:
                    assert binding.ffi.string(val) == binding.ffi.string(want_val)


def test_large_environment(children):
    big = {b"V%02d" % i: b"x" * 10_000 for i in range(30)}  # 300 KB
    env = {MARK[0]: MARK[1], **big, b"LAST": b"end"}
    pid = children.start([sys.executable, "-c", PARK], env)
    assert len(binding.environ_block(pid)) > 300_000
    got = proctree.environ(pid)
    assert got["LAST"] == "end" and got["V29"] == "x" * 10_000
    assert binding.env_scan("LAST", [pid]) == {pid: b"end"}
    assert binding.env_scan("V00", [pid]) == {pid: "too-long"}


def test_environment_over_the_limit(children):
    # Over 1 MiB: the block is refused, never cut. env_scan answers exactly
    # when the variable is within the first 1 MiB (it is the first of its
    # name there) and says "unreadable" otherwise: it may lie beyond.
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    if soft != resource.RLIM_INFINITY and soft // 4 < 1_300_000:
        pytest.skip("the stack limit leaves execve less than 1.3 MB of strings")
    env = {MARK[0]: MARK[1], b"FIRST": b"here"}
    env.update({b"V%02d" % i: b"y" * 100_000 for i in range(11)})  # 1.1 MB, each under MAX_ARG_STRLEN
    env[b"LAST"] = b"end"
    pid = children.start([sys.executable, "-c", PARK], env)
    with pytest.raises(OSError) as exc:
        binding.environ_block(pid)
    assert exc.value.errno == errno.E2BIG
    with pytest.raises(OSError) as exc:
        proctree.environ(pid)
    assert exc.value.errno == errno.E2BIG
    assert binding.env_scan("FIRST", [pid]) == {pid: b"here"}
    assert binding.env_scan("LAST", [pid]) == {pid: "unreadable"}
    assert binding.env_scan("MISSING", [pid]) == {pid: "unreadable"}
    assert proctree.cmdline(pid)[-1] == PARK  # argv is small and readable


def test_zombie(kit):
    tree = kit.zombie_keeper()
    z = tree.role("zombie")
    assert proctree.proc(z).is_zombie
    assert proctree.environ(z) == {}
    assert proctree.cmdline(z) == []
    assert binding.env_scan(MARKER, [z]) == {z: "absent"}


def test_gone(children):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    children.popens.append(p)
    p.wait()
    with pytest.raises(proctree.NoSuchProcess):
        proctree.environ(p.pid)
    with pytest.raises(proctree.NoSuchProcess):
        proctree.cmdline(p.pid)
    assert binding.env_scan(MARKER, [p.pid]) == {p.pid: "gone"}


def test_kernel_thread():
    # kthreadd (pid 2 in the root namespace) has no mm: an empty environment, not "gone".
    try:
        if not binding.is_kernel_thread(2):
            pytest.skip("pid 2 is not a kernel thread here (a PID namespace)")
    except (proctree.NoSuchProcess, proctree.AccessDenied):
        pytest.skip("pid 2 is not visible here")
    assert proctree.environ(2) == {}
    assert proctree.cmdline(2) == []
    assert binding.env_scan("PATH", [2]) == {2: "absent"}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another uid")
def test_other_user_denied(children):
    pid = children.start([sys.executable, "-c", PARK], {MARK[0]: MARK[1], b"SECRET": b"1"})

    def read():
        out = []
        for fn in (proctree.environ, proctree.cmdline):
            try:
                fn(pid)
                out.append("read")
            except proctree.AccessDenied:
                out.append("denied")
            except Exception as exc:  # reported, not raised, from the forked reader
                out.append(type(exc).__name__)
        out.append(binding.env_scan("SECRET", [pid])[pid])
        return " ".join(map(str, out)).encode(), 0

    data, code = run_as_nobody(read)
    assert code == 0
    environ_word, cmdline_word, scan = data.decode().split()
    assert environ_word == "denied" and scan == "denied"
    assert cmdline_word == "read"  # /proc/<pid>/cmdline is world-readable on Linux


def test_bad_arguments():
    for fn in (proctree.environ, proctree.cmdline):
        for bad in (True, "1", 1.0, None):
            with pytest.raises(TypeError):
                fn(bad)
        for bad in (0, -1, 2**40):
            with pytest.raises(ValueError):
                fn(bad)
    for key in ("", "A=B", "A\0B"):
        with pytest.raises(ValueError):
            binding.env_scan(key, [os.getpid()])
    with pytest.raises(TypeError):
        binding.env_scan(b"A", [os.getpid()])
    assert binding.env_scan("PATH", []) == {}


def agrees_when_still(pid, key, tries=40):
    """True if, in one of a few rounds, env_scan agrees with /proc read just before or just after it.

    The machine's other processes change under the test: one in the middle of an exec reads as having no
    environment for an instant, and one in an exec loop (a shell running commands) changes between any two
    reads. A round counts if the scan agrees with either read around it: a real parser disagreement agrees
    with neither in every round. Rounds wait longer and longer (about a second in all), for a busy machine.
    """
    for attempt in range(tries):
        before = environ_file(pid)
        scanned = binding.env_scan(os.fsdecode(key), [pid])[pid]
        after = environ_file(pid)
        if "gone" in (before, after, scanned):
            return True  # exited during the comparison
        if scanned in (expected_scan(before, key), expected_scan(after, key)):
            return True
        time.sleep(min(0.001 * (attempt + 1), 0.05))
    return False


def test_scan_agrees_with_proc_for_every_process():
    pids = list(proctree.snapshot())
    for key in (MARKER.encode(), b"PATH", b"HOME"):
        scan = binding.env_scan(os.fsdecode(key), pids)
        assert set(scan) == set(pids)
        compared = 0
        for pid in pids:
            data = environ_file(pid)
            if data == "gone" or scan[pid] == "gone":
                continue  # exited during the comparison
            if scan[pid] != expected_scan(data, key):
                assert agrees_when_still(pid, key), (pid, key, scan[pid], expected_scan(data, key))
            compared += 1
        assert compared >= 1
