"""Contained trees and their owner: the tree ends when the owner dies, however it dies;
a tree spawned from a thread outlives the thread; no controlling terminal.

The owner is a separate process started by the test, reporting every pid on a
pipe; the test kills it and checks that the tree went with it. Leftovers are
ended by recorded pid in finally blocks, and the autouse leak check catches the rest.
"""

import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import proctree
from proctree._containment import cgroup as _cgroup
from support.spawnkit import (
    ALL_MODES,
    CONTAINING,
    DAEMONIZER,
    alive,
    end_daemon,
    read_lines,
    wait_gone,
)

# ---------------------------------------------------------------------------
# Owner death

OWNER = textwrap.dedent(r"""
    import os, sys, threading, time
    sys.path.insert(0, sys.argv[1])
    from proctree._containment.spawn import spawn
    w, mode, how = int(sys.argv[2]), sys.argv[3], sys.argv[4]
    daemonizer, OWNER_GRACE = sys.argv[5], float(sys.argv[6])
    r2, w2 = os.pipe()
    box = []
    def go():
        box.append(spawn([sys.executable, "-c", daemonizer, str(w2), "1", "sleep"],
                         contain=mode, grace=OWNER_GRACE, pass_fds=(w2,)))
    if how == "thread":
        th = threading.Thread(target=go)
        th.start()
        th.join()  # the spawning thread is gone from here on
    else:
        go()
    os.close(w2)
    data = b""
    while data.count(b"\n") < 2:
        data += os.read(r2, 100)
    os.write(w, data + b"keeper %d\nready 1\n" % box[0].keeper_pid)
    time.sleep(300)
""")


OWNER_GRACE = 1.0


def start_owner(pipe, mode, how, **env):
    r, w = pipe
    root = os.path.dirname(os.path.dirname(proctree.__file__))
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, root, str(w), mode, how, DAEMONIZER, str(OWNER_GRACE)],
        pass_fds=(w,),
        env={**os.environ, **env},
    )
    os.close(w)
    try:
        pids = read_lines(r, 4, timeout=30)
    except BaseException:
        owner.kill()
        owner.wait()
        raise
    return owner, pids


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("watch", ["pidfd", "pdeathsig"])
def test_owner_sigkill_ends_the_tree(pipe, mode, watch):
    owner, pids = start_owner(pipe, mode, "main", **({"PROCTREE_NO_PIDFD": "1"} if watch == "pdeathsig" else {}))
    try:
        tree = [pids["keeper"], pids["cmd"], pids["daemon"]]  # session mode: the daemon by its PROCTREE_TREE
        assert all(alive(p) for p in tree)
        owner.kill()
        owner.wait()
        t0 = time.monotonic()
        # The daemon ignores SIGTERM: it needs the SIGKILL after the grace.
        assert wait_gone(tree, 3 * OWNER_GRACE), f"tree outlived its owner: {[p for p in tree if alive(p)]}"
        took = time.monotonic() - t0
        assert OWNER_GRACE * 0.9 <= took <= 3 * OWNER_GRACE, took
        if mode == "cgroup":
            assert not cgroup_dirs_of(owner.pid)
    finally:
        owner.kill()
        owner.wait()
        end_daemon(pids["daemon"])  # only if a failed assertion left it


def cgroup_dirs_of(pid):
    try:
        base = _cgroup.base_dir()
    except _cgroup.Unavailable:
        return []
    return [n for n in os.listdir(base) if n.startswith(f"proctree-{pid}-")]


@pytest.mark.parametrize("mode", CONTAINING)
@pytest.mark.parametrize("watch", ["pidfd", "pdeathsig"])
def test_spawned_from_a_thread_survives_the_thread(pipe, mode, watch):
    # "pdeathsig": the keeper's path for kernels without pidfds, where
    # PR_SET_PDEATHSIG fires when the spawning THREAD exits: it must only wake
    # the keeper, never end the tree while the owner process lives.
    owner, pids = start_owner(pipe, mode, "thread", **({"PROCTREE_NO_PIDFD": "1"} if watch == "pdeathsig" else {}))
    try:
        time.sleep(0.5)  # long past the spawning thread's exit (PR_SET_PDEATHSIG would have fired)
        assert all(alive(pids[k]) for k in ("keeper", "cmd", "daemon"))
        owner.kill()
        owner.wait()
        assert wait_gone([pids[k] for k in ("keeper", "cmd", "daemon")], 3 * OWNER_GRACE)
    finally:
        owner.kill()
        owner.wait()


PTY_OWNER = textwrap.dedent(r"""
    import os, sys
    sys.path.insert(0, sys.argv[1])
    from proctree._containment.spawn import spawn
    # We lead a session whose controlling terminal is the pty; the tree must not
    # be in it, so job control (SIGTTIN/SIGTTOU) can never stop it.
    t = spawn(["sh", "-c", "read x; echo got:$x; exec cat /proc/self/stat"], contain=sys.argv[2])
    print("spawned", t.pid, flush=True)
    rc = t.wait(timeout=20)
    print("rc", rc, flush=True)
""")


@pytest.mark.parametrize("mode", ALL_MODES)
def test_tree_has_no_controlling_terminal_but_can_use_the_tty(mode):
    import pty

    root = os.path.dirname(os.path.dirname(proctree.__file__))
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader with the pty as its controlling terminal
        try:
            os.execv(sys.executable, [sys.executable, "-c", PTY_OWNER, root, mode])
        finally:
            os._exit(127)
    out = b""
    try:
        deadline = time.monotonic() + 30
        sent = False
        while time.monotonic() < deadline and not re.search(rb"rc -?[0-9]+\r?\n", out):
            if b"spawned" in out and not sent:
                os.write(fd, b"hi\n")
                sent = True
            if select.select([fd], [], [], 0.5)[0]:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
    finally:
        # The owner exits by itself once it printed rc (removing its tree's cgroup on
        # the way out); only one that does not is SIGKILLed (its keeper then ends the tree).
        deadline = time.monotonic() + 5
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)  # our own pty child
                os.waitpid(pid, 0)
                break
            try:
                if select.select([fd], [], [], 0.05)[0]:
                    os.read(fd, 4096)  # keep the pty drained so the owner can finish writing
            except OSError:
                time.sleep(0.05)
        os.close(fd)
    text = out.decode(errors="replace")
    assert "got:hi" in text and "rc 0" in text, text
    stat = next(line for line in text.splitlines() if ") " in line and line.split()[0].isdigit())
    fields = stat.rsplit(")", 1)[1].split()
    assert fields[4] == "0", f"tty_nr should be 0 (no controlling terminal): {stat}"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
