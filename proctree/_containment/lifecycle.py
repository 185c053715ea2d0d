"""Where a Tree stands, as one state: what its keeper last said it is doing, and how the command's run ended.

Two things change over a tree's life, each only forward:

- the keeper's phase, from its status lines: RUNNING, SWEEPING (the
  command exited and it is ending the tree itself), HELD (it answered a
  hold: it signals nothing more, every teardown is the owner's), DONE (its
  last line: the tree is ended). A phase only moves forward in that order: a
  hold answered during a sweep ends the sweep's signals, and a late "sweep"
  line after "held" changes nothing.
- the outcome: the command's wait status once its exit line came (the first
  one heard counts), or KeeperLost if the keeper died without it; then the
  recovery, the owner's teardown of what a lost keeper left, and the event
  that says it is over (set once, also when nothing was left to recover).

Beside them it counts the stops the keeper reported (Tree.stops, Tree.stop_signal).

Tree and keeperloss.py read and move this state only through these names
(tests/containment/test_lifecycle.py walks every order of lines).
"""

from __future__ import annotations

import threading

from .._errors import KeeperLost
from . import protocol as _protocol

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from .._teardown.report import TeardownReport


class Phase:
    """What the keeper last said it is doing: one of these strings, compared with `is`.

    (Not an enum.Enum: creating one costs a process's first proctree.Popen, which loads this module,
    more than its whole start's Python work.)
    """

    RUNNING = "running"
    HELD = "held"
    SWEEPING = "sweeping"
    DONE = "done"


# The line that moves the keeper into each phase, and the phases' order.
_PHASE_OF: dict[type, str] = {_protocol.Sweep: Phase.SWEEPING, _protocol.Held: Phase.HELD, _protocol.Done: Phase.DONE}
_ORDER = {Phase.RUNNING: 0, Phase.SWEEPING: 1, Phase.HELD: 2, Phase.DONE: 3}


class Lifecycle:
    """One Tree's state: the keeper's phase and the command's outcome (see the module's docstring)."""

    __slots__ = ("phase", "swept", "status", "lost", "recovery", "recovered", "stops", "stop_signal")

    def __init__(self) -> None:
        self.phase = Phase.RUNNING
        self.swept = False  # the keeper said "sweep" at some point: its own teardown signalled the tree
        self.status: int | None = None  # the command's raw wait status, once its exit line came
        self.lost: KeeperLost | None = None  # the keeper died without the command's status
        self.recovery: TeardownReport | None = None  # the owner's teardown of what a lost keeper left
        self.recovered = threading.Event()  # set once what a lost keeper left is ended (or nothing was)
        self.stops = 0  # the stop lines heard (the command stopped: Ctrl+Z at its terminal, SIGSTOP)
        self.stop_signal: int | None = None  # the signal of the last stop reported

    def heard(self, record: object) -> int | None:
        """Take one parsed status line: move the phase forward, count a stop; return the wait status an exit
        line carries."""
        if isinstance(record, _protocol.Stopped):
            self.stops += 1
            self.stop_signal = record.signal
        phase = _PHASE_OF.get(type(record))
        if phase is Phase.SWEEPING:
            self.swept = True
        if phase is not None and _ORDER[phase] > _ORDER[self.phase]:
            self.phase = phase
        if isinstance(record, _protocol.Exit):
            if self.status is None:
                self.status = record.wait_status
            return record.wait_status
        return None

    @property
    def done(self) -> bool:
        """The keeper's last line came: it ended its tree itself."""
        return self.phase is Phase.DONE

    @property
    def answered_hold(self) -> bool:
        """The keeper will signal nothing more: it said held, or it is done."""
        return self.phase in (Phase.HELD, Phase.DONE)

    @property
    def sweeping(self) -> bool:
        """The keeper is ending the tree itself (and has not answered a hold)."""
        return self.phase is Phase.SWEEPING

    def lose(self, keeper_pid: int, keeper_returncode: int | None) -> None:
        """The keeper is gone without the command's status: from now on wait() and poll() raise KeeperLost."""
        if self.status is None and self.lost is None:
            self.lost = KeeperLost(keeper_pid, keeper_returncode, None)

    def recover(self, report: TeardownReport) -> None:
        """What the lost keeper left was ended with report (KeeperLost carries it)."""
        self.recovery = report
        if self.lost is not None:
            self.lost.report = report
