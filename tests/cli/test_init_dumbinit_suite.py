"""dumb-init's behaviour tests (Yelp/dumb-init, tests/*.py and tests/test-zombies) ported to `proctree run`.

Issue #22: proctree run replaces dumb-init as a container init, so dumb-init's own tests must pass against it,
as PID 1 of a fresh pid namespace ("pid1") and as a plain child ("child"). Every test names the original it
comes from. The init is started through support.initkit (PROCTREE_INIT points these at another runner;
tools/compare_inits.py runs them against the real dumb-init as a reference).

Option mapping: dumb-init's default, setsid mode (signal CMD's whole process group, TERM to what is left
when CMD exits), is proctree's default; the DUMB_INIT_DEBUG=0/1 variants are one test (proctree's log lines
are its own). Left out: everything about --rewrite/-r (no equivalent: test_proxies_signals_with_rewrite
but its empty-map case, test_default_rewrites_can_be_overriden_with_setsid_enabled,
test_ignored_signals_are_not_proxied, test_rewrite_errors); single-child mode (-c, DUMB_INIT_SETSID=0:
test_no_setsid_doesnt_signal_entire_group, test_processes_dont_receive_term_on_exit_if_no_setsid,
test_shell_background_support_without_setsid, the -c cases of test_fails_nonzero_with_bad_exec): leaving
what CMD started running is what proctree exists not to do; -V/--version and -v/--verbose (dumb-init's own
output format: test_version_message, test_verbose, test_verbose_and_single_child).
"""

import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import time

import pytest

from proctree.cli import _native
from support.initkit import (
    MODES,
    PLACEMENTS,
    PRINT_SIGNALS,
    REFERENCE,
    env,
    init_argv,
    init_cmd,
    kill_tree,
    pid_tree,
    placed,
    print_signals_ready,
    process_state,
    readline,
    runner_pid,
    sleep_until,
)
from support.spawnkit import LINUX

pytestmark = pytest.mark.skipif(not LINUX, reason="Linux: /proc, pid namespaces, signal numbers")

SUSPEND_SIGNALS = [signal.SIGTSTP, signal.SIGTTOU, signal.SIGTTIN]
NORMAL_SIGNALS = sorted(set(range(1, 32)) - {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD} - set(SUSPEND_SIGNALS))

# proctree/cli/run.py NOT_FORWARDED: the Python runner takes the synchronous signals as its own. The native one
# (proctree-init, which `proctree run --no-pty` hands over to) forwards them when another process sent them, as
# dumb-init does: only a real fault of its own is its own.
SYNCHRONOUS = {
    signal.SIGSEGV,
    signal.SIGBUS,
    signal.SIGILL,
    signal.SIGFPE,
    signal.SIGTRAP,
    signal.SIGSYS,
    signal.SIGABRT,
}
NATIVE = bool(os.environ.get("PROCTREE_INIT")) or (
    _native.runner_path() is not None and os.environ.get("PROCTREE_RUN_NATIVE", "1") != "0"
)
NOT_FORWARDED_WHY = {
    **{
        s: "the Python runner (no native one here): a fault signal is the runner's own, never forwarded, even one "
        "sent with kill()"
        for s in (() if NATIVE else SYNCHRONOUS)
    },
}
JOB_CONTROL = (
    "as PID 1 the init cannot stop itself (the kernel drops a stop signal its namespace's init does not handle, "
    "and SIGSTOP cannot be handled); CMD is stopped (dumb-init's reference run fails the same way)"
)


def _xfail(cond, reason):
    return [pytest.mark.xfail(strict=True, reason=reason)] if cond and not REFERENCE else []


@pytest.fixture
def started():
    """(Popen, placement) pairs a test starts: each killed (the namespace, or the init and its tree) and reaped."""
    made = []
    yield made
    for p, placement in made:
        kill_tree(p, placement)


def start(started, placement, cmd, contain=None, **kw):
    p = subprocess.Popen(init_cmd(placement, cmd, contain), env=env(), **kw)
    started.append((p, placement))
    return p


