"""Reaping the caller's own exited children among a tree's members, and only those.

Used by the teardown engine when the caller asked for it (reap=True). Must
never wait for a process that is not the caller's own child with the recorded
identity: a wait status that belongs to another waiter (Popen,
multiprocessing, asyncio) is not ours to take.
"""

from __future__ import annotations

import os

from .._errors import NoSuchProcess
from .._table import binding as _binding
from .signals import Target


def reap_zombie_child(pid: int) -> int | None:
    """Reap pid, which the caller just saw as its own zombie child (right start time).

    Nobody else can wait for the caller's child, and its pid cannot be reused
    before it is reaped, so no re-check is needed. Returns its returncode or None.
    """
    try:
        got, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status) if got else None


def reap_if_own_child(target: Target, me: int) -> int | None:
    """Reap target if it is the caller's own exited child. Returns its returncode or None.

    Only ever waits for that one process: by pidfd where held, else by a pid that
    is still our unreaped child (which the kernel cannot give to anyone else).
    """
    try:
        if target.pidfd is not None and hasattr(os, "P_PIDFD"):
            res = os.waitid(os.P_PIDFD, target.pidfd, os.WEXITED | os.WNOHANG)
            if res is None:
                return None
            return -res.si_status if res.si_code in (os.CLD_KILLED, os.CLD_DUMPED) else res.si_status
        try:
            now = _binding.proc(target.proc.pid)
        except NoSuchProcess:
            return None
        if now.ppid != me or now.start_time != target.proc.start_time or not now.is_zombie:
            return None
        pid, status = os.waitpid(target.proc.pid, os.WNOHANG)
        if pid == 0:
            return None
        return os.waitstatus_to_exitcode(status)
    except ChildProcessError:
        return None  # not ours, or someone else reaped it
