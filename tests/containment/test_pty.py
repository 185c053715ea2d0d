"""Terminal programs: spawn(pty=True), the keeper's pty mode, and `proctree run`'s relay driven through tmux.

Real processes on real pseudo-terminals. The relay tests start a tmux server
on a private socket (killed in the fixture's finalizer: the suite's leak
check would catch its panes) running an outer bash that reads nothing but its prompt, type
`proctree run ...` into it, and read the screen with capture-pane, so the
outer terminal's state can be checked after the runner is gone. They skip
with the reason where tmux is missing.
"""

import asyncio
import errno
import fcntl
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

import proctree
from proctree._containment import launch as _launch
from proctree._containment.protocol import Done, Err, Exit, Ok, Stopped
from support.leakcheck import MARKER
from support.spawnkit import ALL_MODES, KeeperRun, alive, wait_gone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pty tests drive Linux /proc")


# ---------------------------------------------------------------------------
# The keeper program: the package's own, as spawn() runs it


@pytest.fixture
def native():
    """The package's keeper program (spawn() runs it; KeeperRun runs it when PROCTREE_KEEPER names it)."""
    path = _launch._KEEPER
    if not os.access(path, os.X_OK):
        pytest.skip(f"the keeper program {path} is not built (pip install -e . builds it)")
    return path


def proctree_cli():
    """The command line that starts the proctree CLI."""
    return [sys.executable, "-m", "proctree"]


def env():
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


# ---------------------------------------------------------------------------
# Helpers: reading a pty master, process states


def read_until(fd, pattern, timeout=15.0):
    """Bytes read from fd until pattern (bytes regex) matches what was read; AssertionError on timeout or EOF."""
    buf = b""
    deadline = time.monotonic() + timeout
    while not re.search(pattern, buf):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"timed out waiting for {pattern!r}; read {buf!r}")
        try:
            data = os.read(fd, 4096)
        except OSError as exc:
            if exc.errno != errno.EIO:
                raise
            data = b""
        if not data:
            raise AssertionError(f"EOF before {pattern!r}; read {buf!r}")
        buf += data
    return buf


def state(pid):
    """The one-letter state of pid from /proc (None if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except OSError:
        return None


def wait_state(pid, want, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if state(pid) in want:
            return True
        time.sleep(0.02)
    return state(pid) in want


def answer_the_probe(fd, line):
    """What TTY_PROBE printed, once it waits for its line; then line typed. Typed any earlier, the terminal's echo
    of it would land amid the probe's own lines."""
    out = read_until(fd, rb"size -?\d+ -?\d+\r?\n")
    os.write(fd, line)
    return out + read_until(fd, rb"read " + re.escape(line.strip()))


def poll_until(tree, cond, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tree.poll()
        if cond():
            return True
        select.select([tree.status_fd], [], [], 0.1)
    return cond()


TTY_PROBE = r"""
import os, sys
fd = os.open("/dev/tty", os.O_RDWR)  # fails without a controlling terminal
print("isatty", os.isatty(0), os.isatty(1), os.isatty(2), flush=True)
tty_nr = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[4])
print("ctty", tty_nr == os.fstat(0).st_rdev, os.ttyname(0).startswith("/dev/pts/"), flush=True)
print("foreground", os.tcgetpgrp(0) == os.getpgrp() == os.getpid(), flush=True)
print("size", *os.get_terminal_size(0), flush=True)
line = sys.stdin.readline()
print("read", line.strip(), flush=True)
"""


# ---------------------------------------------------------------------------
# spawn(pty=True)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_the_command_runs_on_its_own_controlling_terminal(native, trees, mode):
    t = proctree.spawn([sys.executable, "-c", TTY_PROBE], contain=mode, pty=True)
    trees.append(t)
    assert isinstance(t.pty, int) and t.stdin is t.stdout is t.stderr is None
    out = answer_the_probe(t.pty, b"typed\n")
    assert b"isatty True True True" in out
    assert b"ctty True True" in out
    assert b"foreground True" in out
    assert t.wait(15) == 0
    assert t.pty is None  # closed by the Tree once it finished


def test_window_size_is_the_owners(native, trees):
    """The owner on a terminal of 33 x 101: the command's pty starts with that size."""
    m, s = os.openpty()
    saved = os.dup(0)
    try:
        from proctree._containment import terminal

        terminal.set_window_size(s, (33, 101, 0, 0))
        os.dup2(s, 0)
        t = proctree.spawn([sys.executable, "-c", TTY_PROBE], pty=True)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, m, s):
            os.close(fd)
    trees.append(t)
    assert b"size 101 33" in answer_the_probe(t.pty, b"x\n")
    t.wait(15)


