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

Signals: relay() is shared with the outer pytest (handoff.py). A process
between a parent and pytest must be invisible: every signal a process sends
it goes on to pytest, once; one the kernel sends (Ctrl-C, Ctrl-\\, Ctrl-Z
from the terminal, which go to the whole foreground group) reached pytest
directly and is not passed again; pytest stopping stops it (so a shell sees
a stopped job) and pytest dying of a signal kills it with that signal.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import sys
import time

LINUX_ONLY = True  # the hand-off (handoff.py) starts it on Linux alone: prctl
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
ENV = "PROCTREE_PYTEST_HELPER"
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


def main(argv: list[str]) -> int:
    parent = os.getppid()
    relayed = relayed_signals()
    signal.pthread_sigmask(signal.SIG_BLOCK, relayed | {signal.SIGCHLD})  # blocked from the start by handoff.py
    if not _prctl(_PR_SET_CHILD_SUBREAPER, 1) or not _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL):
        return 70
    if os.getppid() != parent:  # the pytest that started us is gone already
        return 70
    env = dict(os.environ, **{ENV: str(os.getpid())})
    child = subprocess.Popen(argv, env=env, preexec_fn=_child_setup, close_fds=False)
    status = relay(child.pid, relayed, only_from=parent, reap_all=True)
    if status == -1:
        return 70
    if os.WIFSIGNALED(status):
        die_like(os.WTERMSIG(status))
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))  # with -c, sys.argv[0] is "-c"
