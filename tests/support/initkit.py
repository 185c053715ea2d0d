"""One way to start "the init under test", for the suites ported from tini and dumb-init.

init_argv() is the command line of `proctree run` up to and including `--`: `python -m proctree run` by
default; PROCTREE_INIT (a command line, split with shlex) points the same suites at another runner of the
same options (the native one). INIT_REFERENCE=tini|dumb-init is for tools/compare_inits.py only: the real
tini (`tini -s -g`, a subreaper signalling CMD's group, as proctree does) or dumb-init (its default, setsid
mode), proctree's own options dropped. CI never sets it.

placed() puts that command in one of two placements: "pid1", PID 1 of a fresh pid namespace with its own
/proc (`unshare --pid --fork --kill-child --mount-proc`: everything started dies with the namespace), or
"child", a plain child of the test. runner_pid() is then the init's pid as seen from here, the one process
a test signals.
"""

import os
import re
import select
import shlex
import shutil
import signal
import sys
import time

import pytest

import proctree

from .spawnkit import CGROUP_OK, LINUX

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
UNSHARE = shutil.which("unshare")
NS_OK = LINUX and UNSHARE is not None and os.geteuid() == 0
REFERENCE = os.environ.get("INIT_REFERENCE", "")  # "", "tini" or "dumb-init": see tools/compare_inits.py

needs_ns = pytest.mark.skipif(not NS_OK, reason="needs Linux, unshare(1) and root for a pid namespace")
PLACEMENTS = [pytest.param("pid1", marks=needs_ns, id="pid1"), pytest.param("child", id="child")]
MODES = [
    pytest.param("cgroup", marks=pytest.mark.skipif(not CGROUP_OK, reason="no writable cgroup v2 here")),
    pytest.param("subreaper", marks=pytest.mark.skipif(not LINUX, reason="Linux-only")),
    "session",
]

# No xfail "no -g option yet" is needed: signalling CMD's process group (tini -g, dumb-init's default) is what
# proctree run does by default for INT, TERM, HUP, QUIT, USR1, USR2 and WINCH (proctree/cli/run.py).


def init_argv(contain=None, pty=False):
    """The init's command line before CMD (ending with `--`)."""
    if REFERENCE == "tini":
        return ["tini", "-s", "-g", "--"]
    if REFERENCE == "dumb-init":
        return ["dumb-init"]  # no `--`: dumb-init takes CMD's first word as CMD
    if os.environ.get("PROCTREE_INIT"):
        base = shlex.split(os.environ["PROCTREE_INIT"])
    else:
        base = [sys.executable, "-m", "proctree", "run"]
    return [*base, *(["--contain", contain] if contain else []), *([] if pty else ["--no-pty"]), "--"]


def placed(placement, argv, terminal=False):
    """argv (an init's full command line) in a placement: "pid1" or "child".

    terminal=True: the caller runs it as the leader of a session with a terminal (pty.fork()), as tini's and
    dumb-init's terminal tests run the init; as PID 1 it is made that session's leader with the terminal for its
    controlling one (`setsid -c`, which takes it from unshare's session), as a container runtime does for the
    PID 1 of `docker run -t`.
    """
    if placement == "pid1":
        leader = ["setsid", "-c"] if terminal else []
        return [UNSHARE, "--pid", "--fork", "--kill-child", "--mount-proc", *leader, *argv]
    assert placement == "child", placement
    return list(argv)


def init_cmd(placement, cmd, contain=None, pty=False, terminal=False):
    return placed(placement, [*init_argv(contain, pty), *cmd], terminal)


def env(**extra):
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra}


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except FileNotFoundError:
        return []


def pid_tree(pid):
    """Every descendant of pid (dumb-init's testing.pid_tree, on the children files)."""
    out = set()
    for c in children(pid):
        out |= {c} | pid_tree(c)
    return out


def alive(pid):
    """Running, not a zombie."""
    try:
        return process_state(pid) != "zombie"
    except (FileNotFoundError, ProcessLookupError):
        return False


def process_state(pid):
    """A process' state, "sleeping", "stopped", ... (dumb-init's testing.process_state)."""
    with open(f"/proc/{pid}/status") as f:
        return re.search(r"^State:\s+[A-Z] \(([a-z ]+)\)$", f.read(), re.MULTILINE).group(1)


def sleep_until(fn, timeout=15.0):
    """Until fn() raises nothing (dumb-init's testing.sleep_until, with a loose bound)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except Exception:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.01)


def runner_pid(p, placement, timeout=15.0):
    """The init process: p itself, or as PID 1 unshare's one child (its pid as seen from here)."""
    if placement == "child":
        return p.pid

    def one():
        (child,) = children(p.pid)
        return child

    return sleep_until(one, timeout)


def readline(stream, timeout=15.0):
    """One line from a text or binary pipe, "" / b"" at EOF; fails after timeout (a hang, not a slow host)."""
    ready, _, _ = select.select([stream], [], [], timeout)
    assert ready, f"no line within {timeout} s"
    return stream.readline()


# dumb-init's testing/print_signals.py, printing in arrival order: "ready (pid: N)", then each signal caught.
PRINT_SIGNALS = r"""
import os, signal, sys, time
CATCHABLE = set(range(1, 32)) - {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD}
queue = []
for s in CATCHABLE:
    signal.signal(s, lambda n, f: queue.append(n))
print("ready (pid: %d)" % os.getpid(), flush=True)
while True:
    while queue:
        print(queue.pop(0), flush=True)
    time.sleep(0.01)
"""


def print_signals_ready(stream):
    """print_signals' pid, from its first line."""
    line = readline(stream)
    m = re.match(r"^ready \(pid: ([0-9]+)\)\n$", line if isinstance(line, str) else line.decode())
    assert m, line
    return int(m.group(1))


def kill_tree(p, placement):
    """Kill what a test started: the namespace (its PID 1 goes, and with it everything in it), or the init."""
    if p.poll() is None:
        if placement == "child":
            for pid in pid_tree(p.pid):  # our own descendants, found by parent link, not by name
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        p.kill()
    p.wait(timeout=30)
