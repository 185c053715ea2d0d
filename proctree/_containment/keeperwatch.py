"""The keeper watch: notices at once when a tree's keeper exits, so a killed keeper's tree is ended anyway.

A keeper normally outlives its tree: it ends what the command left and then
exits with the command's status. A keeper killed outright (``kill -9``, the
OOM killer) ends nothing: its members are reparented away and run on. The
owner must then end them itself, without waiting for its caller to call in,
so one daemon thread per owner process watches every live keeper (through
pidexit.py's ExitSet: a pidfd each on Linux, kqueue NOTE_EXIT on macOS, a
0.2 s look at the process table elsewhere) and calls back the moment one exits. The callback (Tree's) decides
whether the exit was the keeper's own, from its status line and exit status.

A keeper stopped by SIGSTOP (any member may send it: same user) would
leave its tree unwatched and wait() hanging; where keepers have pidfds the
thread also looks twice a second for a stopped one and continues it (a
keeper never stops by design, and leads an orphaned process group, for
which the kernel discards SIGTSTP, SIGTTIN and SIGTTOU: SIGSTOP is what is
left).

The thread runs while there is a keeper to watch (and 2 s after the last,
so that a loop of short spawns starts it once), waits with poll() (no limit
on descriptor numbers: a supervisor may hold thousands), holds each tree
until its keeper exits (so a Tree its caller dropped is still ended if its
keeper is killed, and its keeper still reaped); in a forked child it is
forgotten, as the keepers are the parent's children.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from .._teardown import pidexit as _pidexit

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any


def _log() -> Any:
    """proctree's logger, for the rare warning (logging is imported then: a start must not pay for it)."""
    import logging

    return logging.getLogger("proctree")


_LINUX = sys.platform.startswith("linux")
_POLL_FALLBACK = _pidexit.POLL_FALLBACK  # seconds between looks where no exit event exists
_LINGER = 2.0  # seconds the thread waits for a next keeper before it ends (a spawn loop starts it once)
_STOP_CHECK = 0.5  # seconds between looks for a stopped keeper


class _Watched:
    """One keeper: its pid, what wakes us when it exits, and the callback's owner."""

    __slots__ = ("pid", "pidfd", "owner", "callback", "settled", "resume")

    def __init__(
        self,
        pid: int,
        pidfd: int | None,
        owner: Any,
        callback: Callable[[Any], None],
        settled: Callable[[Any], bool] | None,
        resume: bool = True,
    ) -> None:
        self.pid = pid
        self.pidfd = pidfd
        self.owner = owner
        self.callback = callback
        self.settled = settled
        self.resume = resume  # continue it when stopped (keepers; never a proctree.Popen command)


