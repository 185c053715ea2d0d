"""`proctree run -g` (every signal to CMD's group), `-p SIG` (a signal when the runner's parent dies) and a terminal
handed to CMD's session, on both runners: the native one (proctree-init, what `proctree run` hands over to) and the
Python one (PROCTREE_RUN_NATIVE=0), which must read the same command lines the same way."""

import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

import proctree
from support.spawnkit import LINUX

pytestmark = pytest.mark.skipif(not LINUX, reason="proctree-init and PR_SET_PDEATHSIG are Linux's")

HOME = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
RUNNERS = ["native", "python"]


def run_argv(*argv):
    return [sys.executable, "-m", "proctree", "run", *argv]


def env(runner):
    return {**os.environ, "PYTHONPATH": HOME, "PROCTREE_RUN_NATIVE": "1" if runner == "native" else "0"}


@pytest.fixture
def procs():
    made = []
    yield made
    for p in made:
        if p.poll() is None:
            p.kill()
        p.wait()


# CMD: a parent and a child in CMD's process group; each prints its SIGALRMs; SIGTERM ends both.
GROUP = r"""
import os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM, signal.SIGTERM])
who = "child" if os.fork() == 0 else "parent"
os.write(1, f"{who} ready\n".encode())
while signal.sigwait([signal.SIGALRM, signal.SIGTERM]) == signal.SIGALRM:
    os.write(1, f"{who}\n".encode())
if who == "parent":
    os.wait()
"""


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("flag", [None, "-g", "--group"])
def test_group_flag_sends_every_signal_to_cmds_group(procs, runner, flag):
    argv = run_argv(*([flag] if flag else []), "--no-pty", "--", sys.executable, "-c", GROUP)
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env(runner))
    procs.append(p)
    assert sorted(p.stdout.readline() for _ in range(2)) == ["child ready\n", "parent ready\n"]
    os.kill(p.pid, signal.SIGALRM)  # not one of the group's by default: CMD alone, or its group with -g
    time.sleep(0.3)  # the Python runner reads the group's members first: let the ALRM land before the TERM
    os.kill(p.pid, signal.SIGTERM)  # always the group's: both end
    assert p.wait(timeout=30) == 0
    assert sorted(p.stdout.read().split()) == (["child", "parent"] if flag else ["parent"])


def test_tree_send_signal_group_reaches_the_commands_group_only():
    tree = proctree.spawn([sys.executable, "-c", GROUP], stdout=subprocess.PIPE)
    try:
        out = tree.stdout
        assert sorted(out.readline() for _ in range(2)) == [b"child ready\n", b"parent ready\n"]
        tree.send_signal(signal.SIGALRM, group=True)
        got = sorted(out.readline() for _ in range(2))
        assert got == [b"child\n", b"parent\n"]
    finally:
        tree.terminate(grace=2)
    tree.send_signal(signal.SIGALRM, group=True)  # after the end: a no-op, never someone else's group


# CMD of stage 1: SIGKILL stage 1 (the runner's parent), then wait for the runner's SIGUSR1 to be passed on.
STAGE_2 = r"""
import os, signal, sys, time
got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
os.kill(int(sys.argv[1]), signal.SIGKILL)
deadline = time.monotonic() + 10
while not got and time.monotonic() < deadline:
    time.sleep(0.01)
open(sys.argv[2], "w").write("ok" if got else "no signal")
"""
STAGE_1 = r"""
import json, os, subprocess, sys
subprocess.Popen([*json.loads(sys.argv[1]), sys.executable, "-c", sys.argv[2], str(os.getpid()), sys.argv[3]]).wait()
"""


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("spelling", [["-p", "SIGUSR1"], ["--parent-death-signal=usr1"], ["-p", "10"]])
def test_parent_death_signal_is_passed_on(procs, tmp_path, runner, spelling):
    import json

    ret = tmp_path / "ret"
    init = run_argv(*spelling, "--no-pty", "--")
    p = subprocess.Popen(
        [sys.executable, "-c", STAGE_1, json.dumps(init), STAGE_2, str(ret)],
        env=env(runner),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    procs.append(p)
    p.wait(timeout=30)
    deadline = time.monotonic() + 15
    while (not ret.exists() or not ret.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ret.read_text() == "ok"


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("bad", ["BOGUS", "0", "-1", "", "SIGRTMAX+1"])
def test_a_bad_parent_death_signal_is_refused_in_one_line(runner, bad):
    r = subprocess.run(
        run_argv("-p", bad, "--no-pty", "--", "true"), env=env(runner), capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 2, r
    assert "-p/--parent-death-signal" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


CMD_TTY = r"""
import os
fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
try:
    foreground = os.getpgrp() == os.tcgetpgrp(0)
except OSError:  # not our controlling terminal
    foreground = None
print("TTY", fields[4], foreground)
"""


def _tty_nr_of_cmd(argv):
    """Run argv (ending in CMD's place) as the leader of a session on a fresh terminal; CMD prints its stat line's
    tty_nr (0: no controlling terminal) and its group against the terminal's foreground group."""
    cmd = [sys.executable, "-c", CMD_TTY]
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.execvpe(argv[0], [*argv, *cmd], env("native"))
        finally:
            os._exit(127)
    out = b""
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.5)[0]:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    line = [ln for ln in out.decode().splitlines() if ln.startswith("TTY ")]
    assert line, out
    return os.waitstatus_to_exitcode(status), line[0].split()[1:]


def test_a_terminal_the_runner_leads_is_handed_to_cmds_session():
    code, (tty_nr, foreground) = _tty_nr_of_cmd(run_argv("--no-pty", "--"))
    assert code == 0
    assert tty_nr != "0" and foreground == "True"


def test_a_terminal_a_shell_leads_is_left_to_the_shell():
    # The shell leads the session (as in any terminal): the runner is its job, and takes nothing.
    shell = ["sh", "-c", 'exec 3>&1; "$@"; exit $?', "sh", *run_argv("--no-pty", "--")]
    code, (tty_nr, _) = _tty_nr_of_cmd(shell)
    assert code == 0
    assert tty_nr == "0"
