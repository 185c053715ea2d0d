"""proctree.Popen where cgroups are unavailable: the command's tree is found by its marker.

The command is still the caller's own child, started by Popen's own code
(no exec step). Its environment carries the holding tree's PROCTREE_OWNER
and a PROCTREE_TREE chain of its own id and the holding tree's (a session-
mode keeper; popenhold.py), so:

- when the owner dies, the holding keeper's teardown follows the chain (it
  names the keeper's tree) and ends every process that carries it;
- when the command exits, what carries the command's own id and started
  after it is ended, as trees of their own (the stop signal once, SIGKILL
  after the grace), unless keep_orphans (see MarkedLeft for where and when
  it is looked for).

What escapes: a process that scrubs the marker from its environment
(docs/containment.md, "Session mode follows its marker").

This module must never signal a process that does not carry the command's
own id and start after it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

from .. import _lazyimport
from .._table import binding as _binding
from . import spare as _spare
from .evidence import marker as _marker
from .sweep import _marked_roots

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

    from .._teardown import many as _many
else:  # teardown loads at its first use: a start never pays for it
    _many = _lazyimport.LazyModule("proctree._teardown.many", "")


class MarkedLeft:
    """What a command in the marked fallback may leave: the processes carrying its id, started after it.

    Looking for them reads the process table and environments, opening
    /proc files. Done on a thread of its own while the caller closes and
    restores its fds 0-2 (as CPython's fd tests do), such a read could take
    a std fd number that the caller's dup2 then replaces, and close the
    caller's stream. So the look runs where Popen reaps the command, in the
    caller's own thread; the watch's thread looks only for a command that
    nothing reaped within REAP_WAIT of its exit (asyncio's child watcher, an
    owner that never waits). Ending what was found runs on a thread.
    """

    REAP_WAIT = 1.0

    def __init__(self, tree_id: str, after: tuple[int, int], keep_orphans: bool) -> None:
        self.tree_id = tree_id
        self.after = after  # (start time, pid) of the command
        self.keep_orphans = keep_orphans
        self._lock = threading.Lock()
        self._looked = False

    def settled(self) -> bool:
        """Never blocking: True when nothing is to be looked for (keep_orphans, or already looked)."""
        return self.keep_orphans or self._looked

    def _take(self) -> bool:
        with self._lock:
            if self._looked:
                return False
            self._looked = True
            return True

    def _roots(self) -> list[Any]:
        if _no_pid_handed_out_since(self.after[1]):
            return []  # nothing started after the command: nothing can carry its id
        try:
            return _spare.retrying(lambda: _marked_roots(self.tree_id, self.after, None))
        except OSError:
            return []

    def _end(self, roots: list[Any], grace: float) -> None:
        with contextlib.suppress(OSError):
            for _ in range(2):  # twice: what forked while the first round ended its parents
                if not roots:
                    break
                _many.end_trees(roots, grace=grace, signal_group=False)
                roots = self._roots()

    def reaped(self, grace: float) -> None:
        """Popen reaped the command, in the caller's thread: look now; end what is found on a thread."""
        if self.keep_orphans or not self._take():
            return
        roots = self._roots()
        if roots:
            threading.Thread(
                target=self._end, args=(roots, grace), name="proctree-popen-leftovers", daemon=True
            ).start()

    def exited(self, grace: float) -> None:
        """On a thread of the watch, once the command exited: look only if nothing reaped it meanwhile."""
        deadline = time.monotonic() + self.REAP_WAIT
        while time.monotonic() < deadline and not self._looked:
            time.sleep(0.02)
        if self.keep_orphans or not self._take():
            return
        self._end(self._roots(), grace)


def _no_pid_handed_out_since(pid: int) -> bool:
    """Linux: whether pid is still the last pid handed out in our pid namespace (so no process started after it).

    A look for leftovers reads the whole process table (~1 ms per 100
    processes); a command that started nothing, on a machine where nothing
    else started meanwhile, needs none. The command's pid, held by it until
    it was reaped a moment ago, cannot have come round again since. False
    when it cannot be read (macOS, no /proc): then the table is read.
    """
    try:
        with open("/proc/sys/kernel/ns_last_pid", "rb") as f:
            return int(f.read()) == pid
    except (OSError, ValueError):
        return False


def environment(env: Any, tree: Any) -> tuple[dict[Any, Any], str]:
    """(the command's environment with the markers, the command's own tree id)."""
    own = _marker.new_tree_id()
    holder_chain = _marker.tree_chain(tree.tree_id, os.environ.get(_marker.TREE_ENV))
    marks = {_marker.ENV: tree.marker, _marker.TREE_ENV: _marker.tree_chain(own, holder_chain)}
    if env is None and os.supports_bytes_environ:
        # Ours as bytes: Popen encodes a str environment back to bytes, one variable at a time.
        out: dict[Any, Any] = dict(os.environb)
        out.update((k.encode(), v.encode()) for k, v in marks.items())
        return out, own
    names = {os.fsencode(k) for k in marks}
    # A marker already in env, as str or bytes, is replaced, never left beside ours.
    out = {k: v for k, v in (os.environ if env is None else env).items() if os.fsencode(k) not in names}
    out.update(marks)
    return out, own


def started(pid: int) -> tuple[int, int]:
    """(start time, pid) of our unreaped child pid (its pid is its own until we reap it)."""
    try:
        return (_binding.proc(pid).start_time, pid)
    except Exception:  # noqa: BLE001 - NoSuchProcess, AccessDenied, OSError: unreadable
        return (0, pid)  # unreadable: every later process with a higher pid still counts as after it
