"""contain_self(): contain the calling process's future descendants, however they are started.

The caller cannot change how third-party code starts processes (Popen,
os.fork, multiprocessing, asyncio), so containment is put on the caller
itself, and everything started after it inherits it:

- the environment: ``PROCTREE_OWNER`` names the caller (placed, with a tag)
  and ``PROCTREE_TREE`` carries a tree id of its own (chained to any
  enclosing tree), so every descendant carries them after it double-forks and
  reparents, and a reaper can prove it orphaned once the caller is gone;
- Linux, ``subreaper=True``: the caller becomes a child subreaper
  (PR_SET_CHILD_SUBREAPER), so an orphan among its descendants reparents to
  it instead of init, and the members are the caller's descendants: a walk
  of the kernel's children lists, no table scan. Without it, members are the
  processes carrying the tree id (one scan of every environment, in C);
- a watchdog: a native keeper in session mode, holding a sleeper, whose tree
  id is the one every descendant carries. When the caller dies in any way
  (SIGKILL and the OOM killer included), the keeper ends everything that
  carries it.

Reaping: a subreaper inherits the zombies of orphans it never started.
reap_adopted() reaps a zombie child only when no live subprocess.Popen or
multiprocessing object of this process claims its pid; a child started with
a bare os.fork() that has already exited and has not been waited for cannot
be told from an adopted orphan (docs/pytest.md, "What escapes").

Must never: signal anything that is not a member (the teardown engine's
guard keeps the caller and its ancestors out); reap a child a live Popen or
multiprocessing object of this process owns.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from .._errors import NoSuchProcess
from .._table import binding as _binding
from .._table import live as _live
from .._table.model import Proc
from .._teardown import many as _many
from .._teardown.report import TeardownReport
from . import marker as _marker

_LINUX = sys.platform.startswith("linux")
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_SLEEPER = ["sleep", "2147483647"]

Identity = tuple[int, int]


@dataclass(frozen=True)
class Mark:
    """The members of a Containment at one moment, by identity (Containment.mark())."""

    identities: frozenset[Identity] = field(default_factory=frozenset)


def _set_subreaper(on: bool) -> bool:
    """prctl(PR_SET_CHILD_SUBREAPER, on); True if it took effect (never off Linux)."""
    if not _LINUX:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0


def _is_subreaper() -> bool:
    if not _LINUX:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    flag = ctypes.c_int(0)
    return libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value != 0


class Containment:
    """What contain_self() returned: the calling process's future descendants, contained.

    tree_id:   the PROCTREE_TREE id every descendant carries
    marker:    the PROCTREE_OWNER value every descendant carries
    subreaper: True when orphans among the descendants reparent to the caller
    watchdog:  the keeper's pid, or None without a watchdog
    """

    def __init__(self, *, subreaper: bool, watchdog: bool, tag: str, grace: float) -> None:
        from .spawn import spawn  # containment's own face; imported here so that importing this module stays cheap

        self.pid = os.getpid()
        me = _binding.proc(self.pid)
        self._identity = (me.pid, me.start_time)
        self._grace = grace
        self._saved = {k: os.environ.get(k) for k in (_marker.ENV, _marker.TREE_ENV)}
        self._was_subreaper = _LINUX and _is_subreaper()
        self._closed = False
        self._lock = threading.Lock()
        self._watchdog = None
        if watchdog:
            # keep_orphans: the sleeper is only the keeper's reason to live; its exit must not end the run's processes.
            self._watchdog = spawn(_SLEEPER, contain="session", keep_orphans=True, grace=grace, tag=tag)
            tree_id = self._watchdog.tree_id
        else:
            tree_id = _marker.new_tree_id()
        self.tree_id: str = tree_id
        from .spawn import _marker_place

        self.marker: str = _marker.format_marker(me.pid, me.start_time, tag, _marker_place())
        os.environ[_marker.ENV] = self.marker
        os.environ[_marker.TREE_ENV] = _marker.tree_chain(tree_id, self._saved[_marker.TREE_ENV])
        self.subreaper: bool = bool(subreaper and _LINUX and (self._was_subreaper or _set_subreaper(True)))

    @property
    def watchdog(self) -> int | None:
        return None if self._watchdog is None else self._watchdog.keeper_pid

    def _own(self) -> set[int]:
        """The watchdog's own processes (its keeper and sleeper): never members."""
        if self._watchdog is None:
            return set()
        own = {self._watchdog.keeper_pid}
        try:
            own.update(p.pid for p in _live.descendants(self._watchdog.keeper_pid))
        except NoSuchProcess:
            pass
        return own

    def members(self) -> list[Proc]:
        """The live (non-zombie) processes started since contain_self(), the watchdog's excepted."""
        own = self._own()
        if self.subreaper:
            try:
                found = _live.descendants(self.pid)
            except NoSuchProcess:
                return []
        else:
            snap = _binding.snapshot()
            found = []
            pids = [p.pid for p in snap.procs() if p.pid != self.pid and not p.is_zombie]
            for pid, value in _binding.env_scan(_marker.TREE_ENV, pids).items():
                if isinstance(value, bytes) and _marker.carries_tree(value, self.tree_id):
                    found.append(snap[pid])
        return [p for p in found if not p.is_zombie and p.pid not in own and p.pid != self.pid]

    def mark(self) -> Mark:
        """The members now, to compare with later (leaks_since)."""
        return Mark(frozenset((p.pid, p.start_time) for p in self.members()))

    def leaks_since(self, mark: Mark, *, exclude: Iterable[Identity] = ()) -> list[Proc]:
        """The live members that were not members at mark, less exclude (identities), in pid order."""
        skip = set(mark.identities) | set(exclude)
        return sorted((p for p in self.members() if (p.pid, p.start_time) not in skip), key=lambda p: p.pid)

    def end(self, procs: Iterable[Proc] | None = None, *, grace: float | None = None) -> list[TeardownReport]:
        """End procs (default: every member) with what they started: TERM, the grace, KILL; identity-checked.

        Each process whose parent is not among them is a root; the caller and
        its ancestors are never touched. Zombies are left for their owners
        (reap_adopted() reaps the adopted ones).
        """
        chosen = list(self.members() if procs is None else procs)
        if not chosen:
            return []
        pids = {p.pid for p in chosen}
        roots = [p for p in chosen if p.ppid not in pids]
        reports = _many.end_trees(roots, grace=self._grace if grace is None else grace, protect=self._own())
        self.reap_adopted()
        return reports

    def reap_adopted(self) -> list[int]:
        """Reap the zombie children that no live Popen or multiprocessing object of this process owns; their pids.

        A subreaper adopts the orphans of its descendants; when they exit,
        nobody else will wait for them.
        """
        if not _LINUX:
            return []
        try:
            kids = _live.children(self.pid)
        except NoSuchProcess:
            return []
        zombies = [p for p in kids if p.is_zombie]
        if not zombies:
            return []
        claimed = _claimed_pids()
        if self._watchdog is not None:
            claimed.add(self._watchdog.keeper_pid)
        reaped = []
        for z in zombies:
            if z.pid in claimed:
                continue
            try:
                got = os.waitid(os.P_PID, z.pid, os.WEXITED | os.WNOHANG)
            except ChildProcessError:
                continue
            if got is not None:
                reaped.append(z.pid)
        return reaped

    def close(self) -> list[TeardownReport]:
        """End every member, stop the watchdog, and restore the environment and the subreaper flag."""
        with self._lock:
            if self._closed:
                return []
            self._closed = True
        try:
            reports = self.end()
        finally:
            if self._watchdog is not None:
                try:
                    self._watchdog.terminate(grace=0.5)
                except Exception:  # noqa: BLE001 - closing must finish restoring the process
                    pass
            for k, v in self._saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            if self.subreaper and not self._was_subreaper:
                _set_subreaper(False)
            global _current
            if _current is self:
                _current = None
        return reports

    def __enter__(self) -> Containment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _claimed_pids() -> set[int]:
    """Pids of this process's children that a live subprocess.Popen or multiprocessing object still owns."""
    import subprocess

    claimed: set[int] = set()
    for obj in gc.get_objects():
        if isinstance(obj, subprocess.Popen) and obj.returncode is None:
            claimed.add(obj.pid)
    mp = sys.modules.get("multiprocessing.process")
    if mp is not None:
        for proc in list(getattr(mp, "_children", ())):
            popen = getattr(proc, "_popen", None)
            if popen is not None and getattr(popen, "returncode", 0) is None:
                claimed.add(popen.pid)
    return claimed


_current: Containment | None = None


def contain_self(
    *, subreaper: bool = True, watchdog: bool = True, tag: str = "self", grace: float = 2.0
) -> Containment:
    """Contain every process the caller starts from now on (see Containment); one per process.

    subreaper: Linux, become a child subreaper so orphans come back (members
               by a walk of the caller's descendants); False: members by
               their PROCTREE_TREE (a scan of every environment).
    watchdog:  start a native keeper that ends every member when the caller
               dies, SIGKILL included.
    tag:       the marker's tag (reapers can select by it).
    Raises RuntimeError if this process already contains itself.
    """
    global _current
    if not isinstance(subreaper, bool) or not isinstance(watchdog, bool):
        raise TypeError("subreaper and watchdog must be bools")
    tag = _marker.check_tag(tag)
    if _current is not None and not _current._closed and _current.pid == os.getpid():
        raise RuntimeError("this process already contains itself (contain_self() was called and not closed)")
    from .._validate import check_seconds

    _current = Containment(subreaper=subreaper, watchdog=watchdog, tag=tag, grace=check_seconds(grace, "grace"))
    return _current
