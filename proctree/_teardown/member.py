"""One member of a teardown: its record, its signalling target, and where it stands."""

from __future__ import annotations

import enum
import signal

from .._table.model import Proc
from .signals import Target


class MemberState(enum.Enum):
    """Where one member stands: still to end, ended by itself, ended by SIGKILL, or not ours to signal."""

    LIVE = "live"
    EXITED = "exited"
    KILLED = "killed"
    DENIED = "denied"


class Member:
    """One process of the tree being ended: its record, the target that signals it, where it stands."""

    __slots__ = ("proc", "target", "status", "late", "signalled", "stop")

    def __init__(self, proc: Proc, late: bool) -> None:
        self.proc = proc
        self.target: Target | None = None
        self.status = MemberState.LIVE
        self.late = late
        self.signalled = False
        self.stop: int | None = None  # the stop signal it got (this teardown's, or one it already had)


def signal_name(sig: int) -> str:
    """SIGTERM for 15; SIG<n> for a number no Signals member names."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"SIG{sig}"
