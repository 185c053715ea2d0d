"""End several trees at once: one teardown engine per root, driven together.

For callers that hold a set of roots rather than one pid (the orphan reaper,
a session-mode tree's marked daemons): each root is pinned to the identity it
was selected by, so a root whose pid was reused since is reported gone and
never signalled; processes the caller names as protected join the guard (the
engine spares them and everything they started, as it spares the caller's
ancestors); every engine waits for its exits on one event loop, so N roots
cost one grace, not N.

Must never: signal a root by pid alone, or anything the guard protects.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterable, Sequence

from .._errors import NoSuchProcess
from .._table.model import Proc
from .engine import _validated, run_async
from .machine import _Teardown
from .report import TeardownReport
from .signals import Guard
from .world import System


class PinnedWorld(System):
    """The real world, with some pids pinned to a start time and some processes protected.

    proc(pid) of a pinned pid whose start time differs raises NoSuchProcess:
    the process the caller selected is gone, whatever now holds its pid.
    """

    def __init__(self, pinned: dict[int, int], protect: Iterable[int] = ()) -> None:
        self.pinned = dict(pinned)
        self.protect = frozenset(p for p in protect if p > 1)

    def proc(self, pid: int) -> Proc:
        p = super().proc(pid)
        want = self.pinned.get(pid)
        if want is not None and p.start_time != want:
            raise NoSuchProcess(pid)
        return p

    def guard(self) -> Guard:
        base = Guard()
        return Guard(me=base.me, ancestors=(base.protected - {0, 1, base.me}) | self.protect)


async def end_trees_async(
    roots: Sequence[Proc],
    *,
    grace: float = 2.0,
    protect: Iterable[int] = (),
    signal_group: bool = True,
    max_procs: int = 16384,
) -> list[TeardownReport]:
    """End each root's tree (as terminate_tree would), all at once; one report per root, in order.

    A root that is gone, or whose pid now names another process, gets an
    empty report with extra["gone"] True; a root the guard refuses (protected,
    a kernel thread) gets one with extra["refused"] and the reason. Cancelling
    SIGKILLs what every engine holds, then CancelledError propagates.
    """
    protect = frozenset(protect)
    engines = []
    for root in roots:
        pid, grace_, _, signal_group_, max_procs_, _ = _validated(root.pid, grace, True, signal_group, max_procs)
        world = PinnedWorld({root.pid: root.start_time}, protect)
        engines.append(_Teardown(pid, grace_, True, signal_group_, max_procs_, world=world))

    async def one(root: Proc, engine: _Teardown) -> TeardownReport:
        try:
            return await run_async(engine)
        except NoSuchProcess:
            return TeardownReport(root=root, extra={"gone": True})
        except ValueError as exc:
            return TeardownReport(root=root, survivors=(root,), extra={"refused": str(exc)})

    return list(await asyncio.gather(*(one(r, e) for r, e in zip(roots, engines, strict=True))))


def end_trees(
    roots: Sequence[Proc],
    *,
    grace: float = 2.0,
    protect: Iterable[int] = (),
    signal_group: bool = True,
    max_procs: int = 16384,
) -> list[TeardownReport]:
    """end_trees_async, blocking; usable from a thread that runs an event loop (it then uses a worker thread)."""
    coro = end_trees_async(roots, grace=grace, protect=protect, signal_group=signal_group, max_procs=max_procs)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
