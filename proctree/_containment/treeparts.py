"""TreeParts: what one Tree is made of below its API, shared with the containment modules that act on it.

A Tree holds one (tree.parts). Here are its keeper (our unreaped child), the
status lines the keeper writes and the lifecycle they move, the lock that
orders the threads that read them, and the identities the modes need (the
command's record, the keeper's start time, what a forwarded signal already
stopped). The modes read it as interfaces.ModeFacts; keeperloss.py,
asyncwait.py, start.py and popenhold.py use these names instead of the
Tree's private ones. Nothing here ends a process or touches the cgroup or
the pty: that stays with the Tree.
"""

from __future__ import annotations

import threading
import time

from .. import _fds
from .._table.model import Proc
from . import protocol as _protocol
from .evidence import receipt as _receipt
from .keeperproc import Keeper, _start_time
from .lifecycle import Lifecycle
from .statuschannel import StatusChannel

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    import subprocess

    from .launch import _Launch
    from .stopflag import _Stop

# How long a teardown waits for the keeper to answer its hold (it answers at once unless stopped or busy).
_HOLD_ANSWER = 2.0


class TreeParts:
    """One Tree's keeper, status lines, lifecycle, lock and identities (see the module's docstring).

    tree_id, mode, cgroup and keep_orphans are the launch's, as on the Tree.
    root is the command's record once the keeper reported it (start.py sets
    it); keeper_start the keeper's start time (what "started after the
    keeper" means for the marker sweeps, even if it dies before its first
    line); stopped maps (pid, start time) to the stop-type signal a forward
    through the keeper sent it, so that no teardown sends another; receipt the
    path of the tree's receipt while it exists.
    """

    __slots__ = (
        "tree_id",
        "mode",
        "cgroup",
        "keep_orphans",
        "keeper",
        "channel",
        "life",
        "lock",
        "root",
        "keeper_start",
        "stopped",
        "receipt",
    )

    def __init__(self, launch: _Launch, popen: subprocess.Popen, status_fd: int) -> None:
        self.tree_id = launch.tree_id
        self.mode = launch.mode
        self.cgroup = launch.cgroup
        self.keep_orphans = launch.keep_orphans
        self.keeper = Keeper(popen)
        self.channel = StatusChannel(status_fd)  # the keeper's status lines
        self.life = Lifecycle()  # the keeper's phase and the command's outcome
        self.lock = threading.RLock()
        self.root: Proc | None = None
        # Read while the keeper is our unreaped child (its pid is its own).
        self.keeper_start: int | None = _start_time(popen.pid)
        self.stopped: dict[tuple[int, int], int] = {}
        self.receipt: str | None = None

    @property
    def keeper_pid(self) -> int:
        return self.keeper.pid

    def keeper_is_ours(self) -> bool:
        """The keeper is still our unreaped child (its pid is its own)."""
        return self.keeper.is_ours()

    def pump(self, deadline: float | None) -> bool:
        """Read status lines until the command's status is known or deadline (None: no limit). True if known.

        The lock is held to read what has arrived, never while waiting for
        more: a wait() in one thread must not hold up a terminate() in another.
        """
        while True:
            with self.lock:
                if self.life.lost is not None:
                    return True  # the keeper watch found it killed (its pipe may still be held open elsewhere)
                while self.life.status is None:
                    if self.channel.fd is None:
                        return self.life.lost is not None
                    try:
                        line = self.channel.next_line(0)  # a deadline long past: just look
                    except TimeoutError:
                        break  # nothing complete yet: wait below, without the lock
                    if line is None:
                        # The keeper went away without a word (killed): the command's status is
                        # unknowable, and ending what it left is the keeper watch's (keeperloss.on_keeper_exit).
                        return True
                    self.heard(line)
                if self.life.status is not None or self.channel.eof:
                    return True
                fd = self.channel.fd
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            try:
                # Sliced: another thread's finish may close fd under us (the next look says so).
                _fds.readable([] if fd is None else [fd], 0.5 if left is None else min(left, 0.5))
            except (OSError, ValueError):
                pass

    def heard(self, line: str) -> int | None:
        """A status line after Ok: the wait status it carries if it is the exit, else None (a stop is counted;
        a malformed line is ignored, as the keeper's exit without an exit line still tells)."""
        try:
            record = _protocol.parse_status(line)
        except _protocol.ProtocolError:
            return None
        return self.life.heard(record)

    def drain(self) -> None:
        """Read every status line already written (the keeper has exited: up to its done line, or EOF)."""
        while self.channel.fd is not None:
            try:
                line = self.channel.next_line(0)
            except TimeoutError:
                return
            if line is None:
                return
            self.heard(line)

    def hold_keeper(self, grace: float, stop: _Stop | None) -> None:
        """Ask the keeper to leave this teardown to us, and wait for its answer (held, or the end of its own sweep).

        The keeper answers "held" and from then on signals no member itself;
        if its own sweep began first (the command exited by itself) it said
        "sweep" before its first signal, and we wait for its last line instead:
        what it signalled must not be signalled again. A keeper that does not
        answer (stopped, or its pipe full) is not waited for past a bound.
        """
        if self.life.answered_hold or self.channel.fd is None or not self.keeper.is_ours():
            return
        try:
            self.keeper.signal(_protocol.HOLD_SIGNAL)
        except OSError:
            return
        deadline = time.monotonic() + _HOLD_ANSWER
        while not self.life.answered_hold:
            if self.life.sweeping:
                deadline = max(deadline, time.monotonic() + grace + _HOLD_ANSWER)
            try:
                line = self.channel.next_line(deadline, stop)
            except TimeoutError:
                self.keeper.continue_if_stopped()
                return
            if line is None:
                return
            self.heard(line)

    def remove_receipt(self) -> None:
        path, self.receipt = self.receipt, None
        if path is not None:
            try:
                _receipt.remove(path)
            except OSError:
                pass
