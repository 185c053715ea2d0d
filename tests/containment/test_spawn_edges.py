"""spawn()/Tree at their edges: cancellation and interruption at every stage,
Popen compatibility (shell/executable, TimeoutExpired, keyword defaults), and
the start-time identity check on the non-Linux path.

Every test starts real processes through spawn(); the keepers it starts are
recorded as their Popen objects are made (never guessed), trees are torn down
in fixtures, and the autouse leak check in conftest fails a test that leaves
anything behind (keepers included: they carry the test run's marker).
"""

import asyncio
import inspect
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

import proctree
from proctree._containment import keeperproc as _keeperproc
from proctree._containment import launch as _launch
from proctree._containment import spawn as _spawn
from proctree._containment import start as _start
from proctree._containment import stopflag as _stopflag
from proctree._containment.spawn import Tree, spawn, spawn_async
from proctree._containment.statuschannel import StatusChannel
from proctree._table import binding as _binding
from support.spawnkit import ALL_MODES, alive, cgroup_dirs, wait_gone
from support.stubborn import ignore_polite_signals_sh

# A command that survives the polite signals (and so does its sleep): only the kill ends it.
TERM_IGNORER = ["/bin/sh", "-c", f"{ignore_polite_signals_sh()}; sleep 60 & echo ready; wait"]
BASH = shutil.which("bash")


@pytest.fixture
def keepers(monkeypatch):
    """The Popen of every keeper spawn() starts during the test, recorded before its fork."""
    made = []
    real = subprocess.Popen._execute_child

    def execute_child(self, args, *a, **kw):
        if _launch._KEEPER in list(args):
            made.append(self)
        return real(self, args, *a, **kw)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", execute_child)
    return made


def assert_nothing_left(keepers, before_cgroups):
    """Every keeper started is already reaped by us (so nothing of its tree is waited for later), no cgroup left."""
    assert keepers, "the test did not reach the keeper's start"
    for k in keepers:
        assert k.returncode is not None, f"keeper {k.pid} still running (or never reaped)"
    assert cgroup_dirs() == before_cgroups


def started_command(keepers):
    """Pids of the commands the keepers started (their children), while they live."""
    out = []
    for k in keepers:
        if k.returncode is None:
            out += [p.pid for p in proctree.snapshot().values() if p.ppid == k.pid]
    return out


# ---------------------------------------------------------------------------
# Cancelling spawn_async


async def _cancel_spawn_after(delay, mode, trees):
    task = asyncio.ensure_future(spawn_async(["sleep", "60"], contain=mode, stdout=subprocess.PIPE))
    if delay is not None:
        await asyncio.sleep(delay)
    task.cancel()
    try:
        trees.append(await task)  # it finished before the cancel reached it: a normal tree
        return False
    except asyncio.CancelledError:
        return True


@pytest.mark.parametrize("delay", [None, 0, 0.001, 0.003, 0.01, 0.02, 0.04])
@pytest.mark.parametrize("mode", ["auto", "session"])
def test_cancelled_spawn_async_leaves_nothing(keepers, trees, mode, delay):
    before = cgroup_dirs()
    cancelled = asyncio.run(_cancel_spawn_after(delay, mode, trees))
    if cancelled and keepers:
        assert_nothing_left(keepers, before)
    if delay is None:
        assert cancelled and not keepers  # cancelled before it began: nothing was started


def _pause_in(monkeypatch, cls_or_mod, name, after):
    """Make cls_or_mod.name (called in spawn's worker thread) signal `entered` and wait for `go`.

    after: pause after the real call (True) or before it (False).
    """
    entered, go = threading.Event(), threading.Event()
    real = getattr(cls_or_mod, name)

    def paused(*a, **kw):
        if not after:
            entered.set()
            go.wait(10)
        out = real(*a, **kw)
        if after:
            entered.set()
            go.wait(10)
        return out

    monkeypatch.setattr(cls_or_mod, name, paused)
    return entered, go


