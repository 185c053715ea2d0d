"""The keeper watch: notices at once when a tree's keeper exits, so a killed keeper's tree is ended anyway.

A keeper normally outlives its tree: it ends what the command left and then
exits with the command's status. A keeper killed outright (``kill -9``, the
OOM killer) ends nothing: its members are reparented away and run on. The
owner must then end them itself, without waiting for its caller to call in,
so one daemon thread per owner process watches every live keeper (a pidfd
each on Linux, kqueue NOTE_EXIT on macOS, a 0.2 s look at the process table
elsewhere) and calls back the moment one exits. The callback (Tree's) decides
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

import contextlib
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable

from .. import _fds
from .._teardown import signals as _signals

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any


def _log() -> Any:
    """proctree's logger, for the rare warning (logging is imported then: a start must not pay for it)."""
    import logging

    return logging.getLogger("proctree")


_LINUX = sys.platform.startswith("linux")
_POLL_FALLBACK = 0.2  # seconds between looks where no exit event exists
_LINGER = 2.0  # seconds the thread waits for a next keeper before it ends (a spawn loop starts it once)
_STOP_CHECK = 0.5  # seconds between looks for a stopped keeper
_KQ_READ = getattr(select, "KQ_FILTER_READ", -1)


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
        self._wake_r: int | None = None
        self._wake_w: int | None = None
        self._kq: Any = None
        self._ep: Any = None  # Linux: the thread's epoll; a pidfd registered in it is seen at once, unwoken
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
        pidfd = _pidfd(pid)
        with self._lock:
            self._watched[pid] = _Watched(pid, pidfd, owner, callback, settled, resume)
            if self._thread is None:
                self._start()
            elif self._kq is not None:
                self._kq_add(pid)
            elif _LINUX and self._ep is not None and pidfd is not None:
                self._ep.register(pidfd, select.EPOLLIN)
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
        fd = w.pidfd
        if fd is None:
            return
        if self._ep is not None:
            with contextlib.suppress(OSError, ValueError):
                self._ep.unregister(fd)
        _close(fd)

    def watching(self) -> list[int]:
        with self._lock:
            return sorted(self._watched)

    # -- the thread -----------------------------------------------------------
    def _start(self) -> None:
        try:
            r, w = os.pipe()
            self._wake_r, self._wake_w = _fds.above_stdio(r), _fds.above_stdio(w)
            os.set_blocking(self._wake_w, False)
            if sys.platform == "darwin":
                self._kq = select.kqueue()
                wake = select.kevent(self._wake_r, filter=select.KQ_FILTER_READ, flags=select.KQ_EV_ADD)
                self._kq.control([wake], 0, 0)
                for pid in self._watched:
                    self._kq_add(pid)
            elif hasattr(select, "epoll"):
                self._ep = select.epoll()
                self._ep.register(self._wake_r, select.EPOLLIN)
                for watched in list(self._watched.values()):
                    if watched.pidfd is not None:
                        self._ep.register(watched.pidfd, select.EPOLLIN)
            thread = threading.Thread(target=self._run, name="proctree-keeper-watch", daemon=True)
            thread.start()
        except (OSError, RuntimeError) as exc:
            # No thread now (a descriptor, thread, memory or pid limit): what is watched stays registered, and
            # the next watch() tries again; until then exits are seen only where their owners reap (Popen's wait).
            self._stop_locked()
            _log().warning("proctree could not start its watch thread (%s); it will try again at the next start", exc)
            return
        self._thread = thread

    def _kq_add(self, pid: int) -> None:
        if sys.platform == "darwin":
            flags = select.KQ_EV_ADD | select.KQ_EV_ONESHOT
            ev = select.kevent(pid, filter=select.KQ_FILTER_PROC, flags=flags, fflags=select.KQ_NOTE_EXIT)
            try:
                self._kq.control([ev], 0, 0)
            except OSError:
                pass  # it exited already: the wake-up's look at the table finds it

    def _wake(self) -> None:
        fd = self._wake_w
        if fd is not None:
            try:
                os.write(fd, b"x")
            except OSError:
                pass  # full (a wake-up is pending anyway) or closed

    def _run(self) -> None:
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
                self._bounded = self._kq is None and timeout is not None and timeout <= _STOP_CHECK
            proven, maybe = self._wait(watched, timeout)
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

    def _wait(self, watched: list[_Watched], timeout: float | None) -> tuple[list[_Watched], list[_Watched]]:
        """Sleep until a keeper may have exited, the set changed, or timeout (None: no limit) passed.

        Returns (the keepers an event proved exited, the keepers to look at in
        the table). A pidfd or a kqueue event is proof even after the pid was
        reaped and reused; a look at the table is not, so it is used only
        where there is no event.
        """
        assert self._wake_r is not None
        woken = False
        if self._kq is not None:
            events = self._kq.control(None, 64, timeout)
            exited = {ev.ident for ev in events if ev.ident != self._wake_r or ev.filter != _KQ_READ}
            woken = any(ev.ident == self._wake_r and ev.filter == _KQ_READ for ev in events)
            proven = [w for w in watched if w.pid in exited]
            # A keeper added while the thread slept may have exited before its event was registered.
            maybe = [w for w in watched if w.pid not in exited] if woken else []
        else:
            if any(w.pidfd is None for w in watched):
                timeout = _POLL_FALLBACK if timeout is None else min(timeout, _POLL_FALLBACK)
            if self._ep is not None:
                # Level-triggered: a pidfd registered after `watched` was read fires again next round.
                ready = {fd for fd, _ in self._ep.poll(-1 if timeout is None else timeout)}
            else:
                fds = [self._wake_r] + [w.pidfd for w in watched if w.pidfd is not None]
                ready = set(_fds.readable(fds, timeout))  # poll(): no limit on fd numbers (select() stops at 1024)
            woken = self._wake_r in ready
            proven = [w for w in watched if w.pidfd is not None and w.pidfd in ready]
            maybe = [w for w in watched if w.pidfd is None]
        if woken:
            try:
                os.read(self._wake_r, 4096)
            except OSError:
                pass
        return proven, maybe

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
        for fd in (self._wake_r, self._wake_w, *closing):
            _close(fd)
        if self._kq is not None:
            self._kq.close()
        if self._ep is not None:
            self._ep.close()
        self._ep = None
        self._wake_r = self._wake_w = None
        self._kq = None
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


def _pidfd(pid: int) -> int | None:
    """A pidfd on our child pid (it cannot be reused before we reap it), or None where there are none."""
    if not _LINUX:
        return None
    try:
        fd = _signals.open_pidfd(pid)
        return None if fd is None else _fds.above_stdio(fd)  # held until it exits: never on a std fd
    except OSError:  # gone already, or no descriptor to spare: the watch falls back as without pidfds
        return None


def _close(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


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
