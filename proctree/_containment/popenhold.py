"""proctree.Popen's holding tree: one keeper per owner process whose cgroup holds each command's cgroup.

(Without cgroups the holding keeper is in session mode, and popenmarked.py
finds the commands' trees by marker.)

A Popen command is the caller's own child (see popen.py): nothing of
proctree runs between it and its parent. What ends its tree when the owner
dies is a keeper started once per owner process (spawn(), cgroup mode) whose
command only holds it open (``proctree-enter hold``): each Popen command
joins a cgroup of its own nested in that keeper's cgroup, so the keeper's
owner-death teardown (the stop signal to every member, cgroup.kill after the
grace) reaches every command and everything it started, however the owner
dies. While the owner lives, it ends a command's cgroup itself once the
command exits (watched by the keeper watch's thread, or reaped by Popen). The command is born in its cgroup (proctree-enter
clones it there), never moved: a move waits for an RCU grace period, several
milliseconds each time.

This module must never end, kill or remove a cgroup it did not create below
its own holding tree's cgroup.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time

# Everything a start uses is imported here, with proctree.Popen, never during a start: a fork while
# another thread imports leaves the child an import lock nobody will release (and a start costs no import).
from .. import _lazyimport
from .._errors import ContainmentUnavailable
from .._table import binding as _binding
from .._teardown import pidexit as _pidexit
from . import cgroup as _cgroup
from . import cgrouppool as _pool
from . import detach as _detach
from . import keeperloss as _keeperloss
from .keeperproc import _keeper_watch
from .launch import _LINUX
from .spawn import spawn

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

    from . import cgroupworld as _cgroupworld
else:  # ending a tree or a cgroup loads at its first use: a start never pays for it
    _cgroupworld = _lazyimport.LazyModule(".cgroupworld", __package__)

# proctree.Popen's exec step, built beside the keeper (build_keeper.py, Linux only).
ENTER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "proctree-enter")
_STEP_NAME = os.path.basename(ENTER)[:15]  # its name in the process table (comm keeps 15 bytes)

# The prefix of a command's cgroup inside the holding tree's cgroup (cgroup.is_ours accepts these).
COMMAND_PREFIX = _cgroup.COMMAND_PREFIX

# How long a command's leftovers get between the stop signal and SIGKILL (the owner's death: the holder's grace).
GRACE = 2.0

_lock = threading.Lock()
_holder = None  # the holding Tree, or None
_holder_pid = 0  # the process that spawned it (a forked child needs a holder of its own)
_made: dict[int, Any] = {}  # holding keeper's pid -> its Tree, from its start until its end is done
_hold_fds: dict[int, int] = {}  # holding keeper's pid -> a pidfd on its hold process (readable once hold exited)
_unavailable: tuple[int, str] | None = None  # (pid, why) when cgroup containment failed for this process
_counter = itertools.count(1)
_kept: list[str] = []  # cgroups of keep_orphans commands, removed once empty
_parents: list[Any] = []  # in a forked child: the holding trees of its parent (never used, never ended here)
_force_session = False  # tests: the marked fallback even where cgroups work


def _after_fork_in_child() -> None:
    """A forked child starts afresh: the holding tree is the parent's (its keeper watches the parent), and a
    lock another thread held at the fork would never be released."""
    global _lock, _holder, _holder_pid
    _lock = threading.Lock()
    if _holder is not None:
        _parents.append(_holder)  # kept, inert: nothing of it runs here (Popen's __del__ would poll its keeper)
    _holder, _holder_pid = None, 0
    for fd in _hold_fds.values():
        with contextlib.suppress(OSError):
            os.close(fd)  # the parent's: signalling its hold from here must never be possible
    _hold_fds.clear()
    _made.clear()
    _kept.clear()
    _ending.clear()


def unavailable_reason() -> str | None:
    """Why commands cannot be held in cgroups in this process, or None (not known to fail)."""
    return _unavailable[1] if _unavailable is not None and _unavailable[0] == os.getpid() else None


def holder():
    """The holding Tree of this process (spawned on first use), or None where no mode works here.

    Its mode is "cgroup" where a writable cgroup v2 allows (every command in a
    cgroup nested in the holder's), else "session": commands then carry the
    holder's marker chain (popenmarked.py), which its keeper follows on the
    owner's death.
    """
    global _holder, _holder_pid, _unavailable
    pid = os.getpid()
    with _lock:
        tree = _holder
        if tree is not None and _holder_pid == pid:
            if not _lost(tree):
                return tree
            _end_lost(tree)  # before anything of a new tree is made: the old one never outlives its loss
            _holder, _holder_pid = None, 0
        if _unavailable is not None and _unavailable[0] == pid:
            return None
        hold = [ENTER, "hold"] if os.access(ENTER, os.X_OK) else ["sleep", "2147483647"]
        kw: dict[str, Any] = dict(
            grace=GRACE, tag="popen", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        reason = None
        if not _LINUX:
            reason = "cgroups are Linux-only"
        elif not os.access(ENTER, os.X_OK):
            reason = f"proctree's exec step {ENTER} is missing (the installation is incomplete)"
        elif _force_session:
            reason = "the marked fallback was asked for (tests)"
        else:
            try:
                tree = spawn(hold, contain="cgroup", **kw)
            except ContainmentUnavailable as exc:
                reason = str(exc)
        if reason is not None:
            try:
                tree = spawn(hold, contain="session", **kw)
            except ContainmentUnavailable as exc:
                _unavailable = (pid, f"{reason}; {exc}")
                return None
        _holder, _holder_pid = tree, pid
        _watch_hold(tree)
        return tree


def holder_for_start():
    """holder(), for a start: on an event loop's thread, a holding tree not made yet is made on a worker thread.

    Making it is filesystem work (its cgroup, its receipt, the keeper's
    start) that must not run on the loop's thread. That thread only waits
    for it, reading a pipe as Popen itself reads its error pipe while the
    command execs; it waits as long as the first start takes (docs/dropin.md,
    "What differs"). Later starts find the tree made and make nothing here.
    """
    if _pool.on_loop_thread():
        tree, pid = _holder, os.getpid()
        if (tree is None or _holder_pid != pid or _lost(tree)) and not (_unavailable and _unavailable[0] == pid):
            return _on_worker(holder)
    return holder()


def _on_worker(fn: Any) -> Any:
    """fn() run on a new thread; the caller waits for its end on a pipe (EOF once it closes the write end)."""
    outcome: list[tuple[bool, Any]] = []
    r, w = os.pipe()

    def run() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as exc:  # noqa: BLE001 - raised on the caller's thread
            outcome.append((False, exc))
        finally:
            os.close(w)

    try:
        try:
            threading.Thread(target=run, name="proctree-popen-holder", daemon=True).start()
        except BaseException as exc:
            os.close(w)
            if isinstance(exc, RuntimeError):  # no thread to be had: made here, as before, rather than not at all
                return fn()
            raise
        while os.read(r, 64):
            pass
    finally:
        os.close(r)
    done, value = outcome[0]
    if not done:
        raise value
    return value


def prepare() -> None:
    """Make the holding tree and the ready command cgroups now (on a worker thread an async start awaits)."""
    tree = holder()
    if tree is not None and tree.mode == "cgroup":
        _pool.fill(tree.cgroup, lambda: new_cgroup_path(tree))


def prepared() -> bool:
    """True when a start on a loop's thread would make nothing: a live holding tree here, and a cgroup ready."""
    tree = _holder
    if tree is None or _holder_pid != os.getpid() or _lost(tree):
        return False
    return tree.mode != "cgroup" or (tree.cgroup is not None and _pool.has_ready(tree.cgroup))


def release(grace: float = GRACE) -> None:
    """End this process's holding tree, and with it every command proctree.Popen started here that still runs.

    The next proctree.Popen spawns a new one. For a test suite that counts its
    own children between tests (the holder lives as long as its owner otherwise).
    """
    global _holder, _holder_pid
    with _lock:
        tree, mine = _holder, _holder_pid == os.getpid()
        _holder, _holder_pid = None, 0
    if tree is not None and mine:
        _close_hold_fd(tree.keeper_pid)
        _made.pop(tree.keeper_pid, None)
        with contextlib.suppress(OSError, ValueError):
            tree.send_signal(signal.SIGKILL)  # the hold step blocks every other signal: only this ends it at once
        tree.terminate(grace=grace)


def _exited(tree: Any) -> bool:
    """The holding keeper (our unreaped child) has exited: one waitid that reaps nothing, else a table read."""
    return tree.parts.keeper.returncode is not None or _pidexit.child_exited(tree.keeper_pid)


def _watch_hold(tree: Any) -> None:
    """Open a pidfd on the new holding tree's hold, and have the keeper watch end hold the moment its keeper dies.

    The pidfd is checked at every start for readability only (a poll with no
    wait): the cheapest way to see hold gone while its keeper still lives
    and is ending the holding tree. It is pinned to hold's start time, so a
    reused pid is never taken for it. Without pidfds (not Linux) only the
    keeper's exit is seen.
    """
    for keeper_pid, old in list(_made.items()):  # lost trees whose keeper ended them itself, and was reaped
        if old.parts.keeper.returncode is not None and (old.parts.life.done or old.parts.life.recovered.is_set()):
            _made.pop(keeper_pid, None)
    _made[tree.keeper_pid] = tree
    if tree.pid is not None:
        fd = _pidexit.open_pidfd(tree.pid, tree.parts.root.start_time)  # None: gone already (its keeper ends the tree)
        if fd is not None:
            _hold_fds[tree.keeper_pid] = fd
    # The holding keeper's loss: hold first (below), then keeperloss.py's own end of what is left.
    watcher = _keeper_watch()
    watcher.forget(tree.keeper_pid)
    watcher.watch(tree.keeper_pid, tree, _holding_keeper_lost, _keeperloss.keeper_exit_settled)


def _holding_keeper_lost(tree: Any) -> None:
    """The holding keeper exited on its own watch: hold gets SIGKILL at once, then what is left is ended as any
    lost keeper's tree is.

    hold blocks every other signal, so the polite end (the stop signal, SIGKILL after the grace) would keep it
    for the whole grace, and an owner that exited within it (the watch's threads are daemons) left it forever.
    """
    _kill_hold(tree.keeper_pid)
    try:
        _keeperloss.on_keeper_exit(tree)
    finally:
        _made.pop(tree.keeper_pid, None)


def _kill_hold(keeper_pid: int) -> None:
    """SIGKILL the hold of the holding tree whose keeper is keeper_pid, through its pidfd; close that. Never raises."""
    fd = _hold_fds.pop(keeper_pid, None)  # one pop: whoever comes first (a start, the watch) does it
    if fd is None:
        return
    try:
        signal.pidfd_send_signal(fd, signal.SIGKILL)  # the pidfd: never another process of a reused pid
    except (OSError, AttributeError):  # no pidfds here: only Linux opened one
        pass
    _pidexit.close(fd)


def _close_hold_fd(keeper_pid: int) -> None:
    _pidexit.close(_hold_fds.pop(keeper_pid, None))


def _hold_gone(tree: Any) -> bool:
    """The holding tree's hold process has exited (its pidfd is readable): one poll that never waits."""
    fd = _hold_fds.get(tree.keeper_pid)
    return fd is not None and _pidexit.exited(fd)  # closed meanwhile counts as exited: its tree was found lost


def _lost(tree: Any) -> bool:
    """The holding tree is gone or going: its keeper has exited, or its hold has (the keeper is ending the tree).

    A command started in it now would land in a cgroup its keeper is
    ending, or one nobody ends with the owner.
    """
    return _exited(tree) or _hold_gone(tree)


def _end_lost(tree: Any) -> None:
    """End a lost holding tree whole, under _lock: its hold gets SIGKILL now (the only signal it takes).

    A keeper that lives ends the rest itself; a killed one's tree is ended
    by the keeper watch (keeperloss.py).
    """
    _kill_hold(tree.keeper_pid)


def _end_lost_at_exit() -> None:
    """At the owner's exit: a holding tree whose keeper is gone is ended now, whole, by cgroup.kill. Never raises.

    A lost keeper's tree is ended by a daemon thread of the keeper watch,
    politely (the stop signal, SIGKILL after the grace); an owner that exits
    within that grace, or before the watch even saw the loss, stops that
    thread, and whatever of the tree was left would run on with nobody to
    end it. A keeper that lives ends its tree itself on the owner's death.
    """
    with contextlib.suppress(Exception):
        for keeper_pid, tree in list(_made.items()):
            if not _exited(tree) and not _sigkill_pending(keeper_pid):
                continue
            _kill_hold(keeper_pid)
            if tree.mode == "cgroup" and tree.cgroup is not None:
                with contextlib.suppress(OSError, ValueError):
                    _cgroup.kill(tree.cgroup)


def _sigkill_pending(pid: int) -> bool:
    """The process pid (a holding keeper of ours, unreaped) was sent SIGKILL and has not exited yet (Linux).

    SIGKILL is pending until the process next runs; on a busy machine a
    start made right after it can still find the keeper alive, and an
    owner that exits then must count the tree as lost. One /proc read, at
    the owner's exit only (never on a start).
    """
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith((b"SigPnd:", b"ShdPnd:")) and int(line.split()[1], 16) & (1 << (signal.SIGKILL - 1)):
                    return True
    except (OSError, ValueError):
        pass
    return False


def held_pids() -> set[int]:
    """The holding tree's keeper and hold process, in this process (what a leak check must not count)."""
    tree = _holder
    if tree is None or _holder_pid != os.getpid():
        return set()
    return {p for p in (tree.keeper_pid, tree.pid) if p is not None}


def new_cgroup_path(tree) -> str:
    """The path of a fresh cgroup for one command, nested in the holding tree's cgroup (the caller makes it, inside
    the try that removes it again: an interrupt right after the mkdir must not lose its name)."""
    if _kept:
        if _pool.on_loop_thread():
            _pool.later(_remove_empty_kept)  # rmdirs: never on an event loop's thread
        else:
            _remove_empty_kept()
    return os.path.join(tree.cgroup, f"{COMMAND_PREFIX}{next(_counter)}-{os.urandom(3).hex()}")


def discard(path: str, command: int | None = None) -> None:
    """Remove the cgroup of a start that failed or was interrupted (Ctrl+C) inside fork_exec. Never raises.

    Usually nothing joined it (the start failed before the command ran): one
    rmdir. But an interrupt can land once the step has cloned the command
    (command: its pid, when the step had reported it), and no Popen will ever
    hold that command: everything in the cgroup is killed at once, what of it
    is this process's own child (the command: the step cloned it as our
    child) is reaped, and the cgroup removed. So is any exec step of ours
    left a zombie by an interrupt that came as fork_exec returned.
    """
    me = os.getpid()
    with contextlib.suppress(Exception):
        ours = {command} if command else set()
        if _cgroup.populated(path):
            for pid in _cgroup.pids(path):
                with contextlib.suppress(Exception):
                    if _binding.proc(pid).ppid == me:
                        ours.add(pid)
            _cgroup.kill(path)
        for pid in ours:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)  # our unreaped child, SIGKILLed (or exited): at once
        reap_steps()
    with contextlib.suppress(Exception):
        _cgroup.remove(path, timeout=1.0)


