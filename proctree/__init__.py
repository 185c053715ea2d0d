"""proctree: stop a process and everything it started, and nothing else.

Public API (stable): Proc, Snapshot, snapshot(), proc(), children(),
descendants(); terminate_tree(), terminate_tree_async(), TeardownReport;
spawn(), spawn_async(), Tree, ContainmentUnavailable; and the exceptions
Error, NoSuchProcess, AccessDenied.

The teardown and containment layers (and asyncio, which they use) load on
first use, so `import proctree` stays cheap for code that only reads the table.
"""
import importlib

from ._errors import AccessDenied, Error, NoSuchProcess
from ._table.model import Proc, Snapshot
from ._validate import check_pid as _check_pid


# name -> the module that defines it, imported when the name is first used.
_LAZY = {
    "TeardownReport": "._teardown.report",
    "terminate_tree": "._teardown.engine",
    "terminate_tree_async": "._teardown.engine",
    "ContainmentUnavailable": "._containment.spawn",
    "Tree": "._containment.spawn",
    "spawn": "._containment.spawn",
    "spawn_async": "._containment.spawn",
}

__all__ = [
    "AccessDenied",
    "ContainmentUnavailable",
    "Error",
    "NoSuchProcess",
    "Proc",
    "Snapshot",
    "TeardownReport",
    "Tree",
    "children",
    "descendants",
    "proc",
    "snapshot",
    "spawn",
    "spawn_async",
    "terminate_tree",
    "terminate_tree_async",
]


def __getattr__(name):
    if name == "__version__":
        # Written once, in pyproject.toml; read only when asked, since
        # importlib.metadata costs import time.
        from importlib.metadata import version

        value = globals()["__version__"] = version("proctree")
        return value
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'proctree' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


def snapshot():
    """Return a Snapshot of every process visible to the caller."""
    from ._table import binding as _binding

    return _binding.snapshot()


def proc(pid):
    """Return the Proc for pid. Raises NoSuchProcess if it does not exist."""
    from ._table import binding as _binding

    return _binding.proc(_check_pid(pid))


def children(pid):
    """Return the direct children of pid as a list of Proc (pid excluded)."""
    from ._table import live as _live

    return _live.children(_check_pid(pid))


def descendants(pid):
    """Return every process below pid, breadth-first (pid excluded)."""
    from ._table import live as _live

    return _live.descendants(_check_pid(pid))
