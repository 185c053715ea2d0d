"""A child that survives the polite signals, so that only the kill at the end of a stop's grace ends it.

The polite signals are those a stop may send before SIGKILL: SIGTERM (the
default stop signal), SIGINT (the other usual one, and a terminal's Ctrl-C)
and SIGHUP (the hang-up to the root's group). SIGCONT, which follows the stop
signal, ends nothing. A test that means "this child needs the escalation"
builds it here, so that a signal added to the polite rungs is added once,
here, and not in every test that builds such a child.
"""

from __future__ import annotations

import shlex
import signal
import sys

POLITE_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def ignore_polite_signals_py() -> str:
    """One line of Python that ignores every polite signal (it imports signal itself)."""
    names = ", ".join(f"signal.{sig.name}" for sig in POLITE_SIGNALS)
    return f"import signal; [signal.signal(s, signal.SIG_IGN) for s in ({names})]"


def ignore_polite_signals_sh() -> str:
    """A shell command that ignores every polite signal, in the shell and in what it starts after it."""
    return "trap '' " + " ".join(sig.name[len("SIG") :] for sig in POLITE_SIGNALS)


def survives_polite_signals(say: str | None = None, seconds: float = 300) -> str:
    """Python source for `python -c`: ignore every polite signal, then print `say` (its "{pid}" filled in with the
    process's pid) once they are ignored, so a test that waits for that line knows the child is stubborn already,
    then sleep `seconds`."""
    code = ignore_polite_signals_py() + "; import os, time"
    if say is not None:
        code += f"; print({say!r}.format(pid=os.getpid()), flush=True)"
    return code + f"; time.sleep({seconds!r})"


def survives_polite_signals_argv(say: str | None = None, seconds: float = 300) -> list[str]:
    """The argv of a child that survives the polite signals (survives_polite_signals() under this Python)."""
    return [sys.executable, "-c", survives_polite_signals(say, seconds)]


def survives_polite_signals_sh(say: str | None = None, seconds: float = 300) -> str:
    """survives_polite_signals_argv() as one shell command line (a Procfile's or a service's command string)."""
    return shlex.join(survives_polite_signals_argv(say, seconds))