def reap_steps(wait: float = 0.0) -> None:
    """Reap the exec steps of ours that an interrupt left unreaped (a step is a child only proctree.Popen makes,
    and it exits once it has cloned its command). Never raises.

    wait: how long to give live ones to exit (a step whose pid the interrupt
    lost may not have exited yet). A live one may also be another thread's,
    mid-start: that thread's own reap then finds it gone and carries on.
    """
    me = os.getpid()
    deadline = time.monotonic() + wait
    with contextlib.suppress(Exception):
        while True:
            live = False
            for p in _binding.snapshot().values():
                if p.ppid == me and p.name == _STEP_NAME:
                    if p.is_zombie:
                        with contextlib.suppress(ChildProcessError):
                            os.waitpid(p.pid, os.WNOHANG)
                    else:
                        live = True
            if not live or time.monotonic() >= deadline:
                return
            time.sleep(0.005)


def watch(pid: int, left: Any, keep_orphans: bool) -> None:
    """Watch the command pid (our unreaped child) so that what it leaves is ended the moment it exits.

    left: the command's cgroup (a path), or its popenmarked.MarkedLeft.
    Without this, leftovers would wait for Popen to reap the command, which
    an owner that never waits, or asyncio (its child watcher reaps, not
    Popen), never does. The keeper watch's thread holds a pidfd on it and
    never reaps it, nor continues it when it is stopped. On Linux its pidfd
    goes straight into the thread's epoll set, so the exit is seen at once
    without waking the thread for each start; elsewhere the thread takes it
    up at its next look (within half a second).
    """
    _keeper_watch().watch(pid, (left, keep_orphans), _end_left, _settled, resume=False, wake=False)