async def _cancel_when(entered, go, mode, trees):
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(spawn_async(["sleep", "60"], contain=mode, stdout=subprocess.PIPE))
    assert await loop.run_in_executor(None, entered.wait, 10)
    task.cancel()
    await asyncio.sleep(0.01)  # the cancellation is delivered while the worker still pauses
    go.set()
    t0 = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        trees.append(await task)
    return time.monotonic() - t0


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("point", ["before-report", "during-report", "command-started", "spawn-returned"])
def test_spawn_async_cancelled_at_each_stage_leaves_nothing(keepers, trees, monkeypatch, mode, point):
    before = cgroup_dirs()
    if point == "before-report":  # the keeper is starting, the command not yet
        entered, go = _pause_in(monkeypatch, StatusChannel, "next_line", after=False)
    elif point == "during-report":  # the keeper said "ok": the command runs, spawn has not returned
        entered, go = _pause_in(monkeypatch, StatusChannel, "next_line", after=True)
    elif point == "command-started":  # the command's record was taken
        entered, go = _pause_in(monkeypatch, _start, "_took_root", after=True)
    else:  # spawn returned its Tree in the worker; the task never saw it
        entered, go = _pause_in(monkeypatch, _spawn, "_spawn", after=True)
    took = asyncio.run(_cancel_when(entered, go, mode, trees))
    assert took < 5.0
    assert_nothing_left(keepers, before)


def test_asyncio_run_shutdown_with_a_pending_spawn_leaves_nothing(keepers, monkeypatch):
    before = cgroup_dirs()
    cancelled = threading.Event()
    keeper_popen = _keeperproc._keeper_popen_class()  # built on the genuine subprocess.Popen, on first use
    real_set, real_fork = _stopflag._Stop.set, keeper_popen._execute_child

    def stop_set(self):
        cancelled.set()
        real_set(self)

    def fork_then_wait_for_the_cancel(self, *a, **kw):
        real_fork(self, *a, **kw)
        # The keeper runs; Popen returns only once asyncio.run has cancelled the spawn. Without
        # this hold a fast worker could finish the spawn first, and its Tree would just be dropped.
        assert cancelled.wait(30)

    monkeypatch.setattr(_stopflag._Stop, "set", stop_set)
    monkeypatch.setattr(keeper_popen, "_execute_child", fork_then_wait_for_the_cancel)

    async def main():
        asyncio.ensure_future(spawn_async(["sleep", "60"]))
        deadline = time.monotonic() + 10
        while not keepers and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        # main ends with the keeper starting: asyncio.run cancels the spawn

    asyncio.run(main())
    assert cancelled.is_set()
    assert_nothing_left(keepers, before)


# ---------------------------------------------------------------------------
# Cancelling Tree.terminate_async


def _term_ignoring_tree(trees, mode):
    t = spawn(TERM_IGNORER, contain=mode, stdout=subprocess.PIPE)
    trees.append(t)
    assert t.stdout.readline() == b"ready\n"
    return t, [p.pid for p in t.members()]


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("delay", [None, 0, 0.2])
def test_cancelled_terminate_async_kills_at_once(trees, mode, delay):
    t, pids = _term_ignoring_tree(trees, mode)
    assert len(pids) >= 2

    async def main():
        task = asyncio.ensure_future(t.terminate_async(grace=5))
        if delay is not None:
            await asyncio.sleep(delay)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    t0 = time.monotonic()
    asyncio.run(main())
    took = time.monotonic() - t0
    if delay is not None:  # (cancelled before it began, it never started: the fixture ends the tree)
        assert took < 2.5, f"cancelling took {took:.1f}s of the 5s grace"
        assert t._popen.returncode is not None  # the keeper, reaped by the Tree itself
        assert not any(alive(p) for p in pids)
        assert t.returncode == -9


@pytest.mark.parametrize("mode", ALL_MODES)
def test_asyncio_run_shutdown_does_not_wait_out_the_grace(trees, mode):
    t, pids = _term_ignoring_tree(trees, mode)

    async def main():
        asyncio.ensure_future(t.terminate_async(grace=5))
        await asyncio.sleep(0.2)  # main ends: asyncio.run cancels the teardown, then shuts down

    t0 = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - t0 < 2.5
    assert not any(alive(p) for p in pids)
    assert t._popen.returncode is not None


