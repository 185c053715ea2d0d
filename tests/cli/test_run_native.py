"""proctree-init, `proctree run` in native code: the runner itself, as PID 1 of a fresh pid namespace and not.

Measured against tini's and dumb-init's behaviour: every orphan reaped in every mode, every forwardable signal
forwarded, none lost while it starts, the caller's blocked mask not passed on, job control without a terminal,
tini's exit statuses, the starting directory not held, no cgroup left behind; and `proctree run`'s own promise:
a SIGKILL of the runner or of its keeper half still ends the tree. Also which command lines `proctree run` hands
over to it (cli/_native.py). The PID 1 tests run under `unshare --pid --fork --kill-child --mount-proc` (root
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
from proctree.cli import _native
from support.spawnkit import CGROUP_OK, LINUX

RUNNER = _native.runner_path()
UNSHARE = shutil.which("unshare")
NS_OK = LINUX and UNSHARE is not None and os.geteuid() == 0
pytestmark = pytest.mark.skipif(RUNNER is None, reason="proctree-init is not built here (Linux only)")
needs_ns = pytest.mark.skipif(not NS_OK, reason="needs Linux, unshare(1) and root for a pid namespace")
ALL_MODES = [
    pytest.param("cgroup", marks=pytest.mark.skipif(not CGROUP_OK, reason="no writable cgroup v2 here")),
    "subreaper",
    "session",
]
# Never forwarded: uncatchable, SIGCHLD; job control is tested on its own. The synchronous ones (SEGV, BUS, ILL,
# FPE, TRAP, SYS, ABRT) are forwarded when another process sent them (kill, sigqueue, tgkill), as dumb-init does.
NOT_FORWARDED = {"SIGKILL", "SIGSTOP", "SIGCHLD", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGCONT"}
SYNCHRONOUS = [
    signal.SIGSEGV,
    signal.SIGBUS,
    signal.SIGILL,
    signal.SIGFPE,
    signal.SIGTRAP,
    signal.SIGSYS,
    signal.SIGABRT,
]
_SKIP = {getattr(signal, n) for n in NOT_FORWARDED if hasattr(signal, n)} | {signal.SIGPWR}  # PWR: ends CMD
FORWARDABLE = sorted(s for s in signal.valid_signals() if s not in _SKIP)  # real-time ones included

# From tests/cli/test_run_init.py: 100 orphans exiting at once, then the namespace's zombies counted; exit 3.
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


def native(*argv):
    return [RUNNER, *argv]


def as_pid1(*argv):
    return [UNSHARE, "--pid", "--fork", "--kill-child", "--mount-proc", RUNNER, *argv]


@pytest.fixture
def procs():
    """Processes a test starts: killed and reaped afterwards (the runner's keeper half ends the tree then)."""
    made = []
    yield made
    for p in made:
        if p.poll() is None:
            p.kill()
        p.wait()


def _children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(c) for c in f.read().split()]


def _only_child(pid):
    deadline = time.monotonic() + 10
    while not _children(pid):
        assert time.monotonic() < deadline
        time.sleep(0.005)
    (child,) = _children(pid)
    return child


def _state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _alive(pid):
    try:
        return _state(pid) not in ("Z", "X")
    except FileNotFoundError:
        return False


def _wait_gone(pids, timeout):
    """True once none of pids runs; False after timeout seconds, a bound for hangs only (a loaded machine's
    teardown, its sweep of the table included, can take seconds)."""
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.parametrize(
    "argv, code, says",
    [
        (["--", "true"], 0, ""),
        (["--", "sh", "-c", "exit 7"], 7, ""),
        (["sh", "-c", "exit 7"], 7, ""),  # no "--": the first word that is not an option starts CMD
        (["--", "sh", "-c", "kill -TERM $$"], 128 + signal.SIGTERM, ""),  # 128+N, as tini
        (["--", "no-such-command-here"], 127, "command not found"),
        (["--", "/etc"], 126, "permission denied"),
        ([], 2, "no command given"),
        (["--grace", "soon", "--", "true"], 2, "--grace"),
        (["--contain", "jail", "--", "true"], 2, "--contain"),
        (["--stop-signal", "KILL", "--", "true"], 2, "--stop-signal"),
        (["--json", "--", "true"], 2, "--json"),
    ],
)
def test_exit_statuses(argv, code, says):
    r = subprocess.run(native(*argv), capture_output=True, timeout=30)
    assert r.returncode == code, r.stderr
    assert says.encode() in r.stderr


