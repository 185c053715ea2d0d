"""An interrupted reap (Ctrl-C during the grace) SIGKILLs what it was ending at once, then raises.

The blocking driver aborts every teardown still running: a leftover cgroup
ends by cgroup.kill, an orphan tree by the engine's abort, without waiting
out the grace. Runs as root in a sandbox (support.sandbox: fresh pid, mount
and cgroup namespaces), so the reaper can end nothing outside it.
"""

import json

import pytest

from support.sandbox import run_sandboxed
from support.spawnkit import CGROUP_OK, LINUX

pytestmark = pytest.mark.skipif(not LINUX, reason="pid namespaces are Linux-only")

SCRIPT = r"""
import json, os, signal, subprocess, sys, time

# Each tree: sh, whose TERM handler writes a line to /tmp/term, and two sleeps that ignore TERM.
TREE = "trap '' TERM; sleep 300 & sleep 300 & trap 'echo $$ >> /tmp/term' TERM; while :; do wait; done"
OWNER = '''
import sys, time, proctree
t = proctree.spawn(["sh", "-c", sys.argv[2]], contain=sys.argv[1])
while len(t.members()) < 3:  # sh and its two sleeps (the keeper is not a member)
    time.sleep(0.01)
print(t.keeper_pid, *[p.pid for p in t.members()], flush=True)
time.sleep(300)
'''
orphans = []
for mode in MODES:
    o = subprocess.Popen([sys.executable, "-c", OWNER, mode, TREE], stdout=subprocess.PIPE, text=True)
    keeper, *members = map(int, o.stdout.readline().split())
    for sig in (signal.SIGSTOP, signal.SIGKILL):  # both stopped, then both killed: neither ends the tree
        for pid in (o.pid, keeper):
            os.kill(pid, sig)
    o.wait()
    orphans += members

REAPER = '''
import json, sys, time
import proctree
t0 = time.monotonic()
try:
    proctree.reap_orphans(grace=60.0)
    print(json.dumps({"interrupted": False}))
except KeyboardInterrupt:
    print(json.dumps({"interrupted": True, "elapsed": time.monotonic() - t0}))
'''
reaper = subprocess.Popen([sys.executable, "-c", REAPER], stdout=subprocess.PIPE, text=True)
deadline = time.monotonic() + 30
while time.monotonic() < deadline:  # every tree's sh has had its TERM: the reaper is in the grace
    try:
        with open("/tmp/term") as f:
            if len(f.read().split()) >= len(MODES):
                break
    except FileNotFoundError:
        pass
    time.sleep(0.01)
os.kill(reaper.pid, signal.SIGINT)
said = reaper.communicate(timeout=30)[0]
interrupted_at = time.monotonic()


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


left = orphans
while left and time.monotonic() < interrupted_at + 5:
    left = [pid for pid in orphans if running(pid)]
    time.sleep(0.01)
out = json.loads(said.strip().splitlines()[-1])
out["left"] = left
print(json.dumps(out), flush=True)
os._exit(0)  # pid 1 of the sandbox: its exit ends whatever is left in it
"""


def test_an_interrupted_reap_kills_what_it_was_ending_at_once_and_raises():
    modes = ["cgroup", "session"] if CGROUP_OK else ["session"]
    res = run_sandboxed(f"MODES = {modes!r}\n" + SCRIPT, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["interrupted"], out
    assert out["elapsed"] < 30, out  # far less than the 60 s grace
    assert out["left"] == [], out
