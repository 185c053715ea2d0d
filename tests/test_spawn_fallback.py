"""contain="auto" falls back when the kernel refuses a mode, and .mode / .mode_reason say so.

The refusal is real: the owner runs under a seccomp filter (installed with
prctl through ctypes, inherited by the keeper) that makes
prctl(PR_SET_CHILD_SUBREAPER) fail with EPERM, as some sandboxes do. The
cgroup is made unavailable by the owner's own code, so that "auto" reaches
the subreaper mode at all.
"""

import json
import platform
import subprocess
import sys

import pytest

from support.spawnkit import alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp and subreapers are Linux's")

# (AUDIT_ARCH_*, __NR_prctl) of the architectures this test knows.
ARCHES = {"x86_64": (0xC000003E, 157), "aarch64": (0xC00000B7, 167)}

OWNER = r"""
import ctypes, errno, json, os, struct, sys
ARCH, NR_PRCTL = %(arch)d, %(nr)d
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 36, 38, 22, 2
LD_ABS, JEQ, RET = 0x20, 0x15, 0x06
ALLOW, EPERM = 0x7FFF0000, 0x00050000 | errno.EPERM
prog = [  # (code, jt, jf, k): EPERM for prctl(PR_SET_CHILD_SUBREAPER, ...), everything else allowed
    (LD_ABS, 0, 0, 4), (JEQ, 0, 5, ARCH),
    (LD_ABS, 0, 0, 0), (JEQ, 0, 3, NR_PRCTL),
    (LD_ABS, 0, 0, 16), (JEQ, 0, 1, PR_SET_CHILD_SUBREAPER),
    (RET, 0, 0, EPERM), (RET, 0, 0, ALLOW),
]
raw = b"".join(struct.pack("=HBBI", *ins) for ins in prog)
buf = ctypes.create_string_buffer(raw, len(raw))
class FProg(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fprog = FProg(len(prog), ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
assert libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
assert libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) == 0, ctypes.get_errno()
assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == -1 and ctypes.get_errno() == errno.EPERM

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
    arch = ARCHES.get(platform.machine())
    if arch is None:
        pytest.skip(f"no seccomp numbers for {platform.machine()} here")
    p = subprocess.run(
        [sys.executable, "-c", OWNER % {"arch": arch[0], "nr": arch[1]}],
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
