"""proctree: stop a process and everything it started, and nothing else.

Public API (stable): Proc, Snapshot, snapshot(), proc(), children(),
descendants(), and the exceptions Error, NoSuchProcess, AccessDenied.
"""
from ._errors import AccessDenied, Error, NoSuchProcess
from ._model import Proc, Snapshot
from ._report import TeardownReport
from ._teardown import terminate_tree, terminate_tree_async
from ._validate import check_pid as _check_pid

__version__ = "0.1.0"

__all__ = [
    "AccessDenied",
    "Error",
    "NoSuchProcess",
    "Proc",
    "Snapshot",
    "TeardownReport",
    "children",
    "descendants",
    "proc",
    "snapshot",
    "terminate_tree",
    "terminate_tree_async",
]


def snapshot():
    """Return a Snapshot of every process visible to the caller."""
    from . import _binding

    return _binding.snapshot()


def proc(pid):
    """Return the Proc for pid. Raises NoSuchProcess if it does not exist."""
    from . import _binding

    return _binding.proc(_check_pid(pid))


def children(pid):
    """Return the direct children of pid as a list of Proc (pid excluded)."""
    from . import _live

    return _live.children(_check_pid(pid))


def descendants(pid):
    """Return every process below pid, breadth-first (pid excluded)."""
    from . import _live

    return _live.descendants(_check_pid(pid))
