"""proctree.Popen's marked fallback (no writable cgroup v2): the command's tree found by its PROCTREE_TREE chain.

Forced here with popenhold._force_session, in a child interpreter of its own
(the holding tree of a process is made once, in one mode).
"""

import os
import subprocess
import sys
import textwrap
import time

import pytest

import proctree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


PRELUDE = """
import os, subprocess, sys, time
import proctree
from proctree._containment import popenhold
popenhold._force_session = True
"""


def owner(body: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
        env=dict(os.environ, PYTHONPATH=ROOT),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_marked_leftovers_end_when_the_command_exits():
    p = owner(
        """
        c = proctree.Popen(["sh", "-c", "setsid sleep 300 >/dev/null & echo $!"], stdout=subprocess.PIPE)
        orphan = int(c.stdout.readline())
        c.stdout.close()
        assert c.wait() == 0
        assert popenhold.holder().mode == "session", popenhold.holder().mode
        print(orphan, flush=True)
        sys.stdin.read()
        """
    )
    try:
        orphan = int(p.stdout.readline())
        assert wait_gone(orphan), "the marked orphan outlived its command"
    finally:
        p.kill()
        p.wait()


def test_marked_command_is_own_child_with_markers():
    p = owner(
        """
        out = proctree.check_output(["sh", "-c", "echo $PPID; echo $PROCTREE_TREE"], text=True)
        ppid, chain = out.split()
        assert int(ppid) == os.getpid()
        assert popenhold.holder().tree_id in chain.split(":")[1:]
        print("ok", flush=True)
        """
    )
    try:
        assert p.stdout.readline() == "ok\n"
        assert p.wait(30) == 0
    finally:
        p.kill()
        p.wait()


def test_marked_tree_dies_with_the_owner():
    p = owner(
        """
        c = proctree.Popen(["sh", "-c", "setsid sleep 300 >/dev/null & echo $!; exec sleep 300"], stdout=subprocess.PIPE)
        print(c.pid, int(c.stdout.readline()), flush=True)
        sys.stdin.read()
        """
    )
    try:
        command, orphan = map(int, p.stdout.readline().split())
        p.kill()
        p.wait(10)
        assert wait_gone(command) and wait_gone(orphan)
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize(
    "env",
    [
        "None",
        "{b'PATH': os.environb[b'PATH'], b'PROCTREE_OWNER': b'stale', b'PROCTREE_TREE': b'stale'}",
        "{'PATH': os.environ['PATH'], 'PROCTREE_OWNER': 'stale', b'PROCTREE_TREE': b'stale'}",
    ],
    ids=["inherited", "bytes-with-stale-markers", "mixed-with-stale-markers"],
)
def test_marked_environment_carries_each_marker_once(env):
    # Whatever form env takes, the command gets the holder's markers, once each (never a stale one beside them).
    p = owner(
        f"""
        out = proctree.check_output(["sh", "-c", "env"], env={env})
        lines = [l for l in out.split(b"\\n") if l.startswith((b"PROCTREE_OWNER=", b"PROCTREE_TREE="))]
        assert len(lines) == 2, lines
        assert lines[0 if lines[0].startswith(b"PROCTREE_OWNER=") else 1] == b"PROCTREE_OWNER=" + popenhold.holder().marker.encode()
        assert b"stale" not in out
        print("ok", flush=True)
        """
    )
    try:
        assert p.stdout.readline() == "ok\n"
        assert p.wait(30) == 0
    finally:
        p.kill()
        p.wait()
