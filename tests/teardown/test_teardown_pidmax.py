"""Pid exhaustion: a fork storm that fills the pid space still gets a teardown report, never an exception.

The blocking teardown starts no thread and no event loop (a thread needs a
pid, and a full pid space is exactly when a tree must be ended). Each case
runs as pid 1 of a fresh PID namespace whose pid_max is the kernel's
few hundred pids (pid_max is per namespace here), so the storm fills that namespace
only and dies with it.
"""

import json

import pytest

from support.pidspace import FORK_STORM, SMALL_PID_MAX
from support.spawnkit import CGROUP_OK, LINUX
from support.treekit import run_in_pid_namespace

pytestmark = pytest.mark.skipif(not LINUX, reason="pid namespaces are Linux-only")

SCRIPT = r"""
import json, os, sys, time
import proctree

out = {}
for run in range(3):
    r, w = os.pipe()
    t = proctree.spawn([sys.executable, "-c", STORM, str(w)], contain=MODE, pass_fds=(w,))
    os.close(w)
    assert os.read(r, 16) == b"full\n"
    os.close(r)
    try:
        rep = t.terminate(grace=0.5)
    except Exception as exc:  # the bug: RuntimeError: can't start new thread
        out[run] = {"error": f"{type(exc).__name__}: {exc}"}
        t.kill()
        continue
    out[run] = {"ok": rep.ok, "found": len(rep.found), "left": len(t.members())}
    # As pid 1 of the namespace, reap the storm's orphans (each zombie holds a pid).
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
print(json.dumps(out))
"""


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param("cgroup", marks=pytest.mark.skipif(not CGROUP_OK, reason="no writable cgroup v2")),
        "subreaper",
        "session",
    ],
)
def test_terminate_under_a_fork_storm_that_fills_the_pid_space_returns_a_report(mode):
    res = run_in_pid_namespace(f"MODE = {mode!r}\nSTORM = {FORK_STORM!r}\n" + SMALL_PID_MAX + SCRIPT, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "can't start new thread" not in res.stderr, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    if "skip" in out:
        pytest.skip(out["skip"])
    for run, got in out.items():
        assert "error" not in got, f"run {run}: {got['error']}"
        assert got["ok"] and got["found"] > 100 and got["left"] == 0, (run, got)
