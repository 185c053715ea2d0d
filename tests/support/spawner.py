"""Spawner: helper processes for the table tests, each reporting its pids through a pipe.

Every helper runs PRELUDE first: report(pid...) writes one line to the pipe;
park() blocks until the test closes its stdin (or 120 s pass: nothing runs
forever). close() kills what is still the same process (pid + start time).
"""

import os
import select
import signal
import subprocess
import sys
import textwrap
import time

from .procfs import read_all, read_proc

# Run by every helper: report(pid...) writes one line to the pipe; park()
# blocks until the test closes our stdin (or 120 s pass: nothing runs forever).
PRELUDE = r"""
import ctypes, os, select, signal, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
OUT = int(sys.argv[1])
def report(*pids):
    os.write(OUT, (" ".join(map(str, pids)) + "\n").encode())
def set_name(raw):
    libc.prctl(15, ctypes.c_char_p(raw), 0, 0, 0)  # PR_SET_NAME
def park():
    select.select([0], [], [], 120)
    os._exit(0)
"""


class Spawner:
    """Starts helper interpreters, registers every pid they report, ends them all."""

    def __init__(self):
        self.popens = []
        self.known = []  # (pid, start_time)

    def register(self, pid):
        row = read_proc(pid)
        assert row is not None, f"reported pid {pid} is not there"
        self.known.append((pid, row[6]))

    def start(self, body, lines=1, timeout=20, not_pids=()):
        """Run PRELUDE + body; return (helper pid, [pids on each reported line]).

        Every number reported is registered as a process to end, except on the
        line numbers in not_pids (thread ids and the like)."""
        r, w = os.pipe()
        try:
            p = subprocess.Popen(
                [sys.executable, "-W", "ignore::DeprecationWarning", "-c", PRELUDE + textwrap.dedent(body), str(w)],
                pass_fds=(w,),
                stdin=subprocess.PIPE,
            )
        finally:
            os.close(w)
        self.popens.append(p)
        self.register(p.pid)
        got, buf = [], b""
        deadline = time.monotonic() + timeout
        try:
            while len(got) < lines:
                left = deadline - time.monotonic()
                assert left > 0, "helper did not report in time"
                if not select.select([r], [], [], left)[0]:
                    continue
                chunk = os.read(r, 4096)
                assert chunk, f"helper exited early (rc={p.poll()})"
                buf += chunk
                while b"\n" in buf and len(got) < lines:
                    line, buf = buf.split(b"\n", 1)
                    pids = [int(x) for x in line.split()]
                    for pid in pids:
                        if pid != p.pid and len(got) not in not_pids:
                            self.register(pid)
                    got.append(pids)
        finally:
            os.close(r)
        return p.pid, got

    def signal(self, pid, sig):
        """Signal a process we started, only if it is still the same one."""
        for kpid, start in self.known:
            if kpid == pid:
                row = read_proc(pid)
                assert row is not None and row[6] == start, "not the process we started"
                os.kill(pid, sig)
                return
        raise AssertionError(f"{pid} was not started by this test")

    def adopt_descendants(self):
        """Register every process below the ones we know (helpers fork without telling us)."""
        table = read_all()
        kids = {}
        for row in table.values():
            kids.setdefault(row[1], []).append(row)
        known = {pid for pid, _ in self.known}
        queue = [pid for pid in known if pid in table and table[pid][6] == dict(self.known).get(pid)]
        while queue:
            for row in kids.get(queue.pop(), ()):
                if row[0] not in known:
                    known.add(row[0])
                    self.known.append((row[0], row[6]))
                    queue.append(row[0])

    def close(self):
        self.adopt_descendants()
        for p in self.popens:
            if p.stdin:
                p.stdin.close()  # helpers park on stdin: EOF lets them exit and reap by themselves
        deadline = time.monotonic() + 5
        for p in self.popens:
            try:
                p.wait(timeout=max(0.01, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for pid, start in reversed(self.known):
            row = read_proc(pid)
            if row is None or row[6] != start or pid in (0, 1, os.getpid()):
                continue
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.popens:
            p.wait(timeout=10)