@needs_ns
@pytest.mark.parametrize("mode", ALL_MODES)
def test_pid1_reaps_every_orphan(mode):
    r = subprocess.run(as_pid1("--contain", mode, "-q", "--", "sh", "-c", REAPING), capture_output=True, timeout=60)
    assert (r.returncode, r.stdout.decode().strip()) == (3, "zombies=0"), r.stderr.decode()


@pytest.mark.parametrize("mode", ALL_MODES)
def test_not_pid1_reaps_every_orphan(mode):
    # Not PID 1: orphans come to the keeper half (a subreaper) in every mode but session, where they go to init.
    script = "for i in 1 2 3 4 5; do ( sh -c 'exit 0' & ); done; sleep 0.3; exit 4"
    r = subprocess.run(native("--contain", mode, "--", "sh", "-c", script), capture_output=True, timeout=60)
    assert r.returncode == 4, r.stderr.decode()


@pytest.mark.parametrize("pid1", [pytest.param(True, marks=needs_ns), False], ids=["pid1", "not-pid1"])
def test_every_forwardable_signal_reaches_cmd(procs, pid1):
    argv = ["--", sys.executable, "-c", CATCHER, *(str(int(s)) for s in FORWARDABLE)]
    p = subprocess.Popen(as_pid1(*argv) if pid1 else native(*argv), stdout=subprocess.PIPE, text=True)
    procs.append(p)
    runner = _only_child(p.pid) if pid1 else p.pid
    assert p.stdout.readline() == "ready\n"
    for sig in FORWARDABLE:
        os.kill(runner, sig)
        assert p.stdout.readline() == f"{int(sig)}\n"
    assert p.stdout.readline() == "armed\n"
    os.kill(runner, signal.SIGPWR)
    assert p.wait(timeout=30) == 128 + signal.SIGPWR