class KeeperWatch:
    """Calls callback(owner) once, from a daemon thread, when a watched keeper (our child) exits."""

    def __init__(self, exited: Callable[[int], bool]) -> None:
        self._exited = exited  # pid -> True once that child of ours has exited (not reaped)
        # Re-entrant: a Popen collected on a thread that holds it (the collector runs at any allocation) is
        # reaped by its __del__, whose forget() must not wait for this thread. Every section reads the table
        # through a copy, so a forget() nested in one leaves it consistent.
        self._lock = threading.RLock()
        self._watched: dict[int, _Watched] = {}
        self._thread: threading.Thread | None = None
        self._exits: _pidexit.ExitSet | None = None  # what the thread sleeps on, while it runs
        self._bounded = False  # the thread's current sleep ends within _STOP_CHECK (set under the lock)
        self._pid = os.getpid()  # the process whose children these are: a forked child starts afresh

    def watch(
        self,
        pid: int,
        owner: Any,
        callback: Callable[[Any], None],
        settled: Callable[[Any], bool] | None = None,
        resume: bool = True,
        wake: bool = True,
    ) -> None:
        """Watch the keeper pid (an unreaped child of ours) for owner; callback(owner) when it exits.

        resume=False: never continue it when it is stopped (a proctree.Popen
        command, which its owner may stop on purpose, is watched here too).
        wake=False: do not wake the thread for it if its epoll (Linux) sees
        it anyway, or the thread will look within _STOP_CHECK (a proctree.Popen command: most are reaped
        by Popen before that, and a wake per start cost them the GIL twice).

        settled(owner), if given, is asked first, on the watch's own thread:
        it must not block, and True means the exit needs nothing more (the
        keeper ended its tree itself), so no thread is started for callback.
        Every spawn's keeper exits, and a thread per exit cost each short
        command about a millisecond.
        """
        pidfd = _pidexit.open_pidfd(pid)  # our unreaped child: its pid is not reused before we reap it
        with self._lock:
            self._watched[pid] = _Watched(pid, pidfd, owner, callback, settled, resume)
            if self._thread is None:
                self._start()
            elif self._exits is not None and self._exits.add(pid, pidfd):
                wake = False  # the thread's epoll_wait sees it as it is
            wake = wake or not self._bounded
        if wake:
            self._wake()

    def forget(self, pid: int, wake: bool = True) -> None:
        """Stop watching pid (its tree ended through its owner): called before the keeper is reaped.

        Its pidfd is closed here, before this returns (a caller that reaps the
        process then holds nothing for it): out of the epoll set first, so the
        thread's epoll_wait never reports the closed file under a number a new
        descriptor may take. An event the thread already took for it names a
        keeper that is no longer watched, which it drops (_fire), and the
        thread only looks at pidfds of keepers still watched under the lock.
        wake=False: the thread is not woken for it.
        """
        with self._lock:
            w = self._watched.pop(pid, None)
            if w is not None:
                self._release_locked(w)
            wake = wake or not self._bounded
        if w is not None and wake:
            self._wake()

    def _release_locked(self, w: _Watched) -> None:
        """Close w's pidfd (w no longer watched), under the lock: out of the epoll set first, so that no event of
        it is reported under a number that a new descriptor may take once closed (a forked child's copy keeps
        the file, and a registration of a closed descriptor, alive). The thread may still hold w from its last
        look: an event under w's old number (its own, or a new descriptor's) then finds w no longer watched."""
        if w.pidfd is None:
            return
        if self._exits is not None:
            self._exits.remove(w.pidfd)
        _pidexit.close(w.pidfd)

    def watching(self) -> list[int]:
        with self._lock:
            return sorted(self._watched)

    # -- the thread -----------------------------------------------------------
    def _start(self) -> None:
        try:
            watched = list(self._watched.values())
            pidfds = [w.pidfd for w in watched if w.pidfd is not None]
            self._exits = _pidexit.ExitSet(pidfds, [w.pid for w in watched])
            thread = threading.Thread(target=self._run, name="proctree-keeper-watch", daemon=True)
            thread.start()
        except (OSError, RuntimeError) as exc:
            # No thread now (a descriptor, thread, memory or pid limit): what is watched stays registered, and
            # the next watch() tries again; until then exits are seen only where their owners reap (Popen's wait).
            self._stop_locked()
            _log().warning("proctree could not start its watch thread (%s); it will try again at the next start", exc)
            return
        self._thread = thread

    def _wake(self) -> None:
        exits = self._exits  # read once: a thread that ends meanwhile closes its pipe (the write then fails, unheard)
        if exits is not None:
            exits.wake()

    def _run(self) -> None:
        exits = self._exits  # this thread's own: a forked child's or a later thread's is another
        assert exits is not None
        idle_since = None
        checked = time.monotonic()  # the last look for stopped keepers: at most one per _STOP_CHECK
        while True:
            with self._lock:
                watched = list(self._watched.values())
                if watched:
                    idle_since = None
                elif idle_since is None:
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since >= _LINGER:
                    self._stop_locked()
                    return
                can_resume = _CAN_RESUME and any(w.pidfd is not None and w.resume for w in watched)
                timeout = _STOP_CHECK if can_resume else None if watched else _LINGER
                if any(w.pidfd is None for w in watched):
                    timeout = _POLL_FALLBACK if timeout is None else min(timeout, _POLL_FALLBACK)
                # kqueue: a process that exited before its event was registered is found only when woken
                # An epoll or kqueue sees a new registration without a wake; poll() only within its timeout.
                self._bounded = exits.sees_new_unwoken and timeout is not None and timeout <= _STOP_CHECK
            proven, maybe = exits.wait(watched, timeout)
            for w in proven + [w for w in maybe if self._exited(w.pid)]:
                self._fire(w)
            if can_resume and time.monotonic() - checked >= _STOP_CHECK:
                checked = time.monotonic()
                self._resume_stopped([w for w in watched if w not in proven and w.resume])

    def _resume_stopped(self, watched: list[_Watched]) -> None:
        """SIGCONT each keeper that is stopped, by its pidfd, while it is still watched.

        Under the lock, after checking it is still watched: forget() comes
        before any deliberate stop of a keeper (spawn's cleanup stops one to
        end what is below it), so that stop is never undone here.
        """
        if not _CAN_RESUME:
            return
        for w in watched:
            with self._lock:
                if self._watched.get(w.pid) is not w or w.pidfd is None:
                    continue
                try:
                    info = os.waitid(os.P_PIDFD, w.pidfd, os.WSTOPPED | os.WNOHANG | os.WNOWAIT)
                    if info is not None and info.si_code == os.CLD_STOPPED:
                        signal.pidfd_send_signal(w.pidfd, signal.SIGCONT)
                except OSError:
                    pass  # it exited meanwhile (its pidfd says so next time round)

    def _fire(self, w: _Watched) -> None:
        with self._lock:
            if self._watched.get(w.pid) is not w:
                return  # forgotten meanwhile (forget() closed its pidfd)
            del self._watched[w.pid]
            self._release_locked(w)
        if w.settled is not None:
            try:
                if w.settled(w.owner):
                    return
            except Exception as exc:  # then the callback decides, as without the quick look
                sys.unraisablehook(_Unraisable(exc, w.settled))  # type: ignore[arg-type]
        # Each in a thread of its own: a killed keeper's tree takes its grace to end, and
        # several killed at once (an OOM kill) must not end one after another.
        try:
            threading.Thread(target=self._call, args=(w,), name="proctree-keeper-lost", daemon=True).start()
        except RuntimeError:
            # No thread to be had (the pid space is full: a fork storm): run it here rather than
            # lose it, and the watch with it. The other keepers wait until it returns.
            self._call(w)

    @staticmethod
    def _call(w: _Watched) -> None:
        try:
            w.callback(w.owner)
        except Exception as exc:  # a callback's failure must not pass silently, nor reach anything else
            sys.unraisablehook(_Unraisable(exc, w.callback))  # type: ignore[arg-type]

    def _stop_locked(self, closing: tuple[int, ...] = ()) -> None:
        for fd in closing:
            _pidexit.close(fd)
        if self._exits is not None:
            self._exits.close()
        self._exits = None
        self._thread = None

    def _after_fork_in_child(self) -> None:
        # The keepers are the parent's children, and the thread did not survive the fork.
        self._pid = os.getpid()
        self._lock = threading.RLock()
        inherited = tuple(w.pidfd for w in self._watched.values() if w.pidfd is not None)
        self._watched = {}
        self._stop_locked(inherited)


