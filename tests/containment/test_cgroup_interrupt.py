"""A cgroup-mode teardown interrupted in its grace (Ctrl-C) SIGKILLs the cgroup's members at once, then raises.

The cgroup teardown runs on the teardown engine's blocking driver, which
aborts what it drives when interrupted, as it does a tree's engine: no
member is left TERMed and running. The owner runs in a process of its own,
so the interrupt can only reach it.
"""

import json
import subprocess
import sys

import pytest

from support.spawnkit import CGROUP_OK

pytestmark = pytest.mark.skipif(not CGROUP_OK, reason="no writable cgroup v2")

OWNER = r"""
import json, os, signal, threading, time
import proctree

t = proctree.spawn(["sh", "-c", "trap '' TERM; sleep 300 & sleep 300 & wait"], contain="cgroup")
while len(t.members()) < 3:  # sh and its two sleeps, all ignoring TERM
    time.sleep(0.01)
members = [(p.pid, p.start_time) for p in t.members()]
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
t0 = time.monotonic()
try:
    t.terminate(grace=60)
    out = {"interrupted": False}
except KeyboardInterrupt:
    out = {"interrupted": True, "elapsed": time.monotonic() - t0}


def running(pid, start):
    try:
        return proctree.proc(pid).start_time == start and not proctree.proc(pid).is_zombie
    except proctree.NoSuchProcess:
        return False


deadline = time.monotonic() + 5
while any(running(*m) for m in members) and time.monotonic() < deadline:
    time.sleep(0.01)
out["left"] = [pid for pid, start in members if running(pid, start)]
t.kill()  # whatever is left, and the keeper
print(json.dumps(out))
"""


def test_an_interrupted_cgroup_teardown_kills_the_members_at_once():
    res = subprocess.run([sys.executable, "-c", OWNER], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["interrupted"], out
    assert out["elapsed"] < 30, out  # far less than the 60 s grace
    assert out["left"] == [], out
