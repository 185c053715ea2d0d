"""The run's subreaper, a process of its own between the pytest you started and the one that runs the tests.

    python -c "$(cat reaper.py)" ARGV...      (handoff.py runs its source: no import of proctree)

Started by handoff.py. It becomes a child subreaper, starts ARGV (pytest,
with PROCTREE_PYTEST_HELPER naming it) as its only child, and then waits for
any child: the orphans the tests leave come back here, not to the pytest
that runs the tests, so a test sees the process world it sees without the
plugin (os.waitpid of a daemon fails with ECHILD; a daemon that exits is
reaped at once, so os.kill(pid, 0) stops finding it). Once pytest exits it
exits with pytest's status. It dies with its parent (PR_SET_PDEATHSIG) and
so does pytest with it: a SIGKILLed run leaves it to the watchdog.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

LINUX_ONLY = True  # the hand-off (handoff.py) starts it on Linux alone: prctl
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
ENV = "PROCTREE_PYTEST_HELPER"
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def _prctl(option: int, value: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(option, value, 0, 0, 0) == 0


def _child_setup() -> None:
    """In pytest, before its exec: die with this process, and take Ctrl-C as pytest does by default."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def main(argv: list[str]) -> int:
    parent = os.getppid()
    if not _prctl(_PR_SET_CHILD_SUBREAPER, 1) or not _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL):
        return 70
    if os.getppid() != parent:  # the pytest that started us is gone already
        return 70
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal sends Ctrl-C to pytest too: it decides
    env = dict(os.environ, **{ENV: str(os.getpid())})
    child = subprocess.Popen(argv, env=env, preexec_fn=_child_setup, close_fds=False)

    def forward(signum: int, frame: object) -> None:
        try:
            os.kill(child.pid, signum)
        except ProcessLookupError:
            pass

    for sig in FORWARDED:
        signal.signal(sig, forward)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 70
        if pid == child.pid:
            break
    if os.WIFSIGNALED(status):
        died_of = os.WTERMSIG(status)
        signal.signal(died_of, signal.SIG_DFL)
        os.kill(os.getpid(), died_of)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))  # with -c, sys.argv[0] is "-c"