def reaped(pid: int, left: Any, keep_orphans: bool) -> None:
    """Popen reaped the command pid: stop watching it (before its pid can be reused) and end what it left."""
    if not sys.is_finalizing():
        # At the interpreter's end (a Popen's __del__) the watch's daemon threads are frozen, maybe holding its
        # lock; nothing reuses the pid from here on, and the process's exit closes the pidfd.
        _keeper_watch().forget(pid, wake=False)
    if isinstance(left, str):
        if _pool.on_loop_thread():
            _pool.later(after_exit, left, keep_orphans)  # its rmdir: never on an event loop's thread
        else:
            after_exit(left, keep_orphans)
    else:
        left.reaped(GRACE)


def _settled(owner: tuple[Any, bool]) -> bool:
    """On the watch's thread, never blocking: True once nothing more is to be done for the exited command."""
    left, keep_orphans = owner
    return _settle(left, keep_orphans) if isinstance(left, str) else left.settled()


def _end_left(owner: tuple[Any, bool]) -> None:
    left = owner[0]
    if isinstance(left, str):
        end_now(left, GRACE)
    else:
        left.exited(GRACE)


def _settle(path: str, keep_orphans: bool) -> bool:
    """Remove the cgroup if it is empty (or leave it to _kept); False: something in it must be ended."""
    try:
        os.rmdir(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        pass  # EBUSY: something is still in it
    if keep_orphans:
        with _lock:
            if path not in _kept:
                _kept.append(path)
        return True
    return False


def after_exit(left: Any, keep_orphans: bool) -> None:
    """The command has exited: end what it left (unless keep_orphans) and remove its cgroup.

    Nothing left (the usual case) costs one rmdir. Leftovers are ended by a
    thread of their own, polite first (the stop signal, SIGKILL after GRACE),
    so that poll() and wait() return at once. In the marked fallback, looking
    for them costs a table snapshot, so that is done in the thread too.
    """
    if _settled((left, keep_orphans)):
        return
    if isinstance(left, str) and not keep_orphans:
        # PROCTREE_DETACH=session: the command's own daemons leave its cgroup before wait() returns, so an owner
        # that exits right after (a `mytool start`) does not take them with it. end_now() looks again.
        with contextlib.suppress(Exception):
            _detach.release_daemons(left)
    threading.Thread(
        target=_end_left, args=((left, keep_orphans),), name="proctree-popen-leftovers", daemon=True
    ).start()


_ending: set[str] = set()  # command cgroups being ended: each member gets the stop signal once


def end_now(path: str, grace: float) -> None:
    """End every process in the command cgroup at path (stop signal, then SIGKILL after grace) and remove it."""
    with _lock:
        if path in _ending:
            return
        _ending.add(path)
    if not _detach.release_daemons(path):  # PROCTREE_DETACH=session: a daemon it could not let go is kept
        with _lock:
            _ending.discard(path)
            if path not in _kept:
                _kept.append(path)
        return
    try:
        with contextlib.suppress(OSError, ValueError):
            _cgroupworld.terminate(path, grace)
        with contextlib.suppress(OSError, ValueError):
            _cgroup.remove(path, timeout=1.0)
    finally:
        with _lock:
            _ending.discard(path)


def _remove_empty_kept() -> None:
    for path in list(_kept):
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError:
            continue
        with contextlib.suppress(ValueError):
            _kept.remove(path)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_end_lost_at_exit)
