"""The run's subreaper, a process of its own between the pytest you started and the one that runs the tests.

    python -c "$(cat reaper.py)" ARGV...      (handoff.py runs its source: no import of proctree)

Started by handoff.py. It becomes a child subreaper, starts ARGV (pytest,
with PROCTREE_PYTEST_HELPER naming it) as its only child, and then waits for
any child: the orphans the tests leave come back here, not to the pytest
that runs the tests, so a test sees the process world it sees without the
plugin (os.waitpid of a daemon fails with ECHILD; a daemon that exits is
reaped at once, so os.kill(pid, 0) stops finding it). Once pytest exits it
exits with pytest's status, or dies of the signal pytest died of. It dies
with its parent (PR_SET_PDEATHSIG) and so does pytest with it: a SIGKILLed
run leaves it to the watchdog.

The late check: processes a live object still held at the session's end
(docs/pytest.md, "Held is not leaked") are checked here, once pytest's
interpreter has exited and so every atexit handler a library registered has
run (execnet's default group ends its gateways in one). pytest lists them in
the file PROCTREE_PYTEST_LATE names; those still running (after the settle)
are leaks: reported on stderr, ended by identity (a pidfd, then the start
time checked), and under --proctree-leaks=fail a status of 0 becomes 1. The
run's watchdog watches this process, not pytest, so a kill at any point
still leaves nothing.

Signals: relay() is shared with the outer pytest (handoff.py). A process
between a parent and pytest must be invisible: every signal a process sends
it goes on to pytest, once; one the kernel sends (Ctrl-C, Ctrl-\\, Ctrl-Z
from the terminal, which go to the whole foreground group) reached pytest
directly and is not passed again; pytest stopping stops it (so a shell sees
a stopped job) and pytest dying of a signal kills it with that signal.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

TYPE_CHECKING = False  # typing costs import time in this small process; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

LINUX_ONLY = True  # the hand-off (handoff.py) starts it on Linux alone: prctl
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
ENV = "PROCTREE_PYTEST_HELPER"
LATE_ENV = "PROCTREE_PYTEST_LATE"  # the file where pytest lists what a live object held at the session's end
# si_code of a signal a process sent (kill, sigqueue, tgkill); the kernel's own (the terminal's) are positive.
_SENT_BY_A_PROCESS = (0, -1, -6)
_STOPS = (signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)
_POLL_SECONDS = 0.5  # SIGCHLD wakes the wait at once; this only bounds a missed one
# How long after a process group's signal the outer pytest's copy of it may come (it passes it at once).
_GROUP_SECONDS = 2.0


def relayed_signals() -> set[int]:
    """The signals to pass down: every one that can be caught and is not ignored here (an ignored one is
    ignored below too: the ignoring is inherited), but SIGCHLD, which is news of this process's children."""
    uncatchable = (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD)
    return {s for s in signal.valid_signals() if s not in uncatchable and signal.getsignal(s) is not signal.SIG_IGN}


def _stop_like(signum: int) -> None:
    """Stop this process with the signal that stopped the child, until something continues it."""
    if signum == signal.SIGSTOP:
        os.kill(os.getpid(), signum)
        return
    previous = signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)  # pending: it is blocked
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})  # delivered here: this process stops in this call
    signal.pthread_sigmask(signal.SIG_BLOCK, {signum})
    if previous is not None:
        signal.signal(signum, previous)


def die_like(signum: int) -> None:
    """Die of the signal the child died of (returns only if that signal does not kill, the caller exits)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    if soft != 0:  # a core of this process is of no use, and would overwrite the tests' own
        resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    if signum not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})


def _child_news(child: int, reap_all: bool) -> int | None:
    """Reap what has changed: the child's wait status once it has ended (else None); a stop is mirrored."""
    while True:
        try:
            pid, status = os.waitpid(-1 if reap_all else child, os.WNOHANG | os.WUNTRACED)
        except ChildProcessError:
            return -1
        if pid == 0:
            return None
        if pid != child:
            continue  # an orphan the subreaper adopted, reaped
        if not os.WIFSTOPPED(status):
            return status
        if os.WSTOPSIG(status) in _STOPS:
            _stop_like(os.WSTOPSIG(status))


def relay(child: int, relayed: set[int], only_from: int | None = None, reap_all: bool = False) -> int:
    """Pass the signals sent to this process on to child until it ends; return its wait status (-1: lost).

    relayed (and SIGCHLD) must be blocked in this thread, from before child was started. reap_all: reap every
    child (the subreaper's adopted orphans). only_from (the subreaper: its parent, the outer pytest): pass only
    what that process sent, and not what it passes on of a signal sent to the whole process group. A
    signal some other process sends here is such a group's (nobody else knows this pid): pytest had its
    own copy, and the outer pytest's copy, passed on, arrives here after this one (or merges with it while
    it is pending)."""
    waited = relayed | {signal.SIGCHLD}
    group_copies: dict[int, float] = {}  # signal -> when a copy of a group's signal came
    while True:
        info = signal.sigtimedwait(waited, _POLL_SECONDS)
        if info is not None and info.si_signo != signal.SIGCHLD and info.si_code in _SENT_BY_A_PROCESS:
            signum = info.si_signo
            if only_from is not None and info.si_pid != only_from:
                group_copies[signum] = time.monotonic()
            elif (
                only_from is not None and time.monotonic() - group_copies.pop(signum, -_GROUP_SECONDS) < _GROUP_SECONDS
            ):
                pass  # the outer pytest's copy of that group's signal: pytest had it
            else:
                try:
                    os.kill(child, signum)
                except ProcessLookupError:
                    pass
        status = _child_news(child, reap_all)
        if status is not None:
            return status


