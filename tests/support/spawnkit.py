"""Helpers for the contained-spawning tests: modes available here, a daemonizing
command that reports its pids, and waits on pids that are bounded in time."""
import os
import select
import sys
import textwrap
import time

import pytest

import proctree
from proctree._containment import cgroup as _cgroup
from proctree._containment import marker as _marker
from proctree._containment.spawn import spawn

LINUX = sys.platform.startswith("linux")


def _cgroup_ok():
    if not LINUX:
        return False, "cgroups are Linux-only"
    try:
        path = _cgroup.create(os.getpid(), proctree.proc(os.getpid()).start_time, "probe")
    except _cgroup.Unavailable as exc:
        return False, str(exc)
    _cgroup.remove(path)
    return True, ""


CGROUP_OK, CGROUP_WHY = _cgroup_ok()
CONTAINING = [
    pytest.param("cgroup", marks=pytest.mark.skipif(not CGROUP_OK, reason=f"no writable cgroup v2: {CGROUP_WHY}")),
    pytest.param("subreaper", marks=pytest.mark.skipif(not LINUX, reason="PR_SET_CHILD_SUBREAPER is Linux-only")),
]
ALL_MODES = CONTAINING + ["session"]

# A command that double-forks a daemon into its own session (reparented away
# from the command at once), reports the daemon's pid on fd W, then either
# sleeps or exits. argv: W ignore_sigterm(0/1) then(sleep|exit)
DAEMONIZER = textwrap.dedent(r"""
    import os, signal, sys, time
    w, ignore, then = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
    ready_r, ready_w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            if ignore:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.write(w, b"daemon %d\n" % os.getpid())
            os.close(w)
            os.write(ready_w, b"x")  # only now may the command go on (and perhaps exit)
            time.sleep(300)
            os._exit(0)
        os._exit(0)
    os.close(ready_w)
    os.wait()
    os.read(ready_r, 1)
    os.write(w, b"cmd %d\n" % os.getpid())
    if then == "exit":
        os._exit(3)
    time.sleep(300)
""")


def read_lines(fd, n, timeout=15.0):
    """n lines from fd as a dict {word: int}, within timeout (never sleeps to guess)."""
    out, buf = {}, b""
    deadline = time.monotonic() + timeout
    while len(out) < n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"timed out waiting for pids, got {out}")
        data = os.read(fd, 4096)
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            k, v = line.decode().split()
            out[k] = int(v)
    return out


def alive(pid, start=None):
    try:
        p = proctree.proc(pid)
    except proctree.NoSuchProcess:
        return False
    return not p.is_zombie and (start is None or p.start_time == start)


def wait_gone(pids, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.01)
    return not any(alive(p) for p in pids)


def environ_marker(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return _marker.from_environ_block(f.read())


def cgroup_dirs():
    """Our own per-owner cgroup parents and the trees in them."""
    try:
        base = _cgroup.base_dir()
    except _cgroup.Unavailable:
        return []
    me = f"proctree-{os.getpid()}-"
    out = []
    for name in os.listdir(base):
        if name.startswith(me):
            out.append(name)
            out.extend(os.path.join(name, t) for t in os.listdir(os.path.join(base, name))
                       if os.path.isdir(os.path.join(base, name, t)))
    return out


def start_daemonizer(trees, pipe, mode, ignore=False, then="sleep", **kw):
    r, w = pipe
    t = spawn([sys.executable, "-c", DAEMONIZER, str(w), "1" if ignore else "0", then],
              contain=mode, pass_fds=(w,), **kw)
    trees.append(t)
    os.close(w)
    return t, read_lines(r, 2)
