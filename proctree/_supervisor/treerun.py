"""Run a command as a contained tree and always end it: the one spawn-to-end path of services, foreground commands and exec probes.

spawn_command() starts the tree (a str through the shell, a sequence as an
argv); always_ended() holds it while the caller works with it and, however
that work leaves (an exception, a cancellation), SIGKILLs the tree and waits
for its teardown to finish before the exception goes on; end_tree() is the
ordinary end within a grace, retried when the host has no resources to spare.

It must never signal anything but the members of the tree it was given.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from .._containment.spawn import Tree, spawn_async
from .killnow import kill_now
from .treeio import quietly, stop_waiting, wait_exit

log = logging.getLogger("proctree.supervisor")

# A teardown that fails for want of resources is retried this many times, after 0.1, 0.2, 0.4, ... s.
_SCARCE = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN))
_SCARCE_TRIES = 6
_SCARCE_PAUSE = 0.1


async def spawn_command(command: str | Sequence[str], **options: Any) -> Tree:
    """spawn_async for a command as the supervisor takes it: a str is a shell line, a sequence an argv."""
    shell = isinstance(command, str)
    return await spawn_async(command if shell else list(command), shell=shell, **options)


class TreeRun:
    """A tree held by always_ended(), with the task that watches its exit (started on demand)."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.exit_wait: asyncio.Task[None] | None = None

    def watch_exit(self) -> asyncio.Task[None]:
        """The task that ends when the tree's command has ended (treeio.wait_exit)."""
        if self.exit_wait is None:
            self.exit_wait = asyncio.get_running_loop().create_task(wait_exit(self.tree))
        return self.exit_wait

    async def stop_watching(self) -> None:
        """Cancel the exit watch and wait for it: it must be over before the tree is ended (see wait_exit)."""
        await stop_waiting(self.exit_wait)


@asynccontextmanager
async def always_ended(tree: Tree) -> AsyncIterator[TreeRun]:
    """Hold tree for the body; if the body raises (or is cancelled), SIGKILL the tree and finish its teardown first."""
    run = TreeRun(tree)
    try:
        yield run
    except BaseException:
        await run.stop_watching()
        kill_now(tree)
        await _to_the_end(tree.terminate_async(0))
        raise


async def _to_the_end(work: Awaitable[object]) -> None:
    """Await work to its end even through cancellations (the tree must not outlive its owner), ignoring how it ends."""
    task = asyncio.ensure_future(work)
    while not task.done():
        try:
            await asyncio.shield(task)
        except BaseException:
            continue
    await quietly(task)


# Why a tree given up on after _SCARCE_TRIES is not known to be ended.
STARVED = "its tree could not be confirmed ended: the host ran out of file descriptors or memory"


async def end_tree(tree: Tree, grace: float, who: str) -> tuple[bool, str | None]:
    """End the whole tree within grace: (whether nothing of it is left as far as can be known, why not if starved).

    A teardown needs a few file descriptors and threads: when the host has
    none to spare (EMFILE, ENFILE, ENOMEM, EAGAIN) the tree is SIGKILLed and
    the teardown tried again a few times, with one warning line (naming who)
    and no traceback; the keeper ends what is left if the host dies meanwhile.
    """
    for attempt in range(_SCARCE_TRIES):
        try:
            report = await tree.terminate_async(grace if attempt == 0 else 0)
            return report.ok, None
        except OSError as exc:
            if exc.errno not in _SCARCE:
                raise
            if attempt == 0:
                log.warning(
                    "%s: ending its tree failed for want of resources (%s); killing it and retrying",
                    who,
                    exc.strerror or exc,
                )
            kill_now(tree)
            await asyncio.sleep(_SCARCE_PAUSE * 2**attempt)
    log.warning("%s: its tree could not be confirmed ended for want of resources (kill_incomplete)", who)
    return False, STARVED
