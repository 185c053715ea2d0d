"""The demo's own way to start a process tree that says where it is, and to end it.

A scene's tree script runs SCRIPT_HELPERS first: `report(role)` writes
"role pid" on the pipe whose fd is argv[1], so the scene learns every pid
from the tree itself instead of guessing by sleeping. `Started` records each
reported process by identity (pid + start time) as it is heard of, so that
`end()` can SIGKILL exactly those, and only while they are still the same
processes, whatever happened in the scene.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import proctree
from proctree import _fds

# `python -c` puts the working directory first on sys.path: run from a source
# checkout with proctree installed elsewhere, a script's `import proctree` would
# find the uncompiled sources. The scripts import the package this one is.
_IMPORT_PATH = f"import sys; sys.path.insert(0, {os.path.dirname(os.path.dirname(proctree.__file__))!r})\n"

SCRIPT_HELPERS = r"""
import os, sys, time
REPORTS = int(sys.argv[1])
def report(role, pid=None):
    os.write(REPORTS, ("%s %d\n" % (role, pid or os.getpid())).encode())
def wait_forever():
    while True:
        time.sleep(1000)
def fork_into(fn):
    # fn runs in a child that never returns into the caller's code.
    pid = os.fork()
    if pid == 0:
        try:
            fn()
        finally:
            os._exit(0)
    return pid
"""


class Started:
    """Every process a scene's trees reported, by identity; end() kills what is left of them."""

    def __init__(self) -> None:
        self.identities: dict[int, int] = {}  # pid -> start time
        self.popens: list[subprocess.Popen] = []
        self.trees: list[proctree.Tree] = []  # the contained trees it started: ended first, at once

    def record(self, pid: int) -> proctree.Proc | None:
        """The live process behind a reported pid (recorded by identity), or None if it is gone."""
        try:
            p = proctree.proc(pid)
        except proctree.NoSuchProcess:
            return None
        self.identities.setdefault(pid, p.start_time)
        return None if p.is_zombie else p

    def still_running(self, pid: int) -> bool:
        start = self.identities.get(pid)
        try:
            p = proctree.proc(pid)
        except proctree.NoSuchProcess:
            return False
        return p.start_time == start and not p.is_zombie

    def start(self, script: str, expected: int, *, launch=subprocess.Popen, timeout: float = 20.0, **kwargs):
        """Run SCRIPT_HELPERS + script, with the report pipe as argv[1], by launch(argv,
        pass_fds=..., **kwargs) (Popen, or proctree.spawn); return (what launch returned,
        the first `expected` (role, pid) reports: fewer if the tree failed or timed out)."""
        r, w = os.pipe()
        try:
            handle = launch(
                [sys.executable, "-c", _IMPORT_PATH + SCRIPT_HELPERS + script, str(w)], pass_fds=(w,), **kwargs
            )
        finally:
            os.close(w)
        if isinstance(handle, subprocess.Popen):
            self.popens.append(handle)
        elif isinstance(handle, proctree.Tree):
            self.trees.append(handle)
        try:
            return handle, self._read(r, expected, timeout)
        finally:
            os.close(r)

    def _read(self, fd: int, expected: int, timeout: float) -> list[tuple[str, int]]:
        reports: list[tuple[str, int]] = []
        buf = b""
        deadline = time.monotonic() + timeout
        while len(reports) < expected:
            left = deadline - time.monotonic()
            if left <= 0 or not _fds.readable([fd], left):
                break
            data = os.read(fd, 4096)
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                role, _, pid = line.decode().rpartition(" ")
                self.record(int(pid))
                reports.append((role, int(pid)))
        return reports

    def end(self) -> None:
        """End the trees it started (no grace), then SIGCONT + SIGKILL whatever of ours is still the
        same process; reap our children."""
        for tree in self.trees:
            tree.terminate(grace=0)
        for _ in range(3):
            left = [pid for pid in self.identities if pid > 1 and pid != os.getpid() and self.still_running(pid)]
            for pid in left:
                try:
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if not left:
                break
            time.sleep(0.05)
        for p in self.popens:
            try:
                p.wait(timeout=5)
            except (subprocess.TimeoutExpired, ChildProcessError):
                pass


@contextlib.contextmanager
def scene(name, out):
    """A scene's body, given its Started: a failure is reported and swallowed (a scene does not crash
    the tour; the code after the block returns the failed result), and whatever it started is ended."""
    started = Started()  # every process the scene starts: whatever happens, none outlives it
    try:
        yield started
    except Exception as exc:
        out.write(f"{name} scene failed: {exc!r}\n")
    finally:
        started.end()
