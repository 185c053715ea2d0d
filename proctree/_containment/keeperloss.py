"""A keeper lost: what the owner does when the keeper exits, by itself or killed, and ends what it left.

The keeper watch calls keeper_exit_settled() (a quick look that never
blocks) and, when that cannot tell, on_keeper_exit() in a thread of its own;
the Tree's own calls (poll, wait, terminate) call on_keeper_exit() too, when
they find the status pipe closed first. Whoever comes first does the work,
under the Tree's lock; the rest find it done.
"""

from __future__ import annotations

import subprocess
import time

from .. import _lazyimport
from . import modes as _modes

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from .._teardown import report as _report
    from .._teardown.report import TeardownReport
    from .interfaces import LosableTree
else:  # teardown loads at its first use: a start never pays for it
    _report = _lazyimport.LazyModule("proctree._teardown.report", "")


def keeper_exit_settled(tree: LosableTree) -> bool:
    """The keeper watch's quick look, which never blocks: True if the keeper that exited ended its tree itself.

    Its last line (done) is in, or the Tree was finished already: nothing
    is left for on_keeper_exit to do but reap the keeper, which is done
    here without waiting (it has exited). False when that cannot be told
    at once (another thread holds the lock) or the keeper did not end its
    tree: the watch then runs on_keeper_exit in a thread of its own.
    """
    parts = tree.parts
    if not parts.lock.acquire(blocking=False):
        return False
    try:
        if parts.life.recovered.is_set() or parts.channel.fd is None:
            return True
        parts.drain()
        if parts.life.done:
            parts.keeper.poll()  # reaps it: a dropped Tree's keeper is not left a zombie
        return parts.life.done
    finally:
        parts.lock.release()


def on_keeper_exit(tree: LosableTree) -> None:
    """The keeper exited (the keeper watch saw it, or its status pipe closed): finish the tree.

    A keeper that reported the command's status and exited with it ended
    its tree itself. One that did not (it was killed) left the tree
    running, reparented away from it: end what is left here, at once,
    with the tree's grace, and keep the KeeperLost that wait() and poll()
    raise from now on.
    """
    parts = tree.parts
    with parts.lock:
        if parts.life.recovered.is_set() or parts.channel.fd is None:
            return  # handled already, or the tree was finished by its owner
        try:
            rc = parts.keeper.wait(5.0)  # it has exited: this reaps it
        except subprocess.TimeoutExpired:
            # Its status pipe closed but it runs on: a keeper that broke its protocol.
            rc = parts.keeper.kill_and_reap()
        parts.drain()  # every line it wrote before it went
        if parts.life.done:
            return  # it ended its tree itself; the Tree's own calls finish it (and close the pipe)
        # Killed before the command ended: its status is unknowable (lose() keeps a known one).
        parts.life.lose(parts.keeper_pid, rc)
        try:
            report = end_leftovers(tree)
            parts.life.recover(report)
            # The pipe and the pty stay open: a wait_async() or a relay may be reading them.
            # The one use of a Tree's private name outside tree.py: the finish (the keeper reaped, the cgroup and
            # receipt removed) is the Tree's own, and a keeper loss ends in it as the Tree's own calls do.
            tree._finish(clean=report.ok, release_fds=False)
        finally:
            parts.life.recovered.set()


def end_leftovers(tree: LosableTree, grace: float | None = None) -> TeardownReport:
    """What a killed keeper left of the tree, ended by the owner: the cgroup's members, or the marked processes.

    Outside a cgroup the members were reparented (to init, or to a
    subreaper above us); they are found by this tree's PROCTREE_TREE, as
    the reaper finds them, and ended as trees of their own, each pinned to
    its start time. A member that scrubbed its environment is beyond reach.
    """
    t0 = time.monotonic()
    grace = tree.grace if grace is None else grace
    parts = tree.parts
    rep = _modes.MODES[parts.mode].leftovers(parts, grace, tree.terminate_signal)
    return _report.replace(
        rep,
        root=parts.root,
        mode=parts.mode,
        elapsed=time.monotonic() - t0,
        extra={**rep.extra, "keeper": parts.keeper_pid, "keeper_lost": True},
    )
