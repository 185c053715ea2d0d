"""`proctree run` as a container init: as PID 1 of a fresh pid namespace, and not.

Measured against tini's and dumb-init's behaviour tests: orphans are reaped in
every containment mode, signals are forwarded, the starting directory is not
held. The PID 1 tests run under `unshare --pid --fork --mount-proc` (root
only): everything they start dies with the namespace.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import proctree
from support.spawnkit import CGROUP_OK, LINUX

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
UNSHARE = shutil.which("unshare")
NS_OK = LINUX and UNSHARE is not None and os.geteuid() == 0
needs_ns = pytest.mark.skipif(not NS_OK, reason="needs Linux, unshare(1) and root for a pid namespace")
ALL_MODES = [
    pytest.param("cgroup", marks=pytest.mark.skipif(not CGROUP_OK, reason="no writable cgroup v2 here")),
    pytest.param("subreaper", marks=pytest.mark.skipif(not LINUX, reason="Linux-only")),
    "session",
]

# CMD: 100 orphans (each started by a subshell that exits at once), each exiting at once; then up to 5 s for
# the zombies of the namespace to go (this shell's own children aside), their count printed, exit 3.
REAPING = r"""
i=0
while [ $i -lt 100 ]; do ( sh -c 'exit 0' & ); i=$((i+1)); done
n=0
while :; do
  z=0
  for f in /proc/[0-9]*/stat; do
    read -r pid name state ppid rest < "$f" 2>/dev/null || continue
    [ "$state" = Z ] && [ "$ppid" != $$ ] && z=$((z+1))
  done
  [ $z -eq 0 ] || [ $n -ge 50 ] && break
  sleep 0.1; n=$((n+1))
done
echo "zombies=$z"
exit 3
"""


def env():
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


def as_pid1(*argv):
    """`proctree run ARGV` as PID 1 of a new pid namespace (with its own /proc), killed when unshare(1) is."""
    return [UNSHARE, "--pid", "--fork", "--kill-child", "--mount-proc", sys.executable, "-m", "proctree", "run", *argv]


def run_cmd(*argv):
    return [sys.executable, "-m", "proctree", "run", *argv]


@pytest.fixture
def procs():
    """Processes a test starts: killed and reaped afterwards (a namespace's PID 1 takes its namespace with it)."""
    made = []
    yield made
    for p in made:
        if p.poll() is None:
            p.kill()
        p.wait()


@needs_ns
@pytest.mark.parametrize("mode", ALL_MODES)
def test_pid1_reaps_every_orphan(mode):
    r = subprocess.run(
        as_pid1("--contain", mode, "-q", "--", "sh", "-c", REAPING),
        capture_output=True,
        env=env(),
        cwd=ROOT,
        timeout=60,
    )
    assert (r.returncode, r.stdout.decode().strip()) == (3, "zombies=0"), r.stderr.decode()


def _children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(c) for c in f.read().split()]


@pytest.mark.skipif(not LINUX, reason="reads /proc/PID/cwd")
def test_the_starting_directory_is_not_held(procs, tmp_path):
    p = subprocess.Popen(
        run_cmd("--no-pty", "--", "sh", "-c", "echo $$; exec sleep 30"),
        stdout=subprocess.PIPE,
        env=env(),
        cwd=tmp_path,
    )
    procs.append(p)
    cmd = int(p.stdout.readline())
    # The runner, and on the Python path its keeper (the native runner is its own keeper: CMD is its child).
    holders = [p.pid, *(c for c in _children(p.pid) if c != cmd)]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and {os.readlink(f"/proc/{q}/cwd") for q in holders} != {"/"}:
        time.sleep(0.02)  # they leave it once CMD started: CMD may have printed before
    cwds = [os.readlink(f"/proc/{pid}/cwd") for pid in (*holders, cmd)]
    assert cwds == ["/"] * len(holders) + [str(tmp_path)]
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 128 + signal.SIGTERM


# CMD: catches the signals named in argv, printing each as it comes; then lets SIGPWR kill it (printing "armed").
CATCHER = r"""
import signal, sys
sigs = [int(a) for a in sys.argv[1:]]
signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
print("ready", flush=True)
for _ in sigs:
    print(int(signal.sigwait(sigs)), flush=True)
signal.signal(signal.SIGPWR, signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_SETMASK, [])
print("armed", flush=True)
signal.pause()
"""

# Signals that only the old 7 did not cover: 14 of them killed the runner itself (when not PID 1).
EXTRA = [
    signal.SIGPWR,
    signal.SIGALRM,
    signal.SIGVTALRM,
    signal.SIGPROF,
    signal.SIGXCPU,
    signal.SIGIO,
    signal.SIGURG,
    getattr(signal, "SIGSTKFLT", 16),  # named from Python 3.11 on; 16 on Linux
    signal.SIGUSR1,
    signal.SIGRTMIN,
    signal.SIGRTMIN + 5,
    signal.SIGRTMAX,
]