def test_no_owner_terminal_leaves_the_size_unset(native, trees):
    from proctree._containment import terminal

    if terminal.owner_window_size() is not None:
        pytest.skip("this test run has a terminal")
    t = proctree.spawn([sys.executable, "-c", TTY_PROBE], pty=True, stdin=None)
    trees.append(t)
    assert b"size 0 0" in answer_the_probe(t.pty, b"x\n")
    t.wait(15)


def _open_fds():
    """Our open fds, less the keeper watch's own: its wake pipe, epoll and pidfds come and go with its thread,
    which ends 2 s after the last keeper (a previous test's) whenever that falls."""
    from proctree._containment import keeperwatch

    watch = keeperwatch._instance
    theirs: set[int | None] = set()
    if watch is not None:
        with watch._lock:
            exits = watch._exits
            theirs = {*(exits.own_fds() if exits is not None else ()), *(w.pidfd for w in watch._watched.values())}
    return set(os.listdir("/proc/self/fd")) - {str(fd) for fd in theirs if fd is not None}


@pytest.mark.parametrize("mode", ALL_MODES)
def test_exec_failure_raises_and_leaves_nothing(native, mode):
    before = _open_fds()
    with pytest.raises(FileNotFoundError):
        proctree.spawn(["/nonexistent/proctree-pty-test"], contain=mode, pty=True)
    with pytest.raises(PermissionError):
        proctree.spawn([ROOT], contain=mode, pty=True)  # a directory
    assert _open_fds() <= before  # neither end of the pty is left open (another object may close its own)


@pytest.mark.parametrize("kw", [dict(stdin=subprocess.PIPE), dict(stdout=subprocess.DEVNULL), dict(stderr=2)])
def test_stdio_with_pty_is_refused(native, kw):
    with pytest.raises(ValueError, match="with pty=True"):
        proctree.spawn(["true"], pty=True, **kw)


@pytest.mark.parametrize("value", [1, "yes", None])
def test_pty_must_be_a_bool(native, value):
    with pytest.raises(TypeError, match="pty must be a bool"):
        proctree.spawn(["true"], pty=value)


def test_spawn_async_with_pty(native):
    async def main():
        t = await proctree.spawn_async([sys.executable, "-c", TTY_PROBE], pty=True)
        try:
            assert b"foreground True" in answer_the_probe(t.pty, b"a\n")
            assert await t.wait_async(15) == 0
        finally:
            t.terminate(0.5)

    asyncio.run(main())


STOPPABLE = r"""
import os, sys
print("ready", flush=True)
line = sys.stdin.readline()  # Ctrl+Z here stops us (SIGTSTP from our terminal)
print("fg", os.tcgetpgrp(0) == os.getpgrp(), "got", line.strip(), flush=True)
"""


