"""Signals by identity outside a teardown ladder: one recorded member, everything below a stopped keeper.

signal_member sends one signal to the process a record names, if it is still
that process (Tree.send_signal, the supervisor's kill). kill_below_keeper
SIGKILLs what a keeper that is gone or stopped started: its descendants (by
the ladder, from the keeper while it is our unreaped child), its cgroup (the
ladder over the cgroup's members) and, in session mode, its session.

Must never: signal a process it did not verify (pidfd, or a start-time
check) to be the one recorded; pass the Guard by (pid 0, 1, the caller and
its ancestors).
"""

from __future__ import annotations

import signal
import time

from .._errors import AccessDenied, NoSuchProcess
from .._table import binding as _binding
from .._table.model import Proc
from .._teardown import engine as _engine
from .._teardown import signals as _signals
from . import cgroupworld as _cgroupworld


def signal_member(proc: Proc, sig: int, guard: _signals.Guard | None = None) -> str:
    """Send sig to the process proc records, if it is still that process: signals.SENT, GONE or DENIED.

    ValueError if the guard (default: a fresh one for this process) forbids it.
    """
    guard = _signals.Guard() if guard is None else guard
    try:
        target = _signals.open_target(proc, guard, _signals.pidfds_available())
    except AccessDenied:
        return _signals.DENIED
    if target is None:
        return _signals.GONE
    try:
        return _signals.send(target, sig, guard)
    finally:
        target.close()


def kill_below_keeper(keeper_pid: int, *, cgroup: str | None, session: bool) -> None:
    """SIGKILL everything a stopped keeper started: its descendants, its cgroup, and (session mode) its session.

    keeper_pid must be our unreaped child (so its pid, and the session it
    leads, are still its own); the keeper itself is left to the caller.
    """
    try:
        _engine.terminate_tree(keeper_pid, grace=0, include_root=False, signal_group=False)
    except (NoSuchProcess, ValueError):
        pass  # gone already: what it held went to init, and the cgroup/session sweeps below still apply
    if session:
        _kill_session(keeper_pid)
    if cgroup is not None:
        _cgroupworld.terminate(cgroup, 0)


def _kill_session(sid: int, rounds: int = 10) -> None:
    """SIGKILL the members of session sid (its leader excluded), re-reading until none is left (bounded)."""
    guard = _signals.Guard()
    for _ in range(rounds):
        members = [p for p in _binding.snapshot().values() if p.sid == sid and p.pid != sid and not p.is_zombie]
        if not members:
            return
        for p in members:
            try:
                signal_member(p, signal.SIGKILL, guard)
            except ValueError:
                pass  # protected (the caller's own session is never ours to end)
        time.sleep(0.005)
