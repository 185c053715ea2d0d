"""proctree's lazy imports (a public name's module loads on first use), made safe across os.fork().

A thread importing a module holds that module's import lock until the import
ends. A fork meanwhile (os.fork, multiprocessing's fork start method, from
any other thread) copies the held lock into the child, where the importing
thread does not exist: the child's own first use of the name (its first
proctree.Popen) would wait for that lock forever, and the module stays half
made. So the child forgets what a thread of the parent was importing through
proctree's lazy imports at the fork (the module and what it was importing in
turn, each with its lock) and imports it afresh when it needs it.

Only the modules whose import lock is held by such a thread are touched; never
one the forking thread itself is importing (it goes on in the child), nor one
another thread was importing on its own. This module must stay cheap to import
(`import proctree` imports it) and must never import anything itself.
"""

from __future__ import annotations

import _thread
import os
import sys
from types import ModuleType

TYPE_CHECKING = False  # typing is not imported at run time: see the docstring
if TYPE_CHECKING:
    from typing import Any

_importing: dict[int, int] = {}  # thread id -> how many lazy imports of proctree's it has under way


def absolute(name: str, package: str) -> str:
    """The absolute name of name (".x" or "..x" relative to package, as in a from-import; else as it is)."""
    level = len(name) - len(name.lstrip("."))
    if not level:
        return name
    if not package:
        raise TypeError(f"the relative name {name!r} needs a package")
    parts = package.rsplit(".", level - 1)
    if len(parts) < level:
        raise ImportError(f"{name!r} in {package!r}: a relative name beyond the top-level package")
    base = parts[0]
    return f"{base}.{name[level:]}" if name[level:] else base


def load(name: str, package: str) -> ModuleType:
    """importlib.import_module(name, package), recorded for the child of a fork that comes meanwhile.

    (Through __import__: importlib itself costs import time that `import proctree` should not pay.)
    """
    me = _thread.get_ident()
    _importing[me] = _importing.get(me, 0) + 1
    try:
        full = absolute(name, package)
        __import__(full)
        return sys.modules[full]
    finally:
        depth = _importing.get(me, 1) - 1
        if depth > 0:
            _importing[me] = depth
        else:
            _importing.pop(me, None)


class LazyModule:
    """A module loaded through load() at the first use of one of its attributes.

    For what only some calls need (ending what a command left, a keeper's
    loss): a start does not pay its import, and a fork during that import
    later is as safe as any of load()'s.
    """

    __slots__ = ("_name", "_package")

    def __init__(self, name: str, package: str) -> None:
        self._name, self._package = name, package

    def __getattr__(self, attr: str) -> Any:
        return getattr(load(self._name, self._package), attr)

    def __repr__(self) -> str:
        return f"<module {self._name!r} of {self._package}, loaded at its first use>"


def _half_made(module: object) -> bool:
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def forget_orphaned_imports(threads: set[int]) -> list[str]:
    """Drop the half-made modules whose import lock one of threads holds (they do not exist here); their names.

    Uses importlib's own bookkeeping (its per-module locks and their owners);
    where that is not as expected, nothing is dropped.
    """
    bootstrap = sys.modules.get("_frozen_importlib") or sys.modules.get("importlib._bootstrap")
    locks = getattr(bootstrap, "_module_locks", None)
    if not threads or not isinstance(locks, dict):
        return []
    dropped = []
    for name, ref in list(locks.items()):
        lock = ref() if callable(ref) else None
        if getattr(lock, "owner", None) not in threads:
            continue
        # Held from before the module is in sys.modules until after its code ran: drop the lock (the next
        # import makes a new one, importlib's own path for a lock gone) and the module if half made.
        locks.pop(name, None)
        if _half_made(sys.modules.get(name)):
            sys.modules.pop(name, None)
        dropped.append(name)
    blocking: Any = getattr(bootstrap, "_blocking_on", None)
    if dropped and blocking is not None and hasattr(blocking, "pop"):
        for thread in threads:
            blocking.pop(thread, None)  # its deadlock detection must not follow threads that are gone
    return dropped


def _after_fork_in_child() -> None:
    me = _thread.get_ident()
    gone = {thread for thread in _importing if thread != me}
    for thread in gone:
        del _importing[thread]
    if gone:
        forget_orphaned_imports(gone)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
