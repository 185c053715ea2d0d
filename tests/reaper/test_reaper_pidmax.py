"""Pid exhaustion: the reaper ends its selection with the pid space full, and starts no thread.

reap_orphans drives its teardowns (whole leftover cgroups and orphan trees,
at once) with the blocking driver terminate_tree uses: no event loop, no
thread pool, so a fork storm that took every pid does not stop it. The case
runs as pid 1 of a sandbox (support.sandbox: fresh pid, mount and cgroup
namespaces) whose pid_max is a few hundred pids (pid_max is per pid
namespace on recent kernels), so the storm fills that namespace only, the
root reaper can end nothing outside it, and everything dies with it.
"""

import json

import pytest

from support.pidspace import FORK_STORM, SMALL_PID_MAX
from support.reapkit import SANDBOX_ORPHANS
from support.sandbox import run_sandboxed
from support.spawnkit import CGROUP_OK, LINUX

pytestmark = pytest.mark.skipif(not LINUX, reason="pid namespaces are Linux-only")

SCRIPT = r"""
import json, os, subprocess, sys

orphans = [pid for mode in MODES for pid in orphaned(mode, "sleep 300 & sleep 300 & wait")]

# The reaper: its own process (a reaper never takes its own subtree, and pid 1 is every orphan's
# parent now), started before the storm, told to reap once the pid space is full.
REAPER = r'''
import json, os, sys, threading
import proctree
go, out = int(sys.argv[1]), int(sys.argv[2])
os.read(go, 1)
try:
    threading.Thread(target=lambda: None).start()
    full = False
except RuntimeError:
    full = True  # what the reaper's old thread pool met: no pid for a thread
threads = threading.active_count()
try:
    rep = proctree.reap_orphans(grace=1.0)
    res = {
        "ok": True,
        "full": full,
        "threads": [threads, threading.active_count()],
        "candidates": sorted(o.proc.pid for o in rep.candidates),
        "survivors": [p.pid for p in rep.survivors],
        "warnings": list(rep.warnings),
        "modes": sorted(t.mode for t in rep.teardowns),
    }
except Exception as exc:  # the bug: RuntimeError: can't start new thread
    res = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
os.write(out, json.dumps(res).encode())
'''
go_r, go_w = os.pipe()
out_r, out_w = os.pipe()
reaper = subprocess.Popen([sys.executable, "-c", REAPER, str(go_r), str(out_w)], pass_fds=(go_r, out_w))
os.close(go_r)
os.close(out_w)

# The storm (support.pidspace.FORK_STORM): it says when fork fails, then keeps taking every freed pid.
r, w = os.pipe()
storm = subprocess.Popen([sys.executable, "-c", STORM, str(w)], pass_fds=(w,))
os.close(w)
assert os.read(r, 16) == b"full\n"
os.write(go_w, b"x")
got = b""
while chunk := os.read(out_r, 65536):
    got += chunk
out = json.loads(got) if got else {"ok": False, "error": "the reaper said nothing"}
out["left"] = [pid for pid in orphans if running(pid)]
out["orphans"] = sorted(orphans)
print(json.dumps(out), flush=True)
os._exit(0)  # pid 1 of the sandbox: its exit ends the storm and everything else in it
"""


def test_reap_ends_its_selection_with_the_pid_space_full_and_starts_no_thread():
    modes = ["cgroup", "session"] if CGROUP_OK else ["session"]
    res = run_sandboxed(
        f"MODES = {modes!r}\nSTORM = {FORK_STORM!r}\n" + SMALL_PID_MAX + SANDBOX_ORPHANS + SCRIPT, timeout=180
    )
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["ok"], out["error"]
    assert out["full"], "the pid space was not full when the reaper ran"
    assert out["threads"][0] == out["threads"][1] == 1, out["threads"]
    assert out["left"] == [], out
    assert set(out["orphans"]) <= set(out["candidates"]), out
    assert out["survivors"] == [], out
    assert not [w for w in out["warnings"] if "teardown failed" in w], out["warnings"]
    if "cgroup" in modes:
        assert "cgroup" in out["modes"], out["modes"]  # the leftover cgroup ended whole, beside the trees
