"""One suite run in a session of its own, bounded in time, and what it left behind.

The run's pytest starts as a session leader with a marker of its own in the
environment (OUTSIDE_SUITES_RUN=<random>). Afterwards every process still in
that session, or carrying that marker, was started by this run and is left
over: it is listed and ended (SIGKILL through a pidfd, after checking its
start time), so the runner ends only what it started. A daemon that both
leaves the session and scrubs its environment escapes this check.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

MARKER = "OUTSIDE_SUITES_RUN"
SETTLE_SECONDS = 3.0  # what a watchdog or keeper still ending processes may take after pytest exits


@dataclass
class Leftover:
    pid: int
    start_time: int
    cmdline: str


@dataclass
class SuiteRun:
    returncode: int
    wall: float
    timed_out: bool
    leftovers: list[Leftover] = field(default_factory=list)


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (index 0 is the state), or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rindex(b")") + 2 :].decode().split()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _carries(pid: int, marker: bytes) -> bool:
    try:
        return marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def find_leftovers(session: int, token: str) -> list[Leftover]:
    """Processes (not zombies) in the run's session or carrying its marker."""
    marker = f"{MARKER}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        fields = _stat_fields(pid)
        if fields is None or fields[0] in ("Z", "X"):
            continue
        # fields: state ppid pgrp session ... starttime is stat's 22nd field, here index 19
        if int(fields[3]) == session or _carries(pid, marker):
            found.append(Leftover(pid, int(fields[19]), _cmdline(pid)))
    return found


def end(leftovers: list[Leftover]) -> None:
    """SIGKILL each leftover that is still the same process (pid and start time), through a pidfd."""
    for proc in leftovers:
        try:
            fd = os.pidfd_open(proc.pid)
        except OSError:
            continue
        try:
            fields = _stat_fields(proc.pid)
            if fields is not None and int(fields[19]) == proc.start_time:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(fd)


def run_suite(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float, log: Path) -> SuiteRun:
    """Run cmd as a session leader, at most timeout seconds; list and end what it left."""
    token = uuid.uuid4().hex
    env = {**env, MARKER: token}
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        timed_out = False
        try:
            returncode = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            # The group is the one this runner's child leads: ours to end.
            os.killpg(proc.pid, signal.SIGKILL)
            returncode = proc.wait()
    wall = time.monotonic() - started
    deadline = time.monotonic() + SETTLE_SECONDS
    leftovers = find_leftovers(proc.pid, token)
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.2)
        leftovers = find_leftovers(proc.pid, token)
    end(leftovers)
    return SuiteRun(returncode, wall, timed_out, leftovers)
