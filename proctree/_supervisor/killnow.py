"""SIGKILL a tree's members at once, without waiting: the host's last word (reap_sync, kill_foreground).

Synchronous, bounded (one read of the tree's members, one signal each) and
silent: it runs from atexit and signal paths, where an exception or a wait
would be worse than a missed process. What it misses is not lost: each tree's
keeper ends what its command left once the command is gone, and ends the
whole tree when the host itself dies.

It must never signal anything but the members the Tree itself reports, each
checked by pid and start time when signalled (byidentity.signal_member).
"""

from __future__ import annotations

import signal

from .._containment import byidentity as _byidentity
from .._containment.spawn import Tree
from .._teardown import signals as _signals


def kill_now(tree: Tree) -> int:
    """SIGKILL every live member of tree; return how many were signalled. Never raises for a tree that is gone."""
    try:
        members = tree.members()
    except Exception:  # a tree torn down meanwhile (its keeper reaped, its cgroup removed)
        return 0
    sent = 0
    for proc in members:
        try:
            sent += _byidentity.signal_member(proc, signal.SIGKILL) == _signals.SENT
        except (ValueError, OSError):  # a guard refusal or a pid gone between the read and the signal
            continue
    return sent