@pytest.mark.parametrize("mode", ALL_MODES)
def test_ctrl_z_stops_the_command_and_sigcont_resumes_it(native, trees, mode):
    t = proctree.spawn([sys.executable, "-c", STOPPABLE], contain=mode, pty=True)
    trees.append(t)
    read_until(t.pty, rb"ready")
    os.write(t.pty, b"\x1a")  # Ctrl+Z: the pty's line discipline sends SIGTSTP to its foreground group
    assert poll_until(t, lambda: t.stops == 1)
    assert t.stop_signal == signal.SIGTSTP
    assert state(t.pid) == "T" and t.returncode is None
    t.send_signal(signal.SIGCONT)
    assert wait_state(t.pid, "SR")
    os.write(t.pty, b"again\n")
    assert b"fg True got again" in read_until(t.pty, rb"got again")
    assert t.wait(15) == 0
    assert t.stops == 1


def test_sigstop_is_reported_too_and_sigterm_still_ends_the_command(native, trees):
    t = proctree.spawn(["sh", "-c", "kill -STOP $$; sleep 300"], pty=True)
    trees.append(t)
    assert poll_until(t, lambda: t.stops == 1)
    assert t.stop_signal == signal.SIGSTOP
    t.send_signal(signal.SIGTERM)  # forwarded, then SIGCONT: a stopped command acts on it
    assert t.wait(15) == -signal.SIGTERM


# ---------------------------------------------------------------------------
# The keeper's pty mode, through the protocol only


def test_keeper_refuses_a_stdin_that_is_no_terminal(native):
    r, w = os.pipe()
    k = KeeperRun("subreaper", ["true"], pty=r)
    try:
        assert k.status() == Err(errno.ENOTTY, "pty")
        assert k.popen.wait(15) == 126
    finally:
        os.close(r)
        os.close(w)
        k.close()


def test_keeper_reports_exec_failure_in_pty_mode(native):
    m, s = os.openpty()
    k = KeeperRun("subreaper", ["/nonexistent/x"], pty=s)
    try:
        os.close(s)
        assert k.status() == Err(errno.ENOENT, "exec")
        assert k.popen.wait(15) == 127
    finally:
        os.close(m)
        k.close()


FLOOD = r"""
import os, signal, sys
n = int(sys.argv[1])
parent = os.getpid()
child = os.fork()
def stopped():
    with open(f"/proc/{parent}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0] == b"T"
if child == 0:  # stop and continue our parent, the command, n times (each stop seen before it is continued)
    for _ in range(n):
        os.kill(parent, signal.SIGSTOP)
        while not stopped():
            pass
        os.kill(parent, signal.SIGCONT)
    os._exit(0)
while os.waitpid(child, 0)[0] != child:
    pass
sys.exit(5)
"""


def test_a_flood_of_stops_never_blocks_the_keeper_nor_drops_the_exit(native):
    """Nobody reads the status pipe while the command stops thousands of times: the exit line still arrives."""
    m, s = os.openpty()
    k = KeeperRun("subreaper", [sys.executable, "-c", FLOOD, "3000"], pty=s)
    try:
        os.close(s)
        fcntl.fcntl(k.status_r, fcntl.F_SETPIPE_SZ, 4096)  # the smallest pipe: ~370 stop lines fill it
        assert k.popen.wait(120) == 5  # the keeper got through, unblocked
        first = k.status()
        assert isinstance(first, Ok)
        kinds = []
        while (rec := k.status()) is not None:
            kinds.append(rec)
        assert kinds[-2:] == [Exit(5 << 8), Done(True)]  # the exit (and the last line) never dropped
        assert all(isinstance(r, Stopped) for r in kinds[:-2])
        assert 100 < len(kinds) - 2 < 3000  # stop lines came, and were dropped once the pipe was nearly full
    finally:
        os.close(m)
        k.close()


# ---------------------------------------------------------------------------
# `proctree run` without a terminal


