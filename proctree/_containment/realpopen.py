"""The genuine subprocess.Popen class, whatever subprocess.Popen names at the moment.

A test suite that patches subprocess.Popen (unittest.mock.patch, a fake, or
proctree.Popen itself in a drop-in run) must not change how proctree starts
its keeper or which class proctree.Popen extends: those are built on the
class CPython defines, found here, never on the name as it stands.

This module must never patch or otherwise change the subprocess module.
"""

from __future__ import annotations

import os
import subprocess
import threading
import types

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any
_lock = threading.Lock()
_private: Any = None  # a copy of the subprocess module of our own, loaded only if the real class is hidden
_NAMESPACE = vars(subprocess)  # the genuine module's namespace, as imported: what CPython's methods run in
_FILE = subprocess.__file__


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # another thread may have held it at the fork: it would never be released


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _is_genuine(cls: Any) -> bool:
    """cls is CPython's own Popen: methods of its own run in the subprocess module's namespace, from its file.

    Never by name: a subclass (a counting or logging wrapper in a test
    harness) can set __module__ = "subprocess" and __qualname__ = "Popen",
    but the methods it defines run in its own module's globals, and one that
    defines none has none in its own __dict__. One such method is enough: a
    test may patch others on the genuine class (monkeypatch of _execute_child).
    CPython's class derives from object alone; every subclass has another base.
    """
    if not isinstance(cls, type) or cls.__bases__ != (object,):
        return False
    for fn in cls.__dict__.values():
        if (
            isinstance(fn, types.FunctionType)
            and fn.__globals__ is _NAMESPACE
            and fn.__code__.co_filename == _FILE
            and fn.__qualname__.startswith("Popen.")
        ):
            return True
    return False


def genuine_popen() -> type[subprocess.Popen]:
    """CPython's own Popen class.

    subprocess.Popen itself when it is that class; else the first class of its
    MRO that is (a subclass swapped in, such as proctree.Popen); else (a mock
    swapped in before anything looked) the class found among object's
    subclasses. Each is recognised by its own methods' namespace and code
    (_is_genuine), never by a name a subclass can carry. Only if
    even that fails, the Popen of a private copy of the subprocess module,
    loaded once and never registered in sys.modules (its exceptions are not
    subprocess's: a last resort).
    """
    cls = subprocess.Popen
    if _is_genuine(cls):
        return cls
    for base in getattr(cls, "__mro__", ()) if isinstance(cls, type) else ():
        if _is_genuine(base):
            return base
    for candidate in object.__subclasses__():
        if _is_genuine(candidate):
            found: Any = candidate
            return found
    global _private
    with _lock:
        if _private is None:
            # Its source run in a module of our own (what importlib would do, without importlib's import time).
            try:
                module = types.ModuleType("subprocess")
                module.__file__ = _FILE
                with open(_FILE, "rb") as source:
                    code = compile(source.read(), _FILE, "exec", dont_inherit=True)
                exec(code, module.__dict__)
            except (OSError, SyntaxError, ValueError):  # no source (a zipped or bytecode-only stdlib)
                module = _load_private_copy()
            _private = module
        popen: type[subprocess.Popen] = _private.Popen
        return popen


def _load_private_copy() -> Any:
    """subprocess loaded afresh by importlib's own loader, wherever the stdlib keeps it (never registered)."""
    import importlib.util

    spec = importlib.util.find_spec("subprocess")
    if spec is None or spec.loader is None:  # pragma: no cover - the stdlib always has it
        raise ImportError("the subprocess module cannot be found")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