def start_print_signals(started, placement):
    """testing.print_signals(): the init running print_signals; (Popen, the init's pid, print_signals' pid as
    seen from inside the init's pid namespace: never signalled from here)."""
    p = start(started, placement, [sys.executable, "-c", PRINT_SIGNALS], stdout=subprocess.PIPE)
    inner = print_signals_ready(p.stdout)
    return p, runner_pid(p, placement), inner


def expect_line(p, value, timeout=15.0):
    assert readline(p.stdout, timeout) == f"{int(value)}\n".encode()


# -- tests/proxies_signals_test.py -------------------------------------------------------------------------


def _proxy_params():
    out = []
    for placement in PLACEMENTS:
        for s in NORMAL_SIGNALS:
            marks = [*placement.marks, *_xfail(s in NOT_FORWARDED_WHY, NOT_FORWARDED_WHY.get(s, ""))]
            out.append(pytest.param(placement.values[0], s, marks=marks, id=f"{placement.id}-{s}"))
    return out


@pytest.mark.parametrize("placement, signum", _proxy_params())
def test_proxies_signals(started, placement, signum):
    """proxies_signals_test.py test_proxies_signals: each regular signal (1..31 but KILL, STOP, CHLD and the
    suspend ones) sent to the init reaches print_signals (one init per signal, so a failure is per signal)."""
    p, init, _ = start_print_signals(started, placement)
    os.kill(init, signum)
    expect_line(p, signum, timeout=5.0)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_proxies_signals_in_sequence(started, placement):
    """proxies_signals_test.py test_proxies_signals_with_rewrite, its empty rewrite map: TERM, QUIT, CONT, INT
    arrive as exactly TERM, QUIT, CONT, INT."""
    p, init, _ = start_print_signals(started, placement)
    for s in (signal.SIGTERM, signal.SIGQUIT, signal.SIGCONT, signal.SIGINT):
        os.kill(init, s)
        expect_line(p, s, timeout=5.0)


# -- tests/shell_background_test.py ------------------------------------------------------------------------


def _stopped(pid):
    return process_state(pid) in ("stopped", "tracing stop")


@pytest.mark.parametrize(
    "placement", [pytest.param("pid1", marks=[*PLACEMENTS[0].marks, *_xfail(True, JOB_CONTROL)], id="pid1"), "child"]
)
@pytest.mark.parametrize("signum", SUSPEND_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_shell_background_support_setsid(started, placement, signum):
    """shell_background_test.py test_shell_background_support_setsid: TSTP, TTOU or TTIN sent to the init
    suspends it and CMD; SIGCONT wakes both (CMD prints 18)."""
    p, init, _ = start_print_signals(started, placement)
    cmd_pids = [q for q in pid_tree(init) if _cmdline(q).startswith(sys.executable)]
    assert len(cmd_pids) == 1
    (cmd,) = cmd_pids
    os.kill(init, signum)

    def both_stopped():
        assert _stopped(init) and _stopped(cmd), (process_state(init), process_state(cmd))

    sleep_until(both_stopped, timeout=5)
    os.kill(init, signal.SIGCONT)
    expect_line(p, signal.SIGCONT, timeout=5)
    assert not _stopped(init) and not _stopped(cmd)


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except FileNotFoundError:
        return ""


# -- tests/exit_status_test.py -----------------------------------------------------------------------------


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("exit_status", [0, 1, 2, 32, 64, 127, 254, 255])
def test_exit_status_regular_exit(placement, exit_status):
    """exit_status_test.py test_exit_status_regular_exit: the init exits with CMD's own exit status."""
    r = subprocess.run(init_cmd(placement, ["sh", "-c", f"exit {exit_status}"]), env=env(), timeout=60)
    assert r.returncode == exit_status


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGKILL], ids=lambda s: signal.Signals(s).name
)
def test_exit_status_terminated_by_signal(placement, sig):
    """exit_status_test.py test_exit_status_terminated_by_signal: CMD killed by signal N: the init exits 128+N."""
    cmd = [sys.executable, "-c", f"import os; os.kill(os.getpid(), {int(sig)})"]
    r = subprocess.run(init_cmd(placement, cmd), env=env(), timeout=60)
    assert r.returncode == 128 + sig