def _send_as_another_process(pid, sig, how):
    """sig to pid (a single-threaded process) by kill(), sigqueue() or tgkill(): si_code SI_USER, SI_QUEUE, SI_TKILL."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if how == "kill":
        os.kill(pid, sig)
        return
    if how == "sigqueue":
        rc = libc.sigqueue(ctypes.c_int(pid), ctypes.c_int(sig), ctypes.c_void_p(0))
    else:
        rc = libc.tgkill(ctypes.c_int(pid), ctypes.c_int(pid), ctypes.c_int(sig))
    assert rc == 0, os.strerror(ctypes.get_errno())


FAULT = r"""
import ctypes, sys
print("ready", flush=True)
sys.stdin.read()
ctypes.string_at(0)  # a real fault: SIGSEGV from the kernel, about CMD itself
"""


@pytest.mark.parametrize("pid1", [pytest.param(True, marks=needs_ns), False], ids=["pid1", "not-pid1"])
def test_a_synchronous_signal_sent_with_sigqueue_or_tgkill_is_forwarded(procs, pid1):
    argv = ["--", sys.executable, "-c", CATCHER, *(str(int(s)) for s in SYNCHRONOUS)]
    p = subprocess.Popen(as_pid1(*argv) if pid1 else native(*argv), stdout=subprocess.PIPE, text=True)
    procs.append(p)
    runner = _only_child(p.pid) if pid1 else p.pid
    assert p.stdout.readline() == "ready\n"
    for i, sig in enumerate(SYNCHRONOUS):
        _send_as_another_process(runner, sig, ("kill", "sigqueue", "tgkill")[i % 3])
        assert p.stdout.readline() == f"{int(sig)}\n"
    assert p.stdout.readline() == "armed\n"
    os.kill(runner, signal.SIGPWR)
    assert p.wait(timeout=30) == 128 + signal.SIGPWR


def test_cmds_own_fault_is_cmds_status():
    r = subprocess.run(
        native("--", sys.executable, "-c", FAULT), input="go\n", capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 128 + signal.SIGSEGV, r.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGPWR, signal.SIGRTMIN])
def test_a_signal_sent_from_the_start_is_not_lost(procs, sig):
    # Blocked by the caller (so pending from the moment the runner exists), sent before it ran a line.
    def pre():
        signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
        os.kill(os.getpid(), sig)  # pending when the runner's first line runs

    p = subprocess.Popen(native("--", "sleep", "30"), preexec_fn=pre)
    procs.append(p)
    assert p.wait(timeout=30) == 128 + sig  # CMD got it, once it existed


def test_a_signal_sent_at_once_is_not_lost(procs):
    p = subprocess.Popen(native("--", "sleep", "30"))
    procs.append(p)
    # Only the C library's start precedes main()'s first line, which blocks everything: sent then, long before
    # CMD exists (no child yet), the signal waits for it.
    deadline = time.monotonic() + 10
    while True:
        with open(f"/proc/{p.pid}/status") as f:
            if _mask(f.read(), "SigBlk") & (1 << (signal.SIGTERM - 1)):
                break
        assert time.monotonic() < deadline
    os.kill(p.pid, signal.SIGTERM)
    assert p.wait(timeout=30) == 128 + signal.SIGTERM


def _mask(status, field):
    line = next(x for x in status.splitlines() if x.startswith(field + ":"))
    return int(line.split()[1], 16)


def test_cmd_starts_with_nothing_blocked_and_what_was_ignored_ignored():
    blocked = [signal.SIGTERM, signal.SIGUSR1, signal.SIGPWR, signal.SIGRTMIN]

    def pre():
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)

    # What this process ignores is inherited and stays ignored, as SIGUSR2 does; but not SIGPIPE and SIGXFSZ,
    # which Python ignores for itself: CMD gets their default again. (An xdist worker on 3.13 ignores
    # signal 32 too.)
    with open("/proc/self/status") as f:
        inherited = _mask(f.read(), "SigIgn") & ~(1 << (signal.SIGPIPE - 1)) & ~(1 << (signal.SIGXFSZ - 1))
    r = subprocess.run(native("--", "cat", "/proc/self/status"), preexec_fn=pre, capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    status = r.stdout.decode()
    assert _mask(status, "SigBlk") == 0
    assert _mask(status, "SigIgn") == inherited | 1 << (signal.SIGUSR2 - 1)


def test_the_starting_directory_is_not_held(procs, tmp_path):
    p = subprocess.Popen(native("--", "sh", "-c", "echo $$; exec sleep 30"), stdout=subprocess.PIPE, cwd=tmp_path)
    procs.append(p)
    cmd = int(p.stdout.readline())
    keeper = _only_child(p.pid)
    assert _children(keeper) == [cmd]
    deadline = time.monotonic() + 10
    while {os.readlink(f"/proc/{q}/cwd") for q in (p.pid, keeper)} != {"/"}:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert os.readlink(f"/proc/{cmd}/cwd") == str(tmp_path)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 128 + signal.SIGTERM


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
        as_pid1("-q", "--", "sh", "-c", "grep ^0:: /proc/self/cgroup; " + script), capture_output=True, timeout=60
    )
    assert r.returncode == code, r.stderr.decode()
    tree = r.stdout.decode().strip().split("::", 1)[1]  # /proctree-1-<start>-<pid ns>-<time ns>/run
    assert os.path.basename(os.path.dirname(tree)).startswith("proctree-1-")
    assert not os.path.exists(mount + os.path.dirname(tree))


# CMD: ignores SIGTERM, and so does a daemon it leaves (its own session); their pids on the fd argv[1] names.
IGNORERS = r"""
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
w = int(sys.argv[1])
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        os.write(w, b"daemon %d\n" % os.getpid())
        time.sleep(60)
    os._exit(0)
