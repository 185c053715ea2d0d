"""Tree.wait_async(): waiting for a tree from asyncio or trio without blocking the loop, and its timeout.

asyncio: a reader on the status pipe wakes the loop when the keeper reports
the command's exit (any number of waiters, on one loop or several), then the
keeper's end is awaited in a thread. trio: Tree.wait in slices in a thread.

The timeout is WaitTimeout, one exception that is both, so code written against either keeps working:
`except subprocess.TimeoutExpired` (what wait_async raised before) and
`except TimeoutError` / `except asyncio.TimeoutError` (what asyncio's own
waits raise; on Python 3.10 asyncio's is a class of its own, a base here too).
Being a TimeoutError makes it an OSError, with errno and strerror None.
"""

from __future__ import annotations

import subprocess
import sys
import time

# asyncio and the trio face are imported by wait() itself (it runs on a loop, which has them): a Tree,
# which imports this module, is made by blocking spawns too, which must not pay their import time.

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

    from .interfaces import WaitableTree

if sys.version_info >= (3, 11):
    _ASYNC_TIMEOUTS: tuple[type[BaseException], ...] = (TimeoutError,)
else:  # pragma: no cover - 3.10's asyncio.TimeoutError is not the builtin
    import asyncio

    _ASYNC_TIMEOUTS = (TimeoutError, asyncio.TimeoutError)


class WaitTimeout(subprocess.TimeoutExpired, *_ASYNC_TIMEOUTS):  # type: ignore[misc]
    """Tree.wait_async(timeout=) ran out: subprocess.TimeoutExpired and TimeoutError at once."""

    def __new__(cls, *args: Any, **kwargs: Any) -> WaitTimeout:
        # OSError.__new__ would read (cmd, timeout) as (errno, strerror).
        return OSError.__new__(cls)

    def __init__(self, cmd: Any, timeout: float, output: Any = None, stderr: Any = None) -> None:
        super().__init__(cmd, timeout, output, stderr)
        self.args = (cmd, timeout, output, stderr)  # what pickling rebuilds it from


async def wait(tree: WaitableTree, timeout: float | None) -> int:
    """Tree.wait() awaited: the command's returncode; WaitTimeout once timeout has passed."""
    import asyncio

    from .._teardown import trioface as _trioface

    then = None if tree.keep_orphans else 2 * tree.grace + 5  # the keeper's end of what the command left
    if _trioface.running_library() == "trio":
        try:
            return await _trioface.wait_in_slices(tree.wait, timeout, tree.args, then)
        except subprocess.TimeoutExpired as exc:
            raise WaitTimeout(tree.args, exc.timeout) from None
    loop = asyncio.get_running_loop()
    parts = tree.parts
    with parts.lock:
        watch = None
        if parts.life.status is None and parts.life.lost is None and parts.channel.fd is not None:
            watch = parts.channel.loop_watch(loop, lambda: parts.pump(time.monotonic()))
    if watch is not None:
        try:
            watch.check()
            await asyncio.wait_for(asyncio.shield(watch.ready), timeout)
        except asyncio.TimeoutError:
            raise WaitTimeout(tree.args, timeout if timeout is not None else 0.0) from None
        finally:
            with parts.lock:
                parts.channel.loop_unwatch(watch)
    return await asyncio.to_thread(tree.wait, then)
