"""Processes a live object still holds after the test that started them: not leaked yet.

A test's own subprocess.Popen that it dropped is put in subprocess's list of
processes to reap (Popen.__del__), and a multiprocessing.Process it dropped is
held by multiprocessing's registry of started children alone: neither is
held. A Popen (an asyncio process holds one through its transport) or a
multiprocessing object that something else still references (a fixture's
value, a module global, a lazily started server's object, a pool) is held:
its process is checked again once nothing holds it, and at the session's end.

Each holder is remembered by a weak reference, so checking again costs no scan
of the heap for a Popen.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

# pid -> a check that says whether its holder still holds it
Holders = dict[int, Callable[[], bool]]


def holders(ignore: list[Any] | None = None) -> Holders:
    """Every process a live object holds now (a heap scan: called only when a test left something running).

    ignore: containers (pytest's funcargs of a fixture's value) whose references alone do not make a Popen held.
    """
    gc.collect()  # a dropped Popen in a reference cycle is not held: collecting it puts it in subprocess._active
    out: Holders = {}
    heap = gc.get_objects()
    for obj in heap:
        if isinstance(obj, subprocess.Popen) and _popen_holds(obj):
            if ignore and not _referenced_beyond(obj, {id(c) for c in ignore} | {id(heap)}):
                continue
            out[obj.pid] = _popen_check(weakref.ref(obj))
    heap.clear()  # the heap's list refers to every object: kept, it would make each multiprocessing one held
    for pid, obj in _multiprocessing_held():
        out[pid] = _multiprocessing_check(weakref.ref(obj))
    return out


def _referenced_beyond(obj: object, ignore: set[int]) -> bool:
    """True if something other than the ignored containers, a frame (the scan's own) or obj's own dict refers
    to obj."""
    for r in gc.get_referrers(obj):
        if id(r) in ignore or isinstance(r, (types.FrameType, types.MethodType)):
            continue
        if isinstance(r, dict) and r is getattr(obj, "__dict__", None):
            continue
        return True
    return False


def _popen_holds(p: subprocess.Popen[Any]) -> bool:
    active = getattr(subprocess, "_active", None) or ()
    return p.returncode is None and not any(a is p for a in active)


def _popen_check(ref: weakref.ReferenceType[subprocess.Popen[Any]]) -> Callable[[], bool]:
    def still() -> bool:
        p = ref()
        return p is not None and _popen_holds(p)

    return still


def _multiprocessing_check(ref: weakref.ReferenceType[Any]) -> Callable[[], bool]:
    def still() -> bool:
        obj = ref()
        return obj is not None and any(o is obj for _, o in _multiprocessing_held())

    return still


def _multiprocessing_held() -> list[tuple[int, Any]]:
    """(pid, Process) of live multiprocessing processes that something holds beyond multiprocessing's registry
    of started children (a pool's workers, held by the pool a fixture keeps)."""
    mp = sys.modules.get("multiprocessing.process")
    if mp is None:
        return []
    registry = getattr(mp, "_children", None)
    started = list(registry or ())
    objs: list[Any] = []
    for obj in started:
        popen = getattr(obj, "_popen", None)
        if popen is not None and getattr(popen, "returncode", 0) is None:
            objs.append(obj)
    ignore = {id(registry), id(objs), id(started)}
    out: list[tuple[int, Any]] = []
    for obj in objs:  # no (pid, obj) tuples built before the look: each would be one more referrer
        for r in gc.get_referrers(obj):
            if id(r) in ignore or isinstance(r, (types.FrameType, types.MethodType)):
                continue
            if isinstance(r, dict) and r is getattr(obj, "__dict__", None):
                continue
            out.append((obj._popen.pid, obj))
            break
    return out