os.write(w, b"cmd %d\n" % os.getpid())
time.sleep(60)
"""


def _start_ignorers(procs, *argv):
    r, w = os.pipe()
    p = subprocess.Popen(
        native(*argv, "--", sys.executable, "-c", IGNORERS, str(w)), pass_fds=(w,), stdin=subprocess.DEVNULL
    )
    procs.append(p)
    os.close(w)
    with os.fdopen(r) as f:
        named = dict(f.readline().split() for _ in range(2))  # in either order
    return p, [int(named["cmd"]), int(named["daemon"])]


@pytest.mark.parametrize("mode", ALL_MODES)
def test_sigkill_of_the_runner_ends_the_tree(procs, mode):
    p, pids = _start_ignorers(procs, "--contain", mode, "--grace", "0.3")
    keeper = _ppid(pids[0])  # CMD's parent; in session mode the daemon, an orphan, is the runner's child too
    p.kill()
    p.wait()
    assert _wait_gone([keeper, *pids], 30), [x for x in (keeper, *pids) if _alive(x)]


@pytest.mark.parametrize("mode", ALL_MODES)
def test_sigkill_of_the_keeper_half_ends_the_tree_and_says_so(procs, mode):
    p, pids = _start_ignorers(procs, "--contain", mode, "--grace", "0.3")
    os.kill(_ppid(pids[0]), signal.SIGKILL)
    assert p.wait(timeout=30) == 125
    assert _wait_gone(pids, 30)


def test_job_control_without_a_terminal(procs):
    p, pids = _start_ignorers(procs)
    os.kill(p.pid, signal.SIGTSTP)  # CMD's group stops, then the runner stops itself (as dumb-init)
    deadline = time.monotonic() + 10
    while _state(p.pid) != "T" or _state(pids[0]) != "T":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(p.pid, signal.SIGCONT)
    while _state(p.pid) == "T" or _state(pids[0]) == "T":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(p.pid, signal.SIGINT)  # forwarded to CMD's group: python's KeyboardInterrupt re-raises it
    assert p.wait(timeout=30) == 128 + signal.SIGINT


@pytest.mark.parametrize(
    "args, want",
    [
        (["--", "true"], ["--", "true"]),
        (["true", "-x"], ["--", "true", "-x"]),
        (
            ["--contain", "session", "--grace=1", "-q", "--no-pty", "--", "x"],
            ["--contain", "session", "--grace", "1", "-q", "--", "x"],
        ),
        (["--stop-signal", "INT", "-v", "--", "x", "--json"], ["--stop-signal", "2", "-v", "--", "x", "--json"]),
        (
            ["--stop-signal", " sigterm ", "--", "x"],
            ["--stop-signal", "15", "--", "x"],
        ),  # run.py's reading, as a number
        (["--stop-signal", "KILL", "--", "x"], None),  # run.py's refusal, in its words
        (["--stop-signal", "35", "--", "x"], None),  # a number the signal module does not name
        (["-p", "KILL", "--", "x"], ["-p", "9", "--", "x"]),
        (["-p", "STOP", "--", "x"], None),
        (["-p", "RTMIN+2", "--", "x"], None),
        (["--json", "--", "x"], None),  # the report as JSON: the Python command's
        (["--grace", "1e3", "--", "x"], None),  # not run.py's plain decimal: its refusal, in its words
        (["--grace=.5", "--", "x"], ["--grace", ".5", "--", "x"]),
        (["-q", "-v", "--", "x"], None),  # argparse's refusal
        (["--keep-orphans", "--", "x"], None),
        (["-g", "-p", "USR1", "--", "x"], ["-g", "-p", "10", "--", "x"]),
        (["--group", "--parent-death-signal=HUP", "x"], ["--group", "--parent-death-signal", "1", "--", "x"]),
        (["-pUSR1", "--", "x"], None),  # argparse's spelling: the Python command reads it
        (["-p"], None),
        (["--help"], None),
        (["--grace"], None),  # argparse words the error
        ([], None),
        (["--"], None),
        (["-q"], None),
    ],
)
def test_which_command_lines_are_handed_over(args, want, monkeypatch):
    monkeypatch.setattr(os, "isatty", lambda fd: False)
    assert _native.runner_argv(args) == want


def test_a_terminal_on_stdin_and_stdout_stays_with_the_pty_relay(monkeypatch):
    monkeypatch.setattr(os, "isatty", lambda fd: True)
    assert _native.runner_argv(["--", "vim"]) is None
    assert _native.runner_argv(["--no-pty", "--", "vim"]) == ["--", "vim"]


def test_proctree_run_hands_over():
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(proctree.__file__))}
    cmd = [sys.executable, "-m", "proctree", "run", "--", "sh", "-c", "readlink /proc/$PPID/exe"]
    r = subprocess.run(cmd, capture_output=True, env=env, timeout=30, stdin=subprocess.DEVNULL)
    assert os.path.basename(r.stdout.decode().strip()) == "proctree-init"  # its keeper half: the same program
    env["PROCTREE_RUN_NATIVE"] = "0"
    r = subprocess.run(cmd, capture_output=True, env=env, timeout=30, stdin=subprocess.DEVNULL)
    assert os.path.basename(r.stdout.decode().strip()) == "proctree-keeper"


# CMD: a parent and a child in CMD's process group; each prints its SIGALRMs ("parent", "child"); SIGTERM ends both.
GROUP = r"""
import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM, signal.SIGTERM])
who = "child" if os.fork() == 0 else "parent"
os.write(1, f"{who} ready\n".encode())  # one write each: the two never interleave in the pipe
while signal.sigwait([signal.SIGALRM, signal.SIGTERM]) == signal.SIGALRM:
    os.write(1, f"{who}\n".encode())