def _prctl(option: int, value: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(option, value, 0, 0, 0) == 0


def _child_setup() -> None:
    """In pytest, before its exec: die with this process, and take every signal as it comes."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def started(pid: int) -> int | None:
    """pid's start time (clock ticks after boot, as proctree reads it) while it runs; None once it is gone or a
    zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # the name may hold spaces and ')': the last ')' ends it
    if len(fields) < 20 or fields[0] in (b"Z", b"X", b"x"):
        return None
    return int(fields[19])


Late = tuple[int, int, str]  # (pid, start time, its report line)


def _reap_orphans() -> None:
    """Reap every child that has ended (pytest is gone: its orphans, the listed ones among them, are ours)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _still_running(procs: list[Late], seconds: float) -> list[Late]:
    """Those of procs still running after up to seconds; meanwhile the zombies that came here are reaped."""
    deadline = time.monotonic() + seconds
    while True:
        _reap_orphans()
        procs = [p for p in procs if started(p[0]) == p[1]]
        if not procs or time.monotonic() >= deadline:
            return procs
        time.sleep(0.02)


def _send(procs: list[Late], signum: int) -> None:
    """signum to each of procs that is still the process it was: its start time is checked once a pidfd holds
    it, so a reused pid is never signalled (without pidfds, the check comes just before the kill)."""
    for pid, start, _ in procs:
        try:
            fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            fd = None
        try:
            if started(pid) != start:
                continue
            if fd is None:
                os.kill(pid, signum)
            else:
                signal.pidfd_send_signal(fd, signum)
        except OSError:
            pass
        finally:
            if fd is not None:
                os.close(fd)


def _listed(doc: Any) -> dict[str, Any]:
    """What pytest listed (late.py's write), checked: ValueError for anything of another shape."""
    if not isinstance(doc, dict) or doc.get("mode") not in ("fail", "warn", "kill"):
        raise ValueError("not a list of held processes")
    settle, grace, procs = doc.get("settle"), doc.get("grace"), doc.get("procs")
    for seconds in (settle, grace):
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds <= 86400:
            raise ValueError("not a list of held processes")
    if not isinstance(procs, list):
        raise ValueError("not a list of held processes")
    out: list[Late] = []
    for item in procs:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[2], str)):
            raise ValueError("not a list of held processes")
        pid, start = item[0], item[1]
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (pid, start)) or pid <= 1 or start < 0:
            raise ValueError("not a list of held processes")
        out.append((pid, start, item[2]))
    return {"mode": doc["mode"], "settle": settle, "grace": grace, "procs": out}


def late_check(path: str, status: int) -> int:
    """The late check (see the module's docstring) of what pytest listed in path; the wait status to exit with."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        os.unlink(path)
        listed = _listed(json.loads(text)) if text else None
    except (OSError, ValueError):
        return status
    if not listed:
        return status
    procs = listed["procs"]
    left = _still_running(procs, float(listed["settle"]))
    if not left:
        return status
    _send(left, signal.SIGTERM)
    rest = _still_running(left, float(listed["grace"]))
    _send(rest, signal.SIGKILL)
    _still_running(rest, 5.0)
    fail = listed["mode"] == "fail" and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    lines = [
        "proctree: processes a live object still held at the session's end were still running after pytest "
        "exited (every atexit handler had run), now ended:",
        *(f"  {line}" for _, _, line in left),
    ]
    if fail:
        lines.append("proctree: the run failed: processes were still running at its end (--proctree-leaks=fail)")
    try:
        os.write(2, ("\n".join(lines) + "\n").encode("utf-8", "replace"))
    except OSError:
        pass
    return 1 << 8 if fail else status  # the wait status of an exit with 1


def main(argv: list[str]) -> int:
    parent = os.getppid()
    relayed = relayed_signals()
    signal.pthread_sigmask(signal.SIG_BLOCK, relayed | {signal.SIGCHLD})  # blocked from the start by handoff.py
    if not _prctl(_PR_SET_CHILD_SUBREAPER, 1) or not _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL):
        return 70
    if os.getppid() != parent:  # the pytest that started us is gone already
        return 70
    env = dict(os.environ, **{ENV: str(os.getpid())})
    env.pop(LATE_ENV, None)  # an enclosing run's, if any: never this one's
    try:
        fd, late = tempfile.mkstemp(prefix="proctree-late-", suffix=".json")
        os.close(fd)
        env[LATE_ENV] = late
    except OSError:  # no writable temporary folder: what is held at the session's end is reported there
        late = ""
    try:
        child = subprocess.Popen(argv, env=env, preexec_fn=_child_setup, close_fds=False)
        status = relay(child.pid, relayed, only_from=parent, reap_all=True)
        if status != -1 and late:
            status = late_check(late, status)
    finally:
        if late:
            try:
                os.unlink(late)
            except OSError:
                pass
    if status == -1:
        return 70
    if os.WIFSIGNALED(status):
        die_like(os.WTERMSIG(status))
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))  # with -c, sys.argv[0] is "-c"