@pytest.mark.parametrize("mode", ALL_MODES)
def test_terminate_async_uncancelled_still_reports(trees, mode):
    t, pids = _term_ignoring_tree(trees, mode)
    rep = asyncio.run(t.terminate_async(grace=0.3))
    assert {p.pid for p in rep.killed} >= set(pids) - {t.keeper_pid}
    assert t._popen.returncode is not None and not any(alive(p) for p in pids)


# ---------------------------------------------------------------------------
# Interrupting the sync spawn (KeyboardInterrupt and the like)


class Interrupt(BaseException):
    """Stands for KeyboardInterrupt: a BaseException that is not an Exception."""


def _raise_in(monkeypatch, cls_or_mod, name, after):
    real = getattr(cls_or_mod, name)

    def interrupted(*a, **kw):
        if after:
            real(*a, **kw)
        raise Interrupt

    monkeypatch.setattr(cls_or_mod, name, interrupted)


POINTS = {
    # Popen returned from the fork but not to us (an interrupt while it waits for the exec).
    "popen-after-fork": lambda mp: _raise_in(mp, subprocess.Popen, "_execute_child", after=True),
    "tree-record": lambda mp: _raise_in(mp, Tree, "__init__", after=True),
    "before-report": lambda mp: _raise_in(mp, StatusChannel, "next_line", after=False),
    "after-report": lambda mp: _raise_in(mp, StatusChannel, "next_line", after=True),
    "command-record": lambda mp: _raise_in(mp, _start, "_took_root", after=True),
}


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("point", sorted(POINTS))
def test_interrupted_spawn_leaves_nothing(keepers, monkeypatch, mode, point):
    before = cgroup_dirs()
    POINTS[point](monkeypatch)
    with pytest.raises(Interrupt):
        spawn(["sleep", "60"], contain=mode, stdout=subprocess.PIPE)
    assert_nothing_left(keepers, before)


def test_keeper_stopped_before_the_sweep_cannot_start_the_command_behind_it(keepers, monkeypatch):
    # Interrupted while the keeper is still starting: whatever it is doing, it
    # must not start the command after the sweep below it.
    before = cgroup_dirs()
    for _ in range(5):
        _raise_in(monkeypatch, StatusChannel, "next_line", after=False)
        with pytest.raises(Interrupt):
            spawn(["sleep", "60"], contain="session")
        monkeypatch.undo()
    assert cgroup_dirs() == before  # and the leak check sees no command


# ---------------------------------------------------------------------------
# shell= and executable=, side by side with Popen


def both(args, **kw):
    """(Popen's stdout, spawn's stdout) for the same arguments."""
    expected = subprocess.run(args, stdout=subprocess.PIPE, timeout=10, **kw).stdout
    t = spawn(args, stdout=subprocess.PIPE, **kw)
    try:
        got = t.communicate(timeout=10)[0]
    finally:
        t.stdout.close()
    return expected, got


BASH_PROBE = 'echo "$0"; shopt -qo posix && echo posix-mode || echo bash-mode; [[ a == a ]] && echo double-brackets'


@pytest.mark.skipif(BASH is None, reason="no bash here")
@pytest.mark.parametrize("executable", ["bash", "bytes", "path"])
def test_shell_with_executable_runs_that_shell_as_popen(executable):
    exe = {"bash": BASH, "bytes": os.fsencode(BASH), "path": pathlib.Path(BASH)}[executable]
    expected, got = both(BASH_PROBE, shell=True, executable=exe)
    assert got == expected
    assert got.split(b"\n")[:2] == [os.fsencode(BASH), b"bash-mode"]


@pytest.mark.parametrize(
    "args, kw",
    [
        ("echo $0", {"shell": True}),
        (["echo $0 $1", "zero", "one"], {"shell": True}),
        (["my-name", "-c", 'echo "$0"'], {"executable": "/bin/sh"}),
        (["my-name", "-c", 'echo "$0"'], {"executable": b"/bin/sh"}),
        (["my-name", "-c", 'echo "$0"'], {"executable": pathlib.Path("/bin/sh")}),
    ],
)
def test_argv0_and_executable_match_popen(args, kw):
    expected, got = both(args, **kw)
    assert got == expected


