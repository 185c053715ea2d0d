"""End several trees at once: one teardown engine per root, driven together.

For callers that hold a set of roots rather than one pid (the orphan reaper,
a session-mode tree's marked daemons): each root is pinned to the identity it
was selected by, so a root whose pid was reused since is reported gone and
never signalled; processes the caller names as protected join the guard (the
engine spares them and everything they started, as it spares the caller's
ancestors); every engine waits for its exits in one poll(2) of the blocking driver, so
N roots cost one grace, not N.

Must never: signal a root by pid alone, or anything the guard protects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from signal import SIGTERM

from .._errors import NoSuchProcess
from .._table.model import Proc
from .engine import _check_stop, _validated, run_blocking_many
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


def make_engines(
    roots: Sequence[Proc],
    grace: float,
    protect: Iterable[int],
    signal_group: bool,
    max_procs: int,
    signal: int | str,
    hangup: bool,
    already: Mapping[tuple[int, int], int] | None,
) -> list[_Teardown]:
    """One validated engine per root, each pinned to the root's identity (for run_blocking_many or run_async)."""
    protect = frozenset(protect)
    engines = []
    for root in roots:
        pid, grace_, _, signal_group_, max_procs_, _ = _validated(root.pid, grace, True, signal_group, max_procs)
        sig, hangup_ = _check_stop(signal, hangup, signal_group_)
        world = PinnedWorld({root.pid: root.start_time}, protect)
        engines.append(
            _Teardown(
                pid,
                grace_,
                True,
                signal_group_,
                max_procs_,
                world=world,
                stop_signal=sig,
                hangup=hangup_,
                already=already,
            )
        )
    return engines


def report_of(root: Proc, result: TeardownReport | BaseException) -> TeardownReport:
    """One root's report; a root gone or refused gets an empty one saying so. Other errors propagate."""
    if isinstance(result, TeardownReport):
        return result
    if isinstance(result, NoSuchProcess):
        return TeardownReport(root=root, extra={"gone": True})
    if isinstance(result, ValueError):
        return TeardownReport(root=root, survivors=(root,), extra={"refused": str(result)})
    raise result


def end_trees(
    roots: Sequence[Proc],
    *,
    grace: float = 2.0,
    protect: Iterable[int] = (),
    signal_group: bool = True,
    max_procs: int = 16384,
    signal: int | str = SIGTERM,
    hangup: bool = False,
    already: Mapping[tuple[int, int], int] | None = None,
    stop_fd: int | None = None,
) -> list[TeardownReport]:
    """End each root's tree (as terminate_tree would), all at once; one report per root, in order.

    A root that is gone, or whose pid now names another process, gets an
    empty report with extra["gone"] True; a root the guard refuses (protected,
    a kernel thread) gets one with extra["refused"] and the reason. Runs in
    the calling thread (no thread, no event loop: it works with the pid space
    full); interrupted, it SIGKILLs what every engine holds and re-raises.
    signal, hangup: as terminate_tree's; already: (pid, start time) -> a stop
    signal another path already sent that process (it is not sent another).
    stop_fd: an fd that turns readable when the rest of the grace must be skipped.
    """
    engines = make_engines(roots, grace, protect, signal_group, max_procs, signal, hangup, already)
    results = run_blocking_many(engines, stop_fd, capture=(NoSuchProcess, ValueError))
    return [report_of(r, res) for r, res in zip(roots, results, strict=True)]