def _runner_pid(p, pid1):
    """The `proctree run` process: p itself, or as PID 1 unshare's one child (its pid as seen from here)."""
    if not pid1:
        return p.pid
    deadline = time.monotonic() + 10
    while not _children(p.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    (child,) = _children(p.pid)
    return child


@pytest.mark.skipif(not LINUX, reason="Linux signal numbers")
@pytest.mark.parametrize("pid1", [pytest.param(True, marks=needs_ns), False], ids=["pid1", "not-pid1"])
def test_every_forwardable_signal_reaches_cmd(procs, pid1):
    argv = ["--no-pty", "--", sys.executable, "-c", CATCHER, *(str(int(s)) for s in EXTRA)]
    p = subprocess.Popen(
        as_pid1(*argv) if pid1 else run_cmd(*argv), stdout=subprocess.PIPE, env=env(), cwd=ROOT, text=True
    )
    procs.append(p)
    runner = _runner_pid(p, pid1)
    assert p.stdout.readline() == "ready\n"
    for sig in EXTRA:
        os.kill(runner, sig)
        assert p.stdout.readline() == f"{int(sig)}\n"
    assert p.stdout.readline() == "armed\n"
    os.kill(runner, signal.SIGPWR)
    assert p.wait(timeout=30) == 128 + signal.SIGPWR  # killed by a signal N: 128+N, as tini


def _mask(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith(field + ":")).split()[1], 16)


@pytest.mark.skipif(not LINUX, reason="reads /proc/PID/status")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGPWR])
def test_a_signal_sent_while_starting_is_forwarded(procs, sig):
    p = subprocess.Popen(run_cmd("--no-pty", "--", "sleep", "30"), env=env(), cwd=ROOT)
    procs.append(p)
    deadline = time.monotonic() + 10
    while not _mask(p.pid, "SigBlk") & (1 << (sig - 1)):  # held from main()'s first line, long before CMD exists
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.001)
    os.kill(p.pid, sig)
    assert p.wait(timeout=30) == 128 + sig  # CMD got it: not lost, and not fatal to the runner


@pytest.mark.skipif(not LINUX, reason="reads /proc/PID/status")
def test_cmd_starts_with_no_signal_blocked():
    blocked = [signal.SIGTERM, signal.SIGUSR1, signal.SIGPWR, signal.SIGRTMIN]
    r = subprocess.run(
        run_cmd("--no-pty", "--", "grep", "^SigBlk:", "/proc/self/status"),
        preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, blocked),
        capture_output=True,
        env=env(),
        cwd=ROOT,
        timeout=30,
    )
    assert (r.returncode, r.stdout.split()) == (0, [b"SigBlk:", b"0" * 16]), r.stderr


@needs_ns
@pytest.mark.skipif(not CGROUP_OK, reason="no writable cgroup v2 here")
@pytest.mark.parametrize(
    "script, code",
    [("exit 0", 0), ("sleep 30 & (sleep 30 &); exit 5", 5), ("kill -TERM $$", 128 + signal.SIGTERM)],
    ids=["clean", "orphans-left", "killed"],
)
def test_pid1_leaves_no_cgroup_behind(script, code):
    from proctree._containment import cgroup

    mount = cgroup.find_mount()
    r = subprocess.run(
        as_pid1("--contain", "cgroup", "-q", "--", "sh", "-c", "grep ^0:: /proc/self/cgroup; " + script),
        capture_output=True,
        env=env(),
        cwd=ROOT,
        timeout=60,
    )
    assert r.returncode == code, r.stderr.decode()
    tree = r.stdout.decode().strip().split("::", 1)[1]  # /proctree-1-<start>-<pid ns>-<time ns>/<tree>
    assert os.path.basename(os.path.dirname(tree)).startswith("proctree-1-")
    assert not os.path.exists(mount + os.path.dirname(tree))  # the tree's cgroup and its parent are gone


@needs_ns
@pytest.mark.parametrize("mode", ALL_MODES)
def test_pid1_ends_what_cmd_left_and_returns_its_status(mode):
    # A background child, and an orphan (now the keeper's child as a subreaper, in every mode).
    r = subprocess.run(
        as_pid1("--contain", mode, "--", "sh", "-c", "sleep 30 & (sleep 30 &); exit 5"),
        capture_output=True,
        env=env(),
        cwd=ROOT,
        timeout=60,
    )
    assert r.returncode == 5, r.stderr.decode()
    assert "ended 2 processes CMD left running" in r.stderr.decode()  # sleep x2, or sh if one had not exec'd yet