@pytest.mark.parametrize("shell", [True, False])
def test_empty_executable_fails_as_popen(shell):
    # Popen tries "" in each PATH directory (EACCES on a directory), and so does the
    # keeper: the same OSError naming "", and nothing started.
    with pytest.raises(OSError) as popen_err:
        subprocess.Popen("true", shell=shell, executable="")
    with pytest.raises(OSError) as ours:
        spawn("true", shell=shell, executable="")
    assert ours.value.filename == popen_err.value.filename == ""
    assert (type(ours.value), ours.value.errno) == (type(popen_err.value), popen_err.value.errno)


def test_pathlike_args_with_shell_is_refused_as_popen():
    with pytest.raises(TypeError) as popen_err:
        subprocess.Popen(pathlib.Path("/bin/true"), shell=True)
    with pytest.raises(TypeError) as ours:
        spawn(pathlib.Path("/bin/true"), shell=True)
    assert str(ours.value) == str(popen_err.value)


@pytest.mark.parametrize("executable, exc", [(3, TypeError), ("/bin/s\0h", ValueError)])
def test_bad_executable_raises_what_popen_raises(executable, exc):
    with pytest.raises(exc):
        subprocess.Popen(["x"], executable=executable)
    with pytest.raises(exc):
        spawn(["x"], executable=executable)


# ---------------------------------------------------------------------------
# TimeoutExpired names the user's command

SLOW_TALKER = ["/bin/sh", "-c", "echo partial; exec sleep 60"]


def test_communicate_timeout_carries_the_users_args_like_popen(trees):
    p = subprocess.Popen(SLOW_TALKER, stdout=subprocess.PIPE)
    try:
        with pytest.raises(subprocess.TimeoutExpired) as popen_err:
            p.communicate(timeout=0.5)
    finally:
        p.kill()
        p.communicate()
    t = spawn(SLOW_TALKER, stdout=subprocess.PIPE)
    trees.append(t)
    with pytest.raises(subprocess.TimeoutExpired) as ours:
        t.communicate(timeout=0.5)
    for e in (ours.value, popen_err.value):
        assert (e.cmd, e.timeout, e.output) == (SLOW_TALKER, 0.5, b"partial\n")
    assert str(ours.value) == str(popen_err.value)


def test_wait_and_join_timeouts_carry_the_users_args(trees):
    args = ["/bin/sh", "-c", "sleep 60 & exit 0"]  # the command exits, its orphan stays
    t = spawn(args, keep_orphans=True)
    trees.append(t)
    assert t.wait(timeout=10) == 0
    with pytest.raises(subprocess.TimeoutExpired) as e:
        t.join(timeout=0.3)  # the keeper waits for the orphan
    assert e.value.cmd == args
    t2 = spawn(["sleep", "60"])
    trees.append(t2)
    with pytest.raises(subprocess.TimeoutExpired) as e:
        t2.wait(timeout=0.1)
    assert e.value.cmd == ["sleep", "60"]


# ---------------------------------------------------------------------------
# Popen keywords at their defaults pass; only containment-breaking values are refused