if who == "parent":
    os.wait()
"""


@pytest.mark.parametrize("group", [False, True, "env"], ids=["cmd-alone", "dash-g", "TINI_KILL_PROCESS_GROUP"])
def test_dash_g_sends_every_signal_to_cmds_group(procs, group):
    argv = (["-g"] if group is True else []) + ["--", sys.executable, "-c", GROUP]
    env = {k: v for k, v in os.environ.items() if k != "TINI_KILL_PROCESS_GROUP"}
    if group == "env":
        env["TINI_KILL_PROCESS_GROUP"] = "1"  # tini's -g
    p = subprocess.Popen(native(*argv), stdout=subprocess.PIPE, text=True, env=env)
    procs.append(p)
    assert sorted(p.stdout.readline() for _ in range(2)) == ["child ready\n", "parent ready\n"]
    os.kill(p.pid, signal.SIGALRM)  # not one of the group's by default: CMD alone, or its group with -g
    os.kill(p.pid, signal.SIGTERM)  # always the group's: both end
    assert p.wait(timeout=30) == 0
    assert sorted(p.stdout.read().split()) == (["child", "parent"] if group else ["parent"])


@pytest.mark.parametrize(
    "argv", [["--group=1"], ["-q", "-v"], ["--quiet", "--verbose"], ["--no-pty=1"], ["-p", "STOP"]]
)
def test_the_runner_refuses_what_proctree_run_refuses(argv):
    # Run directly; `proctree run` refuses each of these too (argparse), and never hands them over.
    r = subprocess.run(native(*argv, "--", "true"), capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and r.stderr.startswith("proctree-init: "), r


@pytest.mark.parametrize(
    "cmd, code",
    [
        (["no-such-command-here"], 127),
        (["/etc"], 126),
        (["sh", "-c", "sleep 30 & sleep 0.3; exit 3"], 3),
        # left running and ignoring TERM: "(2 needed SIGKILL)" after the grace, in both runners
        (["sh", "-c", "sh -c 'trap \"\" TERM; sleep 30' & sleep 0.3; exit 4"], 4),
    ],
)
def test_handed_over_it_speaks_as_proctree_run_in_the_python_commands_words(cmd, code):
    # The same command line through the native runner (handed over) and the Python runner: the same status and
    # the same words, each message named `proctree run` (the runner's argv[0] after the hand-over).
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(proctree.__file__))}
    argv = [sys.executable, "-m", "proctree", "run", "--no-pty", "--", *cmd]
    said = {}
    for native_on in ("1", "0"):
        r = subprocess.run(
            argv, capture_output=True, text=True, env={**env, "PROCTREE_RUN_NATIVE": native_on}, timeout=60
        )
        assert r.returncode == code, r.stderr
        said[native_on] = r.stderr
    assert said["1"] == said["0"] and said["1"].startswith("proctree run: "), said
    assert ("(2 needed SIGKILL)" in said["1"]) == (code == 4), said