def test_a_stopped_command_does_not_wedge_the_runner(native):
    """No terminal: SIGTERM to the runner ends a command that stopped itself (TERM is followed by SIGCONT)."""
    p = subprocess.Popen(
        [*proctree_cli(), "run", "--", "sh", "-c", "echo $$; kill -STOP $$; sleep 300"],
        env=env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    try:
        pid = int(p.stdout.readline())
        assert wait_state(pid, "T")
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 128 + signal.SIGTERM
        assert wait_gone([pid], 5)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()


# ---------------------------------------------------------------------------
# `proctree run` on a terminal, through tmux


class Tmux:
    """A tmux server on a private socket, one window running an outer `bash --norc` with the prompt 'out$ '."""

    def __init__(self, tmp):
        self.sock = str(tmp / "sock")
        self.env = {**env(), "TERM": "xterm", "HISTFILE": "/dev/null"}
        rc = tmp / "outer.rc"  # the outer shell reads nothing but its prompt and a short name for the CLI
        # Typed lines stay short whatever the checkout's path: a line that fills the pane's width exactly is
        # marked wrapped, and capture-pane -J would join the command's first output line onto it.
        cli = " ".join(shlex.quote(a) for a in proctree_cli())
        rc.write_text(f"PS1='out$ '\nproctree() {{ {cli} \"$@\"; }}\n")
        outer = f"bash --noprofile --rcfile {shlex.quote(str(rc))}"
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "100", "-y", "30", outer)

    def tmux(self, *args):
        return subprocess.run(
            ["tmux", "-S", self.sock, *args], env=self.env, capture_output=True, text=True, timeout=30, check=True
        ).stdout

    def type(self, text, enter=True):
        self.tmux("send-keys", "-t", "t", "-l", text)
        if enter:
            self.tmux("send-keys", "-t", "t", "Enter")

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "t", *keys)

    def screen(self):
        """The visible pane row by row (a wrapped line stays split), each without its trailing blanks."""
        return "\n".join(line.rstrip() for line in self.tmux("capture-pane", "-p", "-t", "t").splitlines())

    def wait_for(self, pattern, timeout=30.0):
        """The screen once pattern (a regex, multiline) matches it; AssertionError with the screen on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen().rstrip("\n")
            m = re.search(pattern, text, re.M)
            if m:
                return m
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {pattern!r}; screen:\n{text}")
            time.sleep(0.1)

    def clear(self):
        self.type("clear")
        self.wait_for(r"\Aout\$$")

    def outer_modes(self):
        """Which of icanon and echo the outer terminal has on (stty -a, read in the outer shell)."""
        self.clear()
        self.type("stty -a | tr ' ' '\\n' | grep -x -e icanon -e echo | tr '\\n' ' ' | sed 's/^/MODES: /'; echo")
        return self.wait_for(r"^MODES: (.*)$").group(1).split()

    def kill_server(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], env=self.env, capture_output=True, timeout=30)


@pytest.fixture
def tmux(native, tmp_path):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (Debian package tmux)")
    t = Tmux(tmp_path)
    try:
        t.wait_for(r"^out\$$")
        yield t
    finally:
        t.kill_server()


def run_line(*argv, options=()):
    """The shell line that starts `proctree run [options] -- argv` (proctree: the outer shell's function)."""
    return " ".join(shlex.quote(a) for a in ["proctree", "run", *options, "--", *argv])


def start_inner_bash(tmux):
    """`proctree run -- bash --norc --noprofile -i` in the outer shell, its prompt made 'in$ '."""
    tmux.type(run_line("bash", "--norc", "--noprofile", "-i"))
    tmux.wait_for(r"^bash-[\d.]+[#$]$")
    tmux.type("PS1='in$ '")
    tmux.wait_for(r"^in\$$")


def ours(pid):
    """True if pid carries this test run's marker (so the test may signal it)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return os.environ[MARKER].encode() in f.read()
    except OSError:
        return False


def test_interactive_bash_through_the_relay(tmux):
    start_inner_bash(tmux)
    tmux.type("[ -t 0 ] && echo TTY-$((6*7)); stty size")
    tmux.wait_for(r"^TTY-42$")
    tmux.wait_for(r"^30 100$")  # the pane's size, copied to the pty
    tmux.tmux("resize-window", "-t", "t", "-x", "90", "-y", "25")
    tmux.type("stty size")
    tmux.wait_for(r"^25 90$")  # SIGWINCH: the new size copied to the pty
    tmux.type("exit")
    tmux.wait_for(r"^out\$$")
    assert tmux.outer_modes() == ["icanon", "echo"]


def _program(*names):
    """The first of names found on PATH; the test skips (saying which) when none is."""
    for name in names:
        if shutil.which(name):
            return name
    pytest.skip(f"none of {', '.join(names)} is installed")


def test_vim_edits_a_file_through_the_relay(tmux, tmp_path):
    vim = _program("vim", "vim.tiny")
    path = tmp_path / "f.txt"
    path.write_text("first line\n")
    tmux.type(run_line(vim, "-u", "NONE", "-N", "-n", str(path)))
    tmux.wait_for(r"^first line")
    tmux.keys("O")
    tmux.type("typed in vim", enter=False)
    tmux.keys("Escape")
    tmux.wait_for(r"^typed in vim$")
    tmux.type(":wq")
    tmux.wait_for(r"^out\$$")
    assert path.read_text() == "typed in vim\nfirst line\n"
    assert tmux.outer_modes() == ["icanon", "echo"]


def test_ctrl_z_returns_to_the_outer_shell_and_fg_resumes(tmux):
    tmux.type(run_line("sh", "-c", "echo PID=$$; exec cat"))
    pid = int(tmux.wait_for(r"^PID=(\d+)$").group(1))
    tmux.type("one")
    tmux.wait_for(r"^one\n^one$")  # the pty's echo, then cat's copy
    tmux.keys("C-z")
    tmux.wait_for(r"Stopped.*\n^out\$$")  # the outer shell's job report and its prompt
    assert wait_state(pid, "T")
    assert tmux.outer_modes() == ["icanon", "echo"]
    tmux.type("fg")
    assert wait_state(pid, "SR")
    tmux.type("two")
    # The pty's echo of the suspend key (^Z) may reach the screen only now, before the echo of "two".
    tmux.wait_for(r"^(\^Z)?two\n^two$")
    tmux.keys("C-d")  # EOF for cat, through the pty
    tmux.wait_for(r"^out\$$")
    assert wait_gone([pid], 10)


def test_outer_terminal_restored_after_the_command_is_sigkilled(tmux):
    start_inner_bash(tmux)
    tmux.type("echo PID=$$")
    pid = int(tmux.wait_for(r"^PID=(\d+)$").group(1))
    assert ours(pid)
    os.kill(pid, signal.SIGKILL)
    tmux.wait_for(r"out\$$")  # after the dead shell's prompt, on its line
    tmux.type("echo status=$?")
    tmux.wait_for(r"^status=137$")  # 128 + SIGKILL, as a shell reports it
    assert tmux.outer_modes() == ["icanon", "echo"]


def test_outer_terminal_restored_after_sigterm_to_the_runner(tmux):
    tmux.type(run_line("sh", "-c", "echo PID=$$ KEEPER=$PPID; exec cat"))
    m = tmux.wait_for(r"^PID=(\d+) KEEPER=(\d+)$")
    pid, keeper = int(m.group(1)), int(m.group(2))
    runner = proctree.proc(keeper).ppid
    assert ours(runner) and alive(pid)
    os.kill(runner, signal.SIGTERM)  # forwarded to cat, which dies of it
    tmux.wait_for(r"^out\$$")
    assert wait_gone([pid, keeper, runner], 10)
    assert tmux.outer_modes() == ["icanon", "echo"]


def test_no_pty_keeps_the_shared_terminal(tmux):
    tmux.type(run_line("sh", "-c", "[ -t 0 ] && echo SAME-TTY", options=["--no-pty"]))
    tmux.wait_for(r"^SAME-TTY$")
    tmux.wait_for(r"^out\$$")


def test_stdout_to_a_pipe_gets_no_pty(tmux):
    """A terminal on stdin but a pipe on stdout: CMD keeps the pipe (no terminal, no CRLF in what it writes)."""
    tmux.type(run_line("sh", "-c", "[ -t 1 ] || echo NOT-A-TTY") + " | od -c | head -1")
    tmux.wait_for(r"N +O +T +- +A +- +T +T +Y +\\n")  # od shows the bare newline: no \r
    tmux.wait_for(r"^out\$$")


def test_sigtstp_to_the_runner_stops_the_job_like_ctrl_z(tmux):
    tmux.type(run_line("sh", "-c", "echo PID=$$ KEEPER=$PPID; exec cat"))
    m = tmux.wait_for(r"^PID=(\d+) KEEPER=(\d+)$")
    pid, keeper = int(m.group(1)), int(m.group(2))
    runner = proctree.proc(keeper).ppid
    assert ours(runner)
    os.kill(runner, signal.SIGTSTP)
    tmux.wait_for(r"Stopped.*\n^out\$$")
    assert wait_state(pid, "T") and wait_state(runner, "T")
    assert tmux.outer_modes() == ["icanon", "echo"]
    tmux.type("fg")
    assert wait_state(pid, "SR")
    tmux.type("three")
    tmux.wait_for(r"^(\^Z)?three\n^three$")  # the pty's echo of the suspend character may show up only now
    tmux.keys("C-d")
    tmux.wait_for(r"^out\$$")
    assert wait_gone([pid, runner], 10)


def test_less_pages_through_the_relay_and_ctrl_z_suspends_it(tmux, tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"line-{i}\n" for i in range(1, 201)))
    tmux.type(run_line(_program("less"), str(path)))
    tmux.wait_for(r"^line-1$")
    tmux.keys("G")  # to the end: a key read raw by less on its own terminal
    tmux.wait_for(r"^line-200$")
    tmux.keys("C-z")  # less restores its terminal and stops itself; so do we
    tmux.wait_for(r"Stopped.*\n^out\$$")
    tmux.type("fg")
    tmux.wait_for(r"^line-200$")
    tmux.keys("q")
    tmux.wait_for(r"^out\$$")
    assert tmux.outer_modes() == ["icanon", "echo"]


def test_a_killed_keeper_restores_the_terminal_and_says_why(tmux):
    tmux.type(run_line("sh", "-c", "echo PID=$$ KEEPER=$PPID; exec cat"))
    m = tmux.wait_for(r"^PID=(\d+) KEEPER=(\d+)$")
    pid, keeper = int(m.group(1)), int(m.group(2))
    assert ours(keeper)
    os.kill(keeper, signal.SIGKILL)
    tmux.wait_for(r"^proctree run: the keeper .* was killed by signal 9")
    tmux.wait_for(r"out\$$")
    tmux.type("echo status=$?")
    tmux.wait_for(r"^status=125$")
    assert "Traceback" not in tmux.screen()
    assert wait_gone([pid], 10)
    assert tmux.outer_modes() == ["icanon", "echo"]


def test_stop_lines_are_never_taken_for_the_exit(native, trees):
    """communicate(), wait() and wait_async() read past 'stopped' lines to the exit."""
    for how in ("communicate", "wait", "wait_async"):
        t = proctree.spawn(["sh", "-c", "kill -STOP $$; kill -STOP $$; exit 3"], pty=True)
        trees.append(t)
        assert poll_until(t, lambda t=t: t.stops == 1)
        t.send_signal(signal.SIGCONT)
        assert poll_until(t, lambda t=t: t.stops == 2)
        t.send_signal(signal.SIGCONT)
        if how == "communicate":
            assert t.communicate(timeout=15) == (None, None)
            assert t.returncode == 3
        elif how == "wait":
            assert t.wait(15) == 3
        else:
            assert asyncio.run(t.wait_async(15)) == 3
        assert t.stops == 2 and t.stop_signal == signal.SIGSTOP
