"""The genuine subprocess.Popen class, whatever subprocess.Popen names at the moment.

A test suite that patches subprocess.Popen (unittest.mock.patch, a fake, or
proctree.Popen itself in a drop-in run) must not change how proctree starts
its keeper or which class proctree.Popen extends: those are built on the
class CPython defines, found here, never on the name as it stands.

This module must never patch or otherwise change the subprocess module.
"""

from __future__ import annotations

import importlib.util
import subprocess
import threading
from typing import Any, cast

_lock = threading.Lock()
_private: Any = None  # a copy of the subprocess module of our own, loaded only if the real class is hidden


def _is_genuine(cls: Any) -> bool:
    return isinstance(cls, type) and cls.__module__ == "subprocess" and cls.__qualname__ == "Popen"


def _in_the_real_module(cls: Any) -> bool:
    # Its methods run in subprocess's own namespace: its CompletedProcess, CalledProcessError and
    # TimeoutExpired are the ones callers catch.
    init = getattr(cls, "__init__", None)
    return _is_genuine(cls) and getattr(init, "__globals__", None) is vars(subprocess)


def genuine_popen() -> type[subprocess.Popen]:
    """CPython's own Popen class.

    subprocess.Popen itself when it is that class; else the first class of its
    MRO that is (a subclass swapped in, such as proctree.Popen); else (a mock
    swapped in before anything looked) the class found among object's
    subclasses by its methods' namespace, the subprocess module's own. Only if
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
        if _in_the_real_module(candidate):
            found: Any = candidate
            return cast("type[subprocess.Popen]", found)
    global _private
    with _lock:
        if _private is None:
            spec = importlib.util.find_spec("subprocess")
            if spec is None or spec.loader is None:  # pragma: no cover - the stdlib always has it
                raise ImportError("the subprocess module cannot be found")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _private = module
        popen: type[subprocess.Popen] = _private.Popen
        return popen
