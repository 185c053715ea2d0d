"""An interrupted reap (Ctrl-C during the grace) SIGKILLs what it was ending at once, then raises.

The blocking driver aborts every teardown still running: a leftover cgroup
ends by cgroup.kill, an orphan tree by the engine's abort, without waiting
out the grace. Runs as root in a sandbox (support.sandbox: fresh pid, mount
and cgroup namespaces), so the reaper can end nothing outside it.
"""

import json

import pytest

from support.reapkit import SANDBOX_ORPHANS
from support.sandbox import run_sandboxed
from support.spawnkit import CGROUP_OK, LINUX

pytestmark = pytest.mark.skipif(not LINUX, reason="pid namespaces are Linux-only")

SCRIPT = r"""
import json

# Each tree: sh, whose TERM handler writes a line to /tmp/term, and two sleeps that ignore TERM.
TREE = "trap '' TERM; sleep 300 & sleep 300 & trap 'echo $$ >> /tmp/term' TERM; while :; do wait; done"
orphans = [pid for mode in MODES for pid in orphaned(mode, TREE)]

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
    res = run_sandboxed(f"MODES = {modes!r}\n" + SANDBOX_ORPHANS + SCRIPT, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["interrupted"], out
    assert out["elapsed"] < 30, out  # far less than the 60 s grace
    assert out["left"] == [], out
