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
from .._table.model import Proc, Snapshot
from .._teardown import many as _many
from .._teardown.report import TeardownReport
from . import sweep as _sweep
from .evidence import marker as _marker

_LINUX = sys.platform.startswith("linux")
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_SLEEPER = ["sleep", "2147483647"]

Identity = tuple[int, int]


@dataclass(frozen=True)
class Mark:
    """The members of a Containment at one moment, by identity (Containment.mark())."""

    identities: frozenset[Identity] = field(default_factory=frozenset)
    procs: tuple[Proc, ...] = field(default=(), compare=False)


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
        # What already ran below the caller is not a member, nor is anything it starts later: it was not
        # started under this containment (a helper started before an exec, a plugin's server).
        own = self._own_now()
        self._own_pids = own
        try:
            before = _live.descendants(self.pid)
        except NoSuchProcess:
            before = []
        self._outside: set[Identity] = {(p.pid, p.start_time) for p in before if p.pid not in own}
        self._adopted: set[Identity] = set()  # members once seen below another parent: ours to reap

    @staticmethod
    def current() -> Containment | None:
        """This process's open containment (contain_self() called and not closed), or None."""
        return current()

    @property
    def watchdog(self) -> int | None:
        return None if self._watchdog is None else self._watchdog.keeper_pid

    def _own_now(self) -> set[int]:
        """The watchdog's own processes (its keeper and sleeper): never members."""
        if self._watchdog is None:
            return set()
        own = {self._watchdog.keeper_pid}
        try:
            own.update(p.pid for p in _live.descendants(self._watchdog.keeper_pid))
        except NoSuchProcess:
            pass
        return own

    def _here(self) -> bool:
        """True in the process that made this containment (a fork child inherits the object, not the containment)."""
        return os.getpid() == self.pid and not self._closed

    def members(self) -> list[Proc]:
        """The live (non-zombie) processes started since contain_self(), with what they started; the watchdog's
        and what ran below the caller before it (and what those start) excepted. [] in a fork child."""
        if not self._here():
            return []
        own = self._own_pids
        if self.subreaper:
            try:
                found = _live.descendants(self.pid)
            except NoSuchProcess:
                return []
            # Breadth-first: a parent comes before its children, so one pass drops whole outside subtrees.
            outside = {p.pid for p in found if (p.pid, p.start_time) in self._outside or p.pid in own}
            kept = []
            for p in found:
                if p.pid in outside:
                    continue
                if p.ppid in outside:
                    outside.add(p.pid)
                    continue
                kept.append(p)
            found = kept
        else:
            snap = _binding.snapshot()
            found = []
            pids = [p.pid for p in snap.procs() if p.pid != self.pid and not p.is_zombie]
            values = _binding.env_scan(_marker.TREE_ENV, pids)
            _sweep.reread_absent(values, self._maybe_in_exec(snap, values))
            for pid, value in values.items():
                if isinstance(value, bytes) and _marker.carries_tree(value, self.tree_id):
                    found.append(snap[pid])
        out = [p for p in found if not p.is_zombie and p.pid not in own and p.pid != self.pid]
        self._adopted.update((p.pid, p.start_time) for p in out if p.ppid != self.pid)
        return out

    def _maybe_in_exec(self, snap: Snapshot, values: dict[int, bytes | str]) -> list[int]:
        """The processes started since the caller that read as having no tree id and no command line either: an
        exec under way (or an exit), to be read again. A process that scrubbed its environment keeps its argv."""
        unsure = []
        for pid, value in values.items():
            p = snap[pid]
            if value != "absent" or p.ppid == _sweep.KTHREADD or p.start_time < self._identity[1]:
                continue
            try:
                if not _binding.cmdline_block(pid):
                    unsure.append(pid)
            except (NoSuchProcess, OSError):
                pass
        return unsure

    def mark(self) -> Mark:
        """The members now, to compare with later (leaks_since)."""
        members = self.members()
        return Mark(frozenset((p.pid, p.start_time) for p in members), tuple(members))

    @staticmethod
    def members_of(mark: Mark) -> list[Proc]:
        """The members a mark was taken of, as Proc records."""
        return list(mark.procs)

    def leaks_since(
        self, mark: Mark, *, exclude: Iterable[Identity] = (), members: Iterable[Proc] | None = None
    ) -> list[Proc]:
        """The live members that were not members at mark, less exclude (identities), in pid order.

        members: the members as just read (members()), to save reading them again.
        """
        skip = set(mark.identities) | set(exclude)
        now = self.members() if members is None else members
        return sorted((p for p in now if (p.pid, p.start_time) not in skip), key=lambda p: p.pid)

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
        if not self._here():
            return []
        # Ended by us: once they are zombies, nobody else will wait for those that were not our own children.
        self._adopted.update((p.pid, p.start_time) for p in chosen if p.ppid != self.pid)
        reports = _many.end_trees(roots, grace=self._grace if grace is None else grace, protect=self._own_pids)
        self.reap_adopted()
        return reports

    def reap_adopted(self) -> list[int]:
        """Reap the zombie children that were adopted (seen below another parent before); their pids.

        A subreaper adopts the orphans of its descendants; when they exit,
        nobody else will wait for them. A zombie child never seen below
        another parent may be the caller's own (os.fork, posix_spawn, a
        Popen) and is left for its owner, as is one a live Popen or
        multiprocessing object claims.
        """
        if not _LINUX:
            return []
        if not self._here() or not self._adopted:
            return []
        try:
            kids = _live.children(self.pid)
        except NoSuchProcess:
            return []
        zombies = [p for p in kids if p.is_zombie and (p.pid, p.start_time) in self._adopted]
        if not zombies:
            return []
        claimed = _claimed_pids()
        reaped = []
        for z in zombies:
            if z.pid in claimed or z.pid in self._own_pids:
                continue
            try:
                got: object = os.waitid(os.P_PID, z.pid, os.WEXITED | os.WNOHANG)
            except ChildProcessError:
                continue
            except AttributeError:  # no waitid (macOS before Python 3.13): waitpid reaps the zombie alike
                try:
                    got = os.waitpid(z.pid, os.WNOHANG)[0] or None
                except ChildProcessError:
                    continue
            if got is not None:
                reaped.append(z.pid)
                self._adopted.discard((z.pid, z.start_time))
        return reaped

    def close(self, *, spare: Iterable[Identity] = ()) -> list[TeardownReport]:
        """End every member, stop the watchdog, and restore the environment and the subreaper flag.

        spare: identities (pid, start time) of members left running, with what they started: the caller checks
        them later itself (the pytest plugin's processes held at the session's end).
        """
        spared = _identities(spare)
        # Not blocking: a signal handler that closes while the main thread is closing must not wait for it.
        if not self._lock.acquire(blocking=False):
            return []
        try:
            if self._closed:
                return []
            if os.getpid() != self.pid:
                # A fork child inherited this object: the containment is its parent's. Only the environment
                # it inherited is put back.
                self._restore_environment()
                return []
            reports = []
            try:
                members = self.members()
                if spared:
                    members = _without(members, spared)
                reports = self.end(members)
            finally:
                self._closed = True
                self._release()
            return reports
        finally:
            self._lock.release()

    def _restore_environment(self) -> None:
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def _release(self) -> None:
        """Stop the watchdog, restore the environment and the subreaper flag."""
        global _current
        if self._watchdog is not None:
            try:
                self._watchdog.terminate(grace=0.5)
            except Exception:  # noqa: BLE001 - closing must finish restoring the process
                pass
        self._restore_environment()
        if self.subreaper and not self._was_subreaper:
            _set_subreaper(False)
        if _current is self:
            _current = None

    def __enter__(self) -> Containment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _identities(spare: Iterable[Identity]) -> set[Identity]:
    """spare as a set; TypeError unless each is a (pid, start time) pair of ints."""
    out = set()
    for ident in spare:
        if not (
            isinstance(ident, tuple)
            and len(ident) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in ident)
        ):
            raise TypeError(f"spare must hold (pid, start_time) pairs of ints, got {ident!r}")
        out.add(ident)
    return out


def _without(members: list[Proc], spared: set[Identity]) -> list[Proc]:
    """members less the spared ones and every member below one of them (by parent links)."""
    by_pid = {p.pid: p for p in members}
    out = []
    for p in members:
        q: Proc | None = p
        for _ in range(64):  # a chain of parents is short; a cycle of reused pids must not loop
            if q is None or (q.pid, q.start_time) in spared:
                break
            q = by_pid.get(q.ppid)
        if q is None or (q.pid, q.start_time) not in spared:
            out.append(p)
    return out


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


def current() -> Containment | None:
    """This process's open containment, or None."""
    c = _current
    return c if c is not None and c._here() else None


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
