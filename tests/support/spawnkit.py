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
from proctree._containment.evidence import marker as _marker
from proctree._containment.spawn import spawn

from .stubborn import ignore_polite_signals_py

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
# sleeps or exits. argv: W stubborn(0/1: the daemon survives the polite signals, support/stubborn.py) then(sleep|exit)
DAEMONIZER = textwrap.dedent(rf"""
    import os, signal, sys, time
    w, ignore, then = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
    ready_r, ready_w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            if ignore:
                {ignore_polite_signals_py()}
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


def end_daemon(pid):
    """Kill a daemon we started if it is still ours (it carries this run's leak marker)."""
    try:
        p = proctree.proc(pid)
        with open(f"/proc/{pid}/environ", "rb") as f:
            if os.environ["PROCTREE_TEST_RUN"].encode() in f.read():
                os.kill(p.pid, 9)  # SIGKILL
    except (OSError, proctree.NoSuchProcess):
        pass


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
            out.extend(
                os.path.join(name, t)
                for t in os.listdir(os.path.join(base, name))
                if os.path.isdir(os.path.join(base, name, t))
            )
    return out


def start_daemonizer(trees, pipe, mode, ignore=False, then="sleep", **kw):
    r, w = pipe
    t = spawn(
        [sys.executable, "-c", DAEMONIZER, str(w), "1" if ignore else "0", then], contain=mode, pass_fds=(w,), **kw
    )
    trees.append(t)
    os.close(w)
    return t, read_lines(r, 2)


# ---------------------------------------------------------------------------
# Driving a keeper program directly, through the keeper protocol only.


def keeper_command():
    """The keeper program under test: PROCTREE_KEEPER (a command line), else the package's, as spawn() starts it."""
    import shlex

    from proctree._containment import launch as _launch

    cmd = os.environ.get("PROCTREE_KEEPER")
    return shlex.split(cmd) if cmd else [_launch._KEEPER]


class KeeperRun:
    """One keeper started by this process (its owner) as spawn() starts one, with the argv of protocol.KeeperArgs.

    In cgroup mode the keeper starts the command inside the tree's cgroup, as
    under spawn(). status() reads the status lines back as records.
    """

    def __init__(
        self,
        mode,
        argv,
        *,
        grace=1.0,
        keep_orphans=False,
        exe=None,
        pass_fds=(),
        cgroup=None,
        receipts=None,
        env=None,
        pty=None,
        stop_signal=None,
    ):
        import signal
        import subprocess

        from proctree._containment import protocol

        self.cgroup = cgroup
        self.receipts = receipts
        self._buf = b""
        self.status_r, w = os.pipe()
        args = protocol.KeeperArgs(
            status_fd=w,
            mode=mode,
            owner_pid=os.getpid(),
            grace=grace,
            keep_orphans=keep_orphans,
            cgroup=cgroup,
            restore_signals=True,
            exe=exe,
            receipts=receipts,
            pty=pty is not None,
            stop_signal=signal.SIGTERM if stop_signal is None else stop_signal,
            argv=tuple(argv),
        )
        fds = (w,) + tuple(pass_fds)
        # pty: a slave fd, handed to the keeper as its stdio (pty mode).
        stdio = {} if pty is None else dict(stdin=pty, stdout=pty, stderr=pty)
        self.popen = subprocess.Popen(
            keeper_command() + args.to_argv(), pass_fds=fds, start_new_session=True, env=env, **stdio
        )
        os.close(w)

    def receipt_path(self):
        """Where the keeper expects its receipt: <receipts>/<keeper pid>-<keeper start>.json."""
        from proctree._containment import protocol

        return os.path.join(
            self.receipts, protocol.receipt_name(self.popen.pid, proctree.proc(self.popen.pid).start_time)
        )

    def place_receipt(self):
        """Put a receipt where the keeper will look (as the owner does after Ok); its path."""
        path = self.receipt_path()
        with open(path, "w") as f:
            f.write("{}")
        return path

    def status(self, timeout=15.0):
        """The next status record, or None at EOF; AssertionError after timeout."""
        from proctree._containment import protocol

        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.status_r], [], [], left)[0]:
                raise AssertionError("timed out waiting for a status line from the keeper")
            data = os.read(self.status_r, 4096)
            if not data:
                return None
            self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        return protocol.parse_status(line)

    def close(self):
        """End the keeper (and what it started, by the keeper's own descendants) and reap it; remove the cgroup."""
        from proctree._containment import cgroupworld

        try:
            if self.popen.poll() is None:
                try:
                    proctree.terminate_tree(self.popen.pid, grace=0.5)
                except proctree.NoSuchProcess:
                    pass
            self.popen.wait(10)
        finally:
            os.close(self.status_r)
            if self.cgroup is not None and os.path.exists(self.cgroup):
                cgroupworld.terminate(self.cgroup, 0)
                _cgroup.remove(self.cgroup)


def new_cgroup(name):
    """A tree cgroup of this process's own, as spawn() makes one."""
    return _cgroup.create(os.getpid(), proctree.proc(os.getpid()).start_time, name)