# -- tests/child_processes_test.py -------------------------------------------------------------------------


def _comms(pids):
    out = {}
    for q in pids:
        try:
            with open(f"/proc/{q}/comm") as f:
                out[q] = f.read().strip()
        except FileNotFoundError:
            pass
    return out


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("mode", MODES)
def test_setsid_signals_entire_group(started, placement, mode):
    """child_processes_test.py test_setsid_signals_entire_group (spawn_and_kill_pipeline): SIGTERM to the init
    ends every process of the pipelines `yes 'oh, hi' | tail & yes error | tail >&2`, not CMD alone."""
    p = start(
        started,
        placement,
        ["sh", "-c", "yes 'oh, hi' | tail & yes error | tail >&2"],
        contain=mode,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    init = runner_pid(p, placement)

    def four_living():
        names = sorted(n for n in _comms(pid_tree(init)).values() if n in ("yes", "tail"))
        assert names == ["tail", "tail", "yes", "yes"], names
        return [q for q, n in _comms(pid_tree(init)).items() if n in ("sh", "yes", "tail")]

    pids = sleep_until(four_living)
    os.kill(init, signal.SIGTERM)
    p.wait(timeout=30)
    sleep_until(lambda: _assert_none_alive(pids))


def _assert_none_alive(pids):
    living = [q for q in pids if os.path.exists(f"/proc/{q}") and process_state(q) != "zombie"]
    assert not living, living


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("mode", MODES)
def test_all_processes_receive_term_on_exit_if_setsid(started, placement, mode):
    """child_processes_test.py test_all_processes_receive_term_on_exit_if_setsid
    (spawn_process_which_dies_with_children): CMD starts print_signals in the background and exits 0; the init
    exits 0 and print_signals got SIGTERM."""
    p = start(
        started,
        placement,
        ["sh", "-c", f"{sys.executable} -c '{PRINT_SIGNALS}' & sleep 1"],
        contain=mode,
        stdout=subprocess.PIPE,
    )
    assert p.wait(timeout=60) == 0
    print_signals_ready(p.stdout)
    # proctree's teardown sends SIGCONT right after the stop signal (a stopped member must act on it), where
    # dumb-init sends SIGTERM alone. The keeper sends TERM first (a sigwaitinfo reader sees 15, then 18, 0.1 ms
    # apart), but print_signals' handlers run in Python: a CONT arriving while TERM's handler starts runs its
    # own handler first (CPython checks for signals on entry to the handler's code), so on a busy machine 18
    # can print before 15. Either order is one TERM then one CONT from the teardown.
    first = readline(p.stdout, 15.0)
    lines = {first} if first == b"15\n" else {first, readline(p.stdout, 15.0)}
    assert b"15\n" in lines and lines <= {b"15\n", b"18\n"}, lines


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("args", [["/doesnotexist"], ["--", "/doesnotexist"]], ids=["plain", "dashdash"])
def test_fails_nonzero_with_bad_exec(placement, args):
    """child_processes_test.py test_fails_nonzero_with_bad_exec: CMD cannot be executed: nonzero, naming it."""
    base = init_argv()
    base = base[:-1] if base[-1] == "--" else base
    r = subprocess.run(placed(placement, [*base, *args]), env=env(), capture_output=True, timeout=60)
    assert r.returncode != 0
    assert b"/doesnotexist" in r.stderr, r.stderr


# -- tests/cwd_test.py -------------------------------------------------------------------------------------


# Up to 10 s for the process above CMD to leave the directory (proctree's keeper does so once CMD started; dumb-init
# before), then both directories.
CWD_SCRIPT = r"""
i=0
while [ "$(readlink /proc/$PPID/cwd)" != / ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
readlink /proc/$PPID/cwd && readlink /proc/$$/cwd
"""


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_working_directories(placement, tmp_path):
    """cwd_test.py test_working_directories: CMD starts in the init's directory; the process above CMD (the
    init, here proctree's keeper) does not hold it. (CMD gives it a moment: proctree's keeper leaves the
    directory once CMD has started, so an immediate look races it.)"""
    r = subprocess.run(
        init_cmd(placement, ["sh", "-c", CWD_SCRIPT]),
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"/\n{tmp_path}\n".encode()


# -- tests/tty_test.py -------------------------------------------------------------------------------------


def ttyflags(fd):
    """tty_test.py ttyflags: no output munging, no echo."""
    attrs = termios.tcgetattr(fd)
    attrs[1] &= ~termios.OPOST
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSANOW, attrs)


def readall(fd, timeout=30):
    """tty_test.py readall: read until EOF (EIO on Linux), within a loose bound."""
    result = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not select.select([fd], [], [], 0.5)[0]:
            continue
        try:
            chunk = os.read(fd, 1 << 10)
        except OSError as e:
            if e.errno == 5:
                return result
            raise
        if not chunk:
            return result
        result += chunk
    raise AssertionError(f"no EOF: {result!r}")


def tty_fork(argv):
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.environ["PYTHONPATH"] = env()["PYTHONPATH"]
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    return pid, fd


def wait_bounded(pid, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the init did not exit")
        time.sleep(0.02)


# --no-pty: an init that leads its session and controls the terminal lets it go, and CMD's session takes it (as
# dumb-init); own-pty: CMD gets a pseudo-terminal of its own.


def _tty_params(xfail_own=None, xfail_no=None):
    out = []
    for placement in PLACEMENTS:
        for own in (True, False):
            why = xfail_own if own else xfail_no
            marks = [*placement.marks, *_xfail(why is not None, why)]
            pid = f"{'own-pty' if own else 'no-pty'}-{placement.id}"
            out.append(pytest.param(placement.values[0], own, marks=marks, id=pid))
    return out


@pytest.mark.parametrize("placement, own_pty", _tty_params())
def test_tty(placement, own_pty):
    """tty_test.py test_tty: under the init on a terminal, tac reads 1 2 3 and ^D^D and writes 3 2 1."""
    pid, fd = tty_fork(init_cmd(placement, ["tac"], pty=own_pty, terminal=True))
    try:
        ttyflags(fd)
        assert os.write(fd, b"1\n2\n3\n") == 6
        assert os.write(fd, b"\x04" * 2) == 2
        output = readall(fd)
        assert wait_bounded(pid) == 0
        assert output.replace(b"\r\n", b"\n") == b"3\n2\n1\n", output
    finally:
        os.close(fd)


@pytest.mark.parametrize("placement, own_pty", _tty_params())
def test_child_gets_controlling_tty_if_we_had_one(placement, own_pty):
    """tty_test.py test_child_gets_controlling_tty_if_we_had_one: `bash -m` under the init has job control."""
    pid, fd = tty_fork(init_cmd(placement, ["bash", "-m"], pty=own_pty, terminal=True))
    try:
        ttyflags(fd)
        os.write(fd, b'echo "flags are: [[$-]]"\n')
        os.write(fd, b"exit 0\n")
        output = readall(fd)
        assert wait_bounded(pid) == 0, output
        m = re.search(rb"flags are: \[\[([a-zA-Z]+)\]\]\r?\n", output)
        assert m, output
        assert b"m" in m.group(1)
    finally:
        os.close(fd)


@pytest.mark.parametrize("placement, own_pty", _tty_params())
def test_sighup_sigcont_ignored_if_was_session_leader(placement, own_pty):
    """tty_test.py test_sighup_sigcont_ignored_if_was_session_leader, on behaviour rather than dumb-init's debug
    lines: the init is a terminal's session leader; the tty hand-off's SIGHUP/SIGCONT must not end CMD (it
    lives to print "ready"), and a real SIGHUP sent later is forwarded (the init exits 129)."""
    argv = init_cmd(placement, ["sh", "-c", "sleep 1; echo ready; exec sleep 20"], pty=own_pty, terminal=True)
    pid, fd = tty_fork(argv)
    try:
        ttyflags(fd)
        out = b""
        deadline = time.monotonic() + 20
        while b"ready" not in out:
            assert time.monotonic() < deadline, out
            if select.select([fd], [], [], 0.5)[0]:
                out += os.read(fd, 1024)
        init = pid if placement == "child" else sleep_until(lambda: _one_child(pid))
        os.kill(init, signal.SIGHUP)
        try:
            readall(fd)
        except AssertionError:
            pass
        assert wait_bounded(pid) == 128 + signal.SIGHUP
    finally:
        os.close(fd)


def _one_child(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        (c,) = [int(x) for x in f.read().split()]
    return c


# -- tests/cli_test.py -------------------------------------------------------------------------------------


def _bare(placement, *args):
    base = init_argv()
    base = base[:-1] if base[-1] == "--" else base
    return subprocess.run(placed(placement, [*base, *args]), env=env(), capture_output=True, timeout=60)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_no_arguments_prints_usage(placement):
    """cli_test.py test_no_arguments_prints_usage: no CMD: nonzero, with a usage line."""
    r = _bare(placement)
    assert r.returncode != 0
    assert b"usage" in r.stderr.lower(), r.stderr


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_exits_invalid_with_invalid_args(placement):
    """cli_test.py test_exits_invalid_with_invalid_args: `--yolo /bin/true` fails (dumb-init 1, proctree's
    "bad input" 2), naming the option."""
    r = _bare(placement, "--yolo", "/bin/true")
    assert r.returncode == (1 if REFERENCE else 2)
    assert b"yolo" in r.stderr, r.stderr


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_message(placement, flag):
    """cli_test.py test_help_message: -h/--help says how to use it and exits 0."""
    r = _bare(placement, flag)
    assert r.returncode == 0
    assert b"usage" in (r.stdout + r.stderr).lower()


# -- tests/test-zombies ------------------------------------------------------------------------------------

# test-zombies, in Python: a bash that leaves a bash that exits at once (an orphan, then a zombie); after a
# second (5 s here) no zombie of this process group may remain (ps -A there: PID 1 of a container).
ZOMBIES = r"""
import os, sys, time
os.system("bash -euxc \"bash -euxc 'echo i am a zombie' &\" &")
me = os.getpgid(0)
for _ in range(50):
    time.sleep(0.1)
    z = []
    for p in os.listdir("/proc"):
        try:
            with open(f"/proc/{p}/stat", "rb") as f:  # bytes: any process's name may be any bytes
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == b"Z" and int(fields[2]) == me:
            z.append(p)
    if not z:
        sys.exit(0)
print("Expected no zombies, but instead there were", len(z))
sys.exit(1)
"""


def _zombie_params():
    out = []
    for placement in PLACEMENTS:
        for mode in MODES:
            m = mode.values[0] if hasattr(mode, "values") else mode
            marks = [*placement.marks, *(mode.marks if hasattr(mode, "marks") else [])]
            out.append(pytest.param(placement.values[0], m, marks=marks, id=f"{m}-{placement.id}"))
    return out


@pytest.mark.parametrize("placement, mode", _zombie_params())
def test_zombies(placement, mode):
    """tests/test-zombies (run there by dumb-init as PID 1): an orphan that exits is reaped at once (by proctree's
    runner, a subreaper in every mode, as PID 1 and not)."""
    r = subprocess.run(
        init_cmd(placement, [sys.executable, "-c", ZOMBIES], contain=mode),
        env=env(),
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 0, (r.stdout, r.stderr)
