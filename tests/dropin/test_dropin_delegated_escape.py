"""What escapes proctree.Popen's cgroup in a delegated subtree, without privilege: exactly what the mode table says.

An unprivileged owner (setpriv, uid 4242) runs in a cgroup v2 subtree chowned
to it (a delegation). Its command may write itself into any cgroup of that
subtree (the kernel allows a move wherever the writer may write the common
ancestor's cgroup.procs, which the delegation's owner owns), and so outlive
its SIGKILLed owner; it can never move above the subtree. The kernel stops
the move within the subtree only from inside a cgroup namespace on an
nsdelegate mount, and making one needs privilege (CAP_SYS_ADMIN). README's
and docs/containment.md's mode tables say so. Run in a pid namespace of its
own: whatever escapes dies with it.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

import proctree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))


def _cgroup2_mount() -> str | None:
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if fields[2] == "cgroup2":
                return fields[1]
    return None


pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux")
    or os.geteuid() != 0
    or shutil.which("setpriv") is None
    or shutil.which("unshare") is None
    or _cgroup2_mount() is None,
    reason="root (to delegate a subtree), setpriv, unshare and a cgroup v2 mount",
)

# Runs as root in the sandbox: delegates a subtree to uid 4242, starts the owner there as that uid, SIGKILLs it.
SANDBOX = r"""
import json, os, subprocess, sys, time
mount, root = sys.argv[1], sys.argv[2]
D = os.path.join(mount, f"proctree-test-delegated-{os.getpid()}-{time.monotonic_ns()}")
os.mkdir(D)
for f in ("", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"):
    os.chown(os.path.join(D, f), 4242, 4242)
OWNER = r'''
import os, sys, time
sys.path.insert(0, sys.argv[2])
import proctree
D, mount = sys.argv[1], sys.argv[3]
os.mkdir(os.path.join(D, "sibling"))
body = (
    "trap '' TERM; "
    "if echo $$ > %s/cgroup.procs 2>/dev/null; then echo above-moved; else echo above-refused; fi; "
    "echo $$ > %s/sibling/cgroup.procs && echo sibling-moved; exec sleep 300" % (mount, D)
)
p = proctree.Popen(["sh", "-c", body], stdout=-1, text=True)
print(p.pid, p.stdout.readline().strip(), p.stdout.readline().strip(), flush=True)
time.sleep(300)
'''
cmd = [
    "sh", "-c",
    f'echo $$ > {D}/cgroup.procs && exec setpriv --reuid 4242 --regid 4242 --clear-groups '
    f'{sys.executable} -c "$0" {D} {root} {mount}',
    OWNER,
]
owner = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
try:
    pid, above, sibling = owner.stdout.readline().split()
    uid = [int(x) for x in open(f"/proc/{pid}/status").read().split("Uid:")[1].split()[:1]][0]
    owner.kill()
    owner.wait()
    time.sleep(3.5)  # the holding tree's grace (2 s) and then some
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        where = open(f"/proc/{pid}/cgroup").read().strip().splitlines()[-1]
    except FileNotFoundError:
        state, where = "gone", None
    print(json.dumps({"uid": uid, "above": above, "sibling": sibling, "state": state,
                      "where": where, "subtree": "/" + os.path.relpath(D, mount)}))
finally:
    owner.kill()
    owner.wait()
    for _ in range(2):  # everything left in the delegated subtree, then its directories
        for top, dirs, files in os.walk(D, topdown=False):
            try:
                with open(os.path.join(top, "cgroup.kill"), "w") as f:
                    f.write("1")
            except OSError:
                pass
        time.sleep(0.3)
    for top, dirs, files in os.walk(D, topdown=False):
        os.rmdir(top)
"""


def test_an_unprivileged_command_escapes_only_within_its_delegated_subtree():
    out = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", SANDBOX, _cgroup2_mount(), ROOT],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode != 0 and (
        "ModuleNotFoundError" in out.stderr or "error while loading shared libraries" in out.stderr
    ):
        pytest.skip("uid 4242 cannot run this installation")  # a module, or the interpreter's library, unreadable
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["uid"] == 4242
    assert got["above"] == "above-refused"  # never above the delegation
    # What the mode table names: a move within the delegated subtree outlives the owner (no cgroup namespace
    # can be made without privilege to stop it).
    assert got["sibling"] == "sibling-moved"
    assert got["state"] in "RS" and got["where"] == f"0::{got['subtree']}/sibling"
