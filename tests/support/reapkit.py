"""Trees for the reaper tests: a contained tree whose owner and keeper were SIGKILLed.

orphaned_tree() starts an owner process that spawns COMMAND contained, and
kills the keeper, then the owner: what the tree started is left running,
with its PROCTREE_OWNER marker naming a dead owner. The `started` fixture
ends every process a test recorded, checked by pid and start time.
"""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

import proctree

from .spawnkit import read_lines, wait_gone

# The tree's command: a child that scrubbed its environment, a setsid daemon,
# then it reports and sleeps. argv: W
COMMAND = textwrap.dedent(r"""
    import os, sys, time
    w = int(sys.argv[1])
    scrubbed = os.fork()
    if scrubbed == 0:
        os.execve("/bin/sleep", ["sleep", "300"], {})
    r, wd = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(wd, b"%d\n" % os.getpid())
            time.sleep(300)
            os._exit(0)
        os._exit(0)
    daemon = int(os.read(r, 64))
    os.write(w, b"cmd %d\nscrubbed %d\ndaemon %d\n" % (os.getpid(), scrubbed, daemon))
    time.sleep(300)
""")

# The owner: spawns the tree, reports the keeper, sleeps until killed. argv: W MODE
OWNER = textwrap.dedent(r"""
    import os, sys, time
    import proctree
    w, mode = int(sys.argv[1]), sys.argv[2]
    t = proctree.spawn([sys.executable, "-c", sys.argv[3], str(w)], contain=mode, pass_fds=(w,), grace=0.5)
    os.write(w, b"owner %d\nkeeper %d\n" % (os.getpid(), t.keeper_pid))
    time.sleep(300)
""")


# For scripts run as pid 1 of a sandbox (support.sandbox): orphaned(mode, command) runs the shell line
# command as a tree contained in mode by an owner process, waits until the tree has `members` members,
# SIGKILLs the owner and its keeper and returns the members' pids (orphans whose owner is provably gone);
# running(pid) says whether pid is a process that has not ended (a zombie has).
SANDBOX_ORPHANS = r'''
import os, signal, subprocess, sys, time

_OWNER = """
import sys, time, proctree
t = proctree.spawn(["sh", "-c", sys.argv[2]], contain=sys.argv[1])
while len(t.members()) < int(sys.argv[3]):  # the keeper is not a member
    time.sleep(0.01)
print(t.keeper_pid, *[p.pid for p in t.members()], flush=True)
time.sleep(300)
"""


def orphaned(mode, command, members=3):
    o = subprocess.Popen([sys.executable, "-c", _OWNER, mode, command, str(members)], stdout=subprocess.PIPE, text=True)
    keeper, *pids = map(int, o.stdout.readline().split())
    for sig in (signal.SIGSTOP, signal.SIGKILL):  # both stopped, then both killed: neither ends the tree
        for pid in (o.pid, keeper):
            os.kill(pid, sig)
    o.wait()
    return pids


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
'''


@pytest.fixture
def started():
    """(pid, start) of every process a test starts here; each, with what it started, ended afterwards
    if it is still the same process."""
    made = []
    yield made
    for pid, start in made:
        try:
            if proctree.proc(pid).start_time == start:
                proctree.terminate_tree(pid, grace=0)
        except (proctree.NoSuchProcess, ValueError):
            pass
    wait_gone([p for p, _ in made], 5)


def orphaned_tree(mode, started, pipe):
    """A contained tree whose owner and keeper were SIGKILLed: {role: pid}."""
    r, w = pipe
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(w), mode, COMMAND], pass_fds=(w,))
    pids = read_lines(r, 5)
    for role in ("owner", "keeper", "cmd", "scrubbed", "daemon"):
        started.append((pids[role], proctree.proc(pids[role]).start_time))
    # As if the host died at once: a running owner ends the tree when its keeper
    # dies, and a live keeper does when its owner dies. So: stop the owner, kill both.
    owner.send_signal(signal.SIGSTOP)
    os.kill(pids["keeper"], signal.SIGKILL)
    wait_gone([pids["keeper"]], 5)
    owner.kill()
    owner.wait()
    return pids


def start_detached(argv, started, env=None):
    """Start argv reparented away from the test process (to init or a subreaper) at once; its pid.

    A child of the test process would sit in the subtree of a live owner
    (this process spawns trees), which the reaper always protects.
    """
    script = 'exec "$@" </dev/null >/dev/null 2>&1 & echo $!'
    sh = subprocess.run(["sh", "-c", script, "sh", *argv], env=env, capture_output=True, text=True, timeout=30)
    pid = int(sh.stdout.split()[0])
    started.append((pid, proctree.proc(pid).start_time))
    return pid
