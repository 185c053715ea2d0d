"""contain="auto" falls back when the kernel refuses a mode, and .mode / .mode_reason say so.

The refusals are real: the owner runs under a seccomp filter
(tests/support/seccomp.py, inherited by the keeper) that makes one system
call fail, as sandboxes do: prctl(PR_SET_CHILD_SUBREAPER) (the cgroup is then
made unavailable by the owner's own code, so that "auto" reaches the
subreaper mode at all), or clone3, which the keeper uses to start the command
inside its cgroup.
"""

import errno
import json
import os
import platform
import subprocess
import sys

import pytest

from support import seccomp
from support.spawnkit import CGROUP_OK, alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp and subreapers are Linux's")

OWNER = r"""
import ctypes, errno, json, os, sys
%(prelude)s
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(36, 1, 0, 0, 0) == -1 and ctypes.get_errno() == errno.EPERM  # PR_SET_CHILD_SUBREAPER

import proctree
from proctree._containment import cgroup
def no_cgroup(*a, **k):
    raise cgroup.Unavailable(errno.EACCES, "no cgroup for this test")
cgroup.create = no_cgroup
out = {}
try:
    proctree.spawn(["true"], contain="subreaper")
except proctree.ContainmentUnavailable as exc:
    out["subreaper"] = str(exc)
t = proctree.spawn(["sh", "-c", "sleep 300 & echo $!; wait"], stdout=-1, text=True)
out["pid"], out["mode"], out["reason"] = t.pid, t.mode, t.mode_reason
out["child"] = int(t.stdout.readline())
out["members"] = sorted(p.pid for p in t.members())
rep = t.terminate(0.5)
out["found"] = sorted(p.pid for p in rep.found)
out["ok"] = rep.ok
print(json.dumps(out), flush=True)
"""


def test_auto_falls_back_to_session_when_the_subreaper_is_refused():
    if seccomp.arch() is None:
        pytest.skip(f"no seccomp numbers for {platform.machine()} here")
    prelude = seccomp.prelude("prctl", errno.EPERM, arg0=36)  # PR_SET_CHILD_SUBREAPER
    p = subprocess.run(
        [sys.executable, "-c", OWNER % {"prelude": prelude}],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert "contain='subreaper' failed" in out["subreaper"] and "Operation not permitted" in out["subreaper"]
    assert out["mode"] == "session"
    assert "cgroup: no cgroup for this test" in out["reason"]
    assert "subreaper: Operation not permitted" in out["reason"]
    assert {out["pid"], out["child"]} <= set(out["members"])
    assert {out["pid"], out["child"]} <= set(out["found"]) and out["ok"]
    assert not alive(out["pid"]) and not alive(out["child"])


CGROUP_OWNER = r"""
import json, sys
%(prelude)s
import proctree
out = {}
try:
    t = proctree.spawn(["sh", "-c", "grep '^0::' /proc/self/cgroup; sleep 30"], contain="cgroup", stdout=-1, text=True)
    out["cgroup"], out["own"] = t.cgroup, t.stdout.readline().strip()
    t.terminate(0.5)
except proctree.ContainmentUnavailable as exc:
    out["refused"] = str(exc)
t = proctree.spawn(["true"])
out["auto"], out["reason"] = t.mode, t.mode_reason
t.wait()
print(json.dumps(out), flush=True)
"""


@pytest.mark.skipif(not CGROUP_OK, reason="no writable cgroup v2 here")
def test_without_clone3_the_command_joins_its_cgroup_itself():
    """clone3 refused with ENOSYS (an old kernel, Docker's default profile): forked, it joins the cgroup before exec."""
    if seccomp.arch() is None:
        pytest.skip(f"no seccomp numbers for {platform.machine()} here")
    prelude = seccomp.prelude("clone3", errno.ENOSYS)
    p = subprocess.run(
        [sys.executable, "-c", CGROUP_OWNER % {"prelude": prelude}], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    # /proc/self/cgroup's v2 line ends with the tree cgroup's path below the mount.
    assert out["own"].endswith(out["cgroup"].split("/proctree-", 1)[1]), out
    assert out["auto"] == "cgroup" and out["reason"] is None


@pytest.mark.skipif(not CGROUP_OK, reason="no writable cgroup v2 here")
def test_a_cgroup_the_keeper_refuses_makes_auto_fall_back(monkeypatch, tmp_path, trees):
    """The keeper's own refusal (err cgroup): handed a directory that is no cgroup v2 tree cgroup, it starts nothing.

    The owner is made to create such a directory (a real cgroup that cannot
    take processes needs a machine-wide controller change, not for a shared
    machine); the refusal, the error and the fallback are the real ones.
    """
    import proctree
    from proctree._containment import cgroup as _cgroup

    made = []

    def not_a_cgroup(owner_pid, owner_start, name):
        d = tmp_path / f"proctree-{owner_pid}-{owner_start}" / name
        d.mkdir(parents=True)
        made.append(d)
        return str(d)

    monkeypatch.setattr(_cgroup, "create", not_a_cgroup)
    monkeypatch.setattr(_cgroup, "remove", lambda path: os.rmdir(path))
    with pytest.raises(proctree.ContainmentUnavailable, match="cannot start the command in .*Invalid argument"):
        proctree.spawn(["sleep", "60"], contain="cgroup")
    t = proctree.spawn(["sleep", "60"])
    trees.append(t)
    assert t.mode == "subreaper" and t.mode_reason == "cgroup: Invalid argument"
    assert made and not any(d.exists() for d in made)