class _Unraisable:
    """What sys.unraisablehook reads (the shape of its argument)."""

    def __init__(self, exc: BaseException, obj: object) -> None:
        self.exc_type = type(exc)
        self.exc_value = exc
        self.exc_traceback = exc.__traceback__
        self.err_msg = "proctree: a keeper watch callback failed"
        self.object = obj


# waitid(P_PIDFD) and pidfd_send_signal: Linux only (CPython has no os.waitid on macOS at all).
_CAN_RESUME = _LINUX and hasattr(os, "P_PIDFD") and hasattr(os, "waitid") and hasattr(signal, "pidfd_send_signal")


_instance: KeeperWatch | None = None
_instance_lock = threading.Lock()


def instance(exited: Callable[[int], bool]) -> KeeperWatch:
    """The process's one KeeperWatch (made on first use)."""
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = KeeperWatch(exited)
        elif _instance._pid != os.getpid():
            _instance._after_fork_in_child()  # a fork that ran no at-fork handler (a raw fork(2) from C)
        return _instance


def _after_fork_in_child() -> None:
    """A forked child watches nothing of its parent's (see KeeperWatch._after_fork_in_child), and a lock another
    thread held at the fork would never be released."""
    global _instance_lock
    _instance_lock = threading.Lock()
    if _instance is not None:
        _instance._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
