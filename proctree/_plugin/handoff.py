"""Hand the run to a pytest below the run's subreaper (reaper.py), so that pytest itself adopts nothing.

A subreaper sees the orphans of its descendants as its own children: a test
could os.waitpid a daemon it never started, and a daemon that exits stays a
zombie (os.kill(pid, 0) succeeds) until its adopter reaps it. So the pytest
you started, once it knows the plugin is enabled with the subreaper and
before it loads any conftest, starts the subreaper, which starts the same
pytest command below it; it waits, and exits with its status, or dies of
the signal it died of. Every signal a process sends to the pytest you
started is passed down (once); Ctrl-C and Ctrl-Z reach the inner pytest from
the terminal, and its stops are mirrored (reaper.relay).

Only for a run started as a command (``pytest ...``, ``python -m pytest
...``) on Linux, not under a debugger, a profiler or coverage.py: a
pytest.main() call inside a program, and an in-process inner run keep the
subreaper in pytest itself.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
from typing import Any

import proctree

from . import reaper as _reaper
from .reaper import ENV


def helper_pid(worker: bool = False) -> int | None:
    """The run's subreaper's pid, when this pytest is the one it started (or, worker, an xdist worker of
    that one). A pytest a test starts inherits the variable too: it is not below the subreaper directly."""
    value = os.environ.get(ENV, "")
    if not value.isdigit():
        return None
    helper = int(value)
    try:
        me = proctree.proc(os.getpid())
        if me.ppid == helper:
            return helper
        if worker and proctree.proc(me.ppid).ppid == helper:
            return helper
    except proctree.NoSuchProcess:
        pass
    return None


def _command(config: Any) -> list[str] | None:
    """The command that started this pytest, to run again below the subreaper; None if it was not one."""
    args = list(config.invocation_params.args)
    if args != sys.argv[1:] or config.invocation_params.plugins:
        return None
    first = sys.argv[0]
    flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]  # -X, -W, -O as given
    if os.path.basename(first) in ("pytest", "py.test") and os.access(first, os.X_OK):
        return [first, *args] if not flags else [sys.executable, *flags, first, *args]
    if first.endswith(os.path.join("pytest", "__main__.py")):
        return [sys.executable, *flags, "-m", "pytest", *args]
    return None


def _observed() -> bool:
    """This process runs under a debugger, a profiler or coverage.py (`coverage run -m pytest`): the tests
    must run here, where they are watched."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return True
    coverage = sys.modules.get("coverage")
    current = getattr(getattr(coverage, "Coverage", None), "current", None)
    return callable(current) and current() is not None


def wanted(config: Any) -> list[str] | None:
    """The command to hand the run to, or None to run here."""
    if not sys.platform.startswith("linux") or "PYTEST_XDIST_WORKER" in os.environ or hasattr(config, "workerinput"):
        return None
    # The settings first: the rest reads the process table, and this runs before any conftest (a checkout's
    # conftest.py may be what makes the compiled core importable; a run that does not hand off must not need it).
    mode = getattr(config.known_args_namespace, "proctree_leaks", None) or config.getini("proctree_leaks")
    if mode in (None, "", "off") or not config.getini("proctree_subreaper"):
        return None
    if _observed():
        return None
    try:
        if helper_pid() is not None or proctree.Containment.current() is not None:
            return None
    except ImportError:
        return None  # no compiled core to be had yet: the tests run here, and the plugin says why if it must
    return _command(config)


def hand_off(config: Any) -> None:
    """Run the tests below the run's subreaper and exit with their status, if this run should (else return)."""
    argv = wanted(config)
    if argv is None:
        return
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        capman.suspend_global_capture(in_=True)  # the inner pytest writes to the real terminal
    sys.stdout.flush()
    sys.stderr.flush()
    # Blocked before the start, so that none is lost or acted on here: the subreaper inherits the mask and
    # takes them the same way; relay() passes on what processes send (reaper.py says which).
    relayed = _reaper.relayed_signals()
    signal.pthread_sigmask(signal.SIG_BLOCK, relayed | {signal.SIGCHLD})
    try:
        # Its source, not its module: it runs wherever this interpreter runs, whatever finds proctree here.
        with open(_reaper.__file__, encoding="utf-8") as f:
            source = f.read()
        helper = subprocess.Popen([sys.executable, "-c", source, *argv], close_fds=False)
    except OSError:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, relayed | {signal.SIGCHLD})
        if capman is not None:
            capman.resume_global_capture()
        return
    status = _reaper.relay(helper.pid, relayed)
    if os.WIFSIGNALED(status):
        faulthandler.disable()  # pytest's: a traceback of this process would say nothing
        _reaper.die_like(os.WTERMSIG(status))
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70)  # nothing of this pytest runs on
