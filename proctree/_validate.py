"""Argument checks shared by every public function and by proctree up's readers: refuse bad input before any system call."""

from __future__ import annotations

import math
import os
import re
import signal
from collections.abc import Sequence

# Linux caps pid_max at 2**22; macOS at 99999. Anything above cannot be a pid.
PID_MAX = 2**22


def check_pid(pid: object, what: str = "pid") -> int:
    """Return pid as an int, or raise TypeError/ValueError. bool is not a pid."""
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise TypeError(f"{what} must be an int, not {type(pid).__name__}")
    if pid <= 0:
        raise ValueError(f"{what} must be a positive integer, got {_brief(pid)}")
    if pid > PID_MAX:
        raise ValueError(f"{what} {_brief(pid)} is larger than any pid the system can assign ({PID_MAX})")
    return int(pid)


def check_seconds(value: object, what: str) -> float:
    """Return value as a float of seconds >= 0, or raise TypeError/ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(value).__name__}")
    try:
        seconds = float(value)
    except OverflowError:
        # An int beyond float range: as useless as inf, and must not escape as OverflowError.
        seconds = math.inf
    if math.isnan(seconds) or math.isinf(seconds) or seconds < 0:
        raise ValueError(f"{what} must be a finite number of seconds >= 0, got {_brief(value)}")
    return seconds + 0.0  # -0.0 becomes 0.0


# The supervisor's (and `proctree up`'s) bound on a service's stop grace. More is a mistake, not a
# wish: a TERM-ignorer would outlive every stop, and with the host SIGKILLed its keeper would wait
# that long before ending it. spawn()'s own grace is not bounded by it.
MAX_STOP_GRACE = 86400.0


def check_stop_grace(value: object, what: str = "stop_grace") -> float:
    """A service's seconds between SIGTERM and SIGKILL: finite, 0 to MAX_STOP_GRACE (one day)."""
    seconds = check_seconds(value, what)
    if seconds > MAX_STOP_GRACE:
        raise ValueError(f"{what} must be at most {MAX_STOP_GRACE:g} seconds (one day), got {_brief(value)}")
    return seconds


def _brief(value: object) -> str:
    """repr(value) cut short, so an error about a 400-digit int stays one line
    (and an int too long for repr(), past Python's 4300 digits, still has a message)."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"an int of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


def check_positive_int(value: object, what: str) -> int:
    """Return value as an int >= 1, or raise TypeError/ValueError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{what} must be >= 1, got {_brief(value)}")
    return int(value)


# Signals that cannot be a stop signal: SIGKILL and SIGSTOP cannot be caught, so
# they leave nothing to drain (use grace=0 for an immediate kill), and SIGCONT
# only resumes.
_NOT_STOP = {"SIGKILL", "SIGSTOP", "SIGCONT"}


def check_signal(value: object, what: str = "signal") -> int:
    """A stop signal as an int, from a number, a signal.Signals, or a name ("SIGINT", "INT", "sigint").

    TypeError for another type (bool included); ValueError for an unknown
    name or number, or SIGKILL, SIGSTOP or SIGCONT, which cannot ask a process to stop.
    """
    sig = any_signal(value, what)
    if sig.name in _NOT_STOP:
        raise ValueError(
            f"{what} {sig.name} cannot be a stop signal: SIGKILL and SIGSTOP cannot be handled and "
            "SIGCONT only resumes (for an immediate kill use grace=0)"
        )
    return int(sig)


def any_signal(value: object, what: str = "signal") -> signal.Signals:
    """The signal.Signals named by a number, a signal.Signals, or a name ("SIGINT", "INT", "sigint", " 2 ").

    TypeError for another type (bool included); ValueError for an unknown name or number (one the signal
    module has no member for: on Linux 32, 33 and the real-time ones but SIGRTMIN and SIGRTMAX).
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{what} must be a signal number or name, not {type(value).__name__}")
    if isinstance(value, str):
        name = value.strip().upper()
        if name.isdigit():
            return any_signal(int(name), what)
        if not name.startswith("SIG"):
            name = "SIG" + name
        sig = getattr(signal, name, None)
        if not isinstance(sig, signal.Signals) or name.startswith("SIG_"):
            raise ValueError(f"{what} {_brief(value)} is not a signal name")
        return sig
    try:
        return signal.Signals(value)
    except ValueError:
        raise ValueError(f"{what} {_brief(value)} is not a signal number") from None


def signal_name(sig: int) -> str:
    """The name of signal number sig ("SIGTERM"), or "SIG<n>" for one without a name."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"SIG{sig}"


# -- the facts the supervisor and `proctree up`'s readers (files, options) check alike ---------------

PORT_MAX = 65535


def is_port(value: object) -> bool:
    """Whether value is a TCP port: an int (bool is not one) from 1 to 65535."""
    return not isinstance(value, bool) and isinstance(value, int) and 1 <= value <= PORT_MAX


def check_port(value: object, what: str = "port") -> int:
    """Return value as a port (is_port), or raise TypeError/ValueError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not is_port(value):
        raise ValueError(f"{what} must be 1-65535, got {_brief(value)}")
    return int(value)


def port_from_text(text: str) -> int | None:
    """text as a port if it spells one: 1 to 5 ASCII digits naming 1-65535 (no sign, space or '_'); else None."""
    if not (text.isascii() and text.isdigit()) or len(text) > 5:
        return None
    port = int(text)
    return port if is_port(port) else None


# An environment variable name: POSIX's letters, digits and '_' (not first a digit), and '.' as the
# dotenv gem (foreman's .env reader) allows, so that what a .env file sets a service can be given.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def is_env_name(value: object) -> bool:
    """Whether value is an environment variable name (ENV_NAME)."""
    return isinstance(value, str) and ENV_NAME.fullmatch(value) is not None


# Linux's MAX_ARG_STRLEN: no one argument (a shell line is one, after sh -c) may be longer, NUL included.
MAX_ARG_BYTES = 32 * 4096 - 1


def _check_arg_size(arg: str, what: str) -> None:
    size = len(os.fsencode(arg)) if len(arg) > MAX_ARG_BYTES // 4 else 0
    if size > MAX_ARG_BYTES:
        raise ValueError(
            f"{what} is {size} bytes: the kernel takes at most {MAX_ARG_BYTES} in one argument "
            "(write a script and run that)"
        )


def check_command(value: object) -> str | tuple[str, ...]:
    """A shell command line (str) or an argv (a sequence of str or path); TypeError/ValueError if empty or malformed."""
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("command is empty")
        if "\0" in value:
            raise ValueError("command contains a NUL character")
        _check_arg_size(value, "the command")
        return value
    if isinstance(value, (bytes, bytearray)) or not isinstance(value, Sequence):
        raise TypeError(f"command must be a str (a shell line) or a list of str (an argv), not {type(value).__name__}")
    argv: list[str] = []
    for i, arg in enumerate(value):
        if isinstance(arg, os.PathLike):
            arg = os.fspath(arg)
        if not isinstance(arg, str):
            raise TypeError(f"command[{i}] must be a str, not {type(arg).__name__}")
        if "\0" in arg:
            raise ValueError(f"command[{i}] contains a NUL character")
        _check_arg_size(arg, f"command[{i}]")
        argv.append(arg)
    if not argv or not argv[0]:
        raise ValueError("command is empty" if not argv else "command[0] (the program) is empty")
    return tuple(argv)