def test_every_popen_keyword_at_its_default_is_accepted(trees):
    defaults = {
        k: p.default
        for k, p in inspect.signature(subprocess.Popen).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    assert "preexec_fn" in defaults and "start_new_session" in defaults
    t = spawn(["true"], **defaults)
    trees.append(t)
    assert t.wait(timeout=10) == 0


@pytest.mark.parametrize(
    "kw",
    [
        {"start_new_session": False},
        {"start_new_session": True},
        {"process_group": None},
        {"process_group": 0},
        {"process_group": -1},
        {"preexec_fn": None},
        {"user": None},
        {"group": None},
        {"extra_groups": None},
        {"user": os.getuid()},
        {"group": os.getgid()},
    ],
)
def test_harmless_values_are_accepted_and_the_tree_stays_contained(trees, kw):
    t = spawn(["sleep", "60"], **kw)
    trees.append(t)
    cmd = proctree.proc(t.pid)
    assert (cmd.sid, cmd.pgid) == (t.keeper_pid, t.pid)  # in the keeper's session, leading its own group


def test_own_user_and_group_by_name_are_accepted(trees):
    import grp
    import pwd

    t = spawn(["true"], user=pwd.getpwuid(os.getuid()).pw_name, group=grp.getgrgid(os.getgid()).gr_name)
    trees.append(t)
    assert t.wait(timeout=10) == 0


@pytest.mark.parametrize(
    "kw, why",
    [
        ({"process_group": 1}, "out of the tree's session"),
        ({"preexec_fn": lambda: None}, "would run in the keeper"),
        ({"user": "nobody"}, "lose the right to contain"),
        ({"group": 65534}, "lose the right to contain"),
        ({"extra_groups": []}, "lose the right to contain"),
    ],
)
def test_containment_breaking_values_are_refused_with_the_reason(kw, why):
    before = cgroup_dirs()
    key = next(iter(kw))
    with pytest.raises(ValueError, match=f"{key}=.*{why}"):
        spawn(["sleep", "60"], **kw)
    assert cgroup_dirs() == before


# ---------------------------------------------------------------------------
# The start-time identity check holds off Linux too


@pytest.fixture
def off_linux(monkeypatch):
    """The owner side as on macOS: no Linux flag, process records read through the C core, not /proc."""
    monkeypatch.setattr(_spawn, "_LINUX", False)
    monkeypatch.setattr(_launch, "_LINUX", False)


def test_direct_signal_checks_the_start_time_off_linux(trees, off_linux):
    t = spawn(["sleep", "60"], contain="session")
    trees.append(t)
    real_root = t.parts.root
    t.parts.root = real_root._replace(start_time=real_root.start_time + 1)  # as if the pid were reused
    t.send_signal(9)
    time.sleep(0.2)
    assert alive(t.pid, real_root.start_time), "signalled a process whose start time does not match"
    t.parts.root = real_root
    t.send_signal(9)  # the right identity, read through the core: it goes
    assert t.wait(timeout=10) == -9


def test_command_record_checks_the_start_time_off_linux(trees, off_linux, monkeypatch):
    real_proc = _binding.proc

    def other_process(pid):  # the pid already belongs to another process
        p = real_proc(pid)
        return p._replace(start_time=p.start_time + 1, name="impostor")

    monkeypatch.setattr(_binding, "proc", other_process)
    t = spawn(["sleep", "60"], contain="session")
    trees.append(t)
    monkeypatch.setattr(_binding, "proc", real_proc)
    assert t.parts.root.name != "impostor"
    assert t.parts.root.start_time == proctree.proc(t.pid).start_time


# ---------------------------------------------------------------------------
# The Tree reaps its own keeper, through its own Popen


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("how", ["wait", "terminate", "kill", "terminate_async", "communicate", "join"])
def test_every_ending_path_reaps_the_keeper(trees, mode, how):
    t = spawn(["sleep", "60"] if how not in ("wait", "communicate", "join") else ["true"], contain=mode)
    trees.append(t)
    if how == "terminate_async":
        asyncio.run(t.terminate_async(grace=1))
    else:
        getattr(t, how)()
    assert t._popen.returncode is not None
    with pytest.raises(ChildProcessError):
        os.waitpid(t.keeper_pid, os.WNOHANG)  # reaped, by the Popen that owns it
    assert wait_gone([t.pid], 5)


def test_interrupted_session_spawn_ends_what_left_the_keepers_children(keepers, monkeypatch):
    # Session mode has no subreaper: an orphan of the command goes to init, and
    # only the keeper's session still holds it. An interrupt after the command
    # ran must end it too.
    before = cgroup_dirs()
    r, w = os.pipe()
    script = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    if os.fork() == 0:\n"
        "        os.write(int(sys.argv[1]), b'%d\\n' % os.getpid()); time.sleep(300)\n"
        "    os._exit(0)\n"
        "os.wait(); time.sleep(300)\n"
    )
    orphan = []
    real = _start._took_root

    def took_root_then_interrupted(self, *a):
        real(self, *a)
        orphan.append(int(os.read(r, 64)))  # it is in place, reparented away from the command
        raise Interrupt

    monkeypatch.setattr(_start, "_took_root", took_root_then_interrupted)
    try:
        with pytest.raises(Interrupt):
            spawn([sys.executable, "-c", script, str(w)], contain="session", pass_fds=(w,))
    finally:
        os.close(r)
        os.close(w)
    assert orphan and wait_gone(orphan, 2)
    assert_nothing_left(keepers, before)


