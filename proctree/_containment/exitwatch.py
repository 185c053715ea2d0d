"""The exit of a command an async drop-in started on a loop without asyncio's child watcher (uvloop).

asyncio's own Unix loop reaps through its child watcher; uvloop has none
for a process it did not start. Here the command's exit is added to the
loop's readers (pidexit.py: a pidfd, readable once it exited), so the
waitpid that follows returns at once, on the loop's thread, and the status
goes to the transport's _process_exited as asyncio's watcher would hand it.
Where pidfds are missing (old kernels, macOS), a thread waits for the exit
(pidexit.py again), reaps it, and hands the status over with
call_soon_threadsafe.

This module reaps only the pid it is given (the caller's own child) and
never signals anything.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from .._teardown import pidexit as _pidexit


def _status(pid: int, known: Callable[[], int | None]) -> int:
    """The exit code of our exited child pid: reaped here, or as known by whoever reaped it (Popen's poll())."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        code = known()
        return 255 if code is None else code  # 255: as asyncio's own watchers report a child they could not reap
    return os.waitstatus_to_exitcode(status)


def on_exit(
    loop: asyncio.AbstractEventLoop, pid: int, exited: Callable[[int], None], known: Callable[[], int | None]
) -> None:
    """Call exited(exit code) on the loop once the child pid exits (and reap it); known: its status if reaped."""
    if not _pidexit.add_exit_reader(loop, pid, lambda: exited(_status(pid, known))):
        _pidexit.call_when_child_exited(
            pid, lambda: loop.call_soon_threadsafe(exited, _status(pid, known)), name="proctree-exit"
        )
