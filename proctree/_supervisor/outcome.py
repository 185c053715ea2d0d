"""How a run ended, in words: an exit, a signal, a lost keeper, an error that kept it from starting.

Pure: statuses and exceptions in, sentences and a small record out.
"""

from __future__ import annotations

import errno
import re
from dataclasses import dataclass

from .._errors import KeeperLost
from .._validate import signal_name
from .snapshot import FAILED, STOPPED

# What sh / dash / bash print when they cannot run a command, by the status they then exit with.
_SHELL_FAILURES = {
    127: re.compile(r"\bnot found\b|No such file or directory"),
    126: re.compile(r"Permission denied|cannot execute|Is a directory|Exec format error"),
}


def describe_exit(code: int | None, sig: str | None) -> str:
    if sig is not None:
        return f"ended by {sig}"
    if code is None:
        return "ended (status unknown)"
    return f"exited with status {code}"


def describe_end(status: str, reason: str | None, code: int | None, sig: str | None) -> str:
    """How a finished service ended, as the rest of a sentence that starts with its name."""
    if status == STOPPED:
        return "was stopped"
    if status == FAILED:
        return f"failed ({reason})" if reason else "failed"
    return describe_exit(code, sig)


def shell_could_not_run(code: int | None, last_row: str | None) -> bool:
    """Whether a shell line's exit status (126 / 127) with this last output row is the shell saying it
    could not run a command ("not found", "Permission denied", ...); last_row None: the run printed nothing."""
    pattern = _SHELL_FAILURES.get(code) if code is not None else None
    return pattern is not None and last_row is not None and pattern.search(last_row) is not None


def describe_keeper_lost(lost: KeeperLost) -> str:
    """Why a run ended with no status: its keeper was killed (an OOM kill, kill -9), and the owner ended the tree."""
    code = lost.keeper_returncode
    how = f"was killed by {signal_name(-code)}" if code is not None and code < 0 else "died"
    return f"its keeper (pid {lost.keeper_pid}) {how}, so the command's status is unknown; its tree was ended"


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.E2BIG:
        # The filename would be the keeper proctree runs the command through: not the user's concern.
        return "Argument list too long (the command and its environment together exceed the kernel's limit)"
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename!r}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    return str(exc) or type(exc).__name__


@dataclass(frozen=True)
class RunEnd:
    code: int | None
    sig: str | None
    uptime: float
    keeper_lost: KeeperLost | None = None  # the keeper was killed: no status, the tree ended by the owner

    def describe(self) -> str:
        return describe_keeper_lost(self.keeper_lost) if self.keeper_lost else describe_exit(self.code, self.sig)