def test_a_discarded_tree_whose_teardown_fails_still_leaves_nothing(monkeypatch):
    """A cancelled spawn_async's Tree is discarded; if its teardown raises, the keeper and the command still end."""
    before = cgroup_dirs()
    t = spawn(["sleep", "60"])
    cmd = t.pid

    def failing(self, grace, stop, sig=None):
        raise OSError(5, "teardown failed")

    monkeypatch.setattr(Tree, "_terminate", failing)
    with pytest.raises(OSError, match="teardown failed"):
        t._discard()
    assert t._popen.returncode is not None  # the keeper: killed and reaped
    assert wait_gone([cmd], 5)
    assert cgroup_dirs() == before


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_ctrl_c_inside_popens_fork_leaves_nothing(keepers, monkeypatch, mode):
    """SIGINT arriving after the keeper's fork, before Popen has stored its pid, is held back until it has.

    The fork is wrapped so that a real SIGINT is delivered to us the moment
    it returns: without the hold the KeyboardInterrupt would be raised there
    and the pid lost with it (the keeper and the command running on).
    """
    assert threading.current_thread() is threading.main_thread()
    import _posixsubprocess

    real = _posixsubprocess.fork_exec

    def fork_then_sigint(*a, **kw):
        pid = real(*a, **kw)
        os.kill(os.getpid(), signal.SIGINT)  # the handler runs at the next bytecode, here
        time.sleep(0.01)
        return pid

    monkeypatch.setattr(_posixsubprocess, "fork_exec", fork_then_sigint)
    if hasattr(subprocess, "_fork_exec"):  # 3.12+: imported by name
        monkeypatch.setattr(subprocess, "_fork_exec", fork_then_sigint)
    before = cgroup_dirs()
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            spawn(["sleep", "60"], contain=mode)
    finally:
        signal.signal(signal.SIGINT, old)
    assert_nothing_left(keepers, before)
    assert signal.getsignal(signal.SIGINT) is old


def test_held_back_handlers_run_in_order_and_are_restored():
    """_handlers_deferred records what arrives and hands each signal to its own handler afterwards."""
    got = []
    old_usr1 = signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
    old_usr2 = signal.signal(signal.SIGUSR2, lambda s, f: got.append(s))
    try:
        with _keeperproc._handlers_deferred():
            os.kill(os.getpid(), signal.SIGUSR2)
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.01)
            assert got == []
        assert got == [signal.SIGUSR2, signal.SIGUSR1]
        assert signal.getsignal(signal.SIGUSR1) is not None and signal.getsignal(signal.SIGUSR1) != old_usr1
    finally:
        signal.signal(signal.SIGUSR1, old_usr1)
        signal.signal(signal.SIGUSR2, old_usr2)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_an_interrupted_spawn_ends_a_setsid_daemon_the_command_started(keepers, monkeypatch, mode):
    """Interrupted once the command has double-forked a TERM-ignoring setsid daemon: found by its marker, ended."""
    from support.spawnkit import DAEMONIZER, read_lines

    before = cgroup_dirs()
    r, w = os.pipe()
    daemon = []
    real = _start._took_root

    def took_root_then_interrupted(self, *a):
        real(self, *a)
        daemon.append(read_lines(r, 2)["daemon"])  # it left the keeper's session and reparented away
        raise Interrupt

    monkeypatch.setattr(_start, "_took_root", took_root_then_interrupted)
    try:
        with pytest.raises(Interrupt):
            spawn([sys.executable, "-c", DAEMONIZER, str(w), "1", "sleep"], contain=mode, pass_fds=(w,))
    finally:
        os.close(r)
        os.close(w)
    assert daemon and wait_gone(daemon, 2)
    assert_nothing_left(keepers, before)
