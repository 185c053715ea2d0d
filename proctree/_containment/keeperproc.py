"""The keeper as our unreaped child: starting it with signals held back, waiting for it, and ending it with whatever it started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading

from .. import _lazyimport
from .._errors import AccessDenied, NoSuchProcess
from .._table import binding as _binding
from .._teardown import pidexit as _pidexit
from . import keeperwatch as _keeperwatch
from . import realpopen as _realpopen
from . import spare as _spare

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

    from . import byidentity as _byidentity
    from . import cgroupworld as _cgroupworld
else:  # ending a tree or a cgroup loads at its first use: a start never pays for it
    _cgroupworld = _lazyimport.LazyModule(".cgroupworld", __package__)
    _byidentity = _lazyimport.LazyModule(".byidentity", __package__)


def _keeper_popen_class() -> type[subprocess.Popen]:
    """The keeper's Popen class, built on the genuine subprocess.Popen (see realpopen) on first use."""
    base = _realpopen.genuine_popen()
    cls = _keeper_classes.get(base)
    if cls is None:

        class _KeeperPopen(base):  # type: ignore[valid-type,misc]
            """The keeper's Popen, which hands itself to spawn() before it forks.

            Popen.__init__ can be interrupted after the fork (a KeyboardInterrupt while
            it waits for the exec): then it raises without returning the object, and
            the keeper would run on with nobody to end it. Holding the object from the
            start, spawn() can end the keeper on any exception.
            """

            def __init__(self, holder, *args, **kwargs):
                self._holder = holder
                super().__init__(*args, **kwargs)

            def _execute_child(self, *args, **kwargs):
                self._holder.append(self)
                super()._execute_child(*args, **kwargs)

        cls = _keeper_classes.setdefault(base, _KeeperPopen)
    return cls


# genuine Popen class -> the keeper's subclass of it (one entry; two only if a mock hid the real class)
_keeper_classes: dict[type, type[subprocess.Popen]] = {}


def _KeeperPopen(holder: list[subprocess.Popen], *args: Any, **kwargs: Any) -> subprocess.Popen:
    """Start the keeper with the genuine Popen (a patched subprocess.Popen is never used for it)."""
    cls: Any = _keeper_popen_class()
    popen: subprocess.Popen = cls(holder, *args, **kwargs)
    return popen


# Signals whose Python handlers (KeyboardInterrupt's, an application's SIGTERM handler that raises
# SystemExit, ...) are held back while the keeper is forked.
_DEFERRED_SIGNALS = tuple(
    getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")
)


@contextlib.contextmanager
def _handlers_deferred():
    """Hold back Python signal handlers while the keeper's Popen forks; run them, in order, afterwards.

    Popen stores the child's pid only after its fork returns: an exception
    raised by a handler in between (a Ctrl-C's KeyboardInterrupt) loses the
    pid, and the keeper and the command would run on with nobody to end them.
    Only the main thread runs Python handlers, so only there is each one
    replaced, for the call, by one that records the signal. A handler that
    then raises does so with the keeper's Popen complete, so spawn()'s cleanup
    ends what was started.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: dict[int, Any] = {}
    caught: list[tuple[int, Any]] = []

    def record(signum: int, frame: Any) -> None:
        caught.append((signum, frame))

    try:
        try:
            for sig in _DEFERRED_SIGNALS:
                handler = signal.getsignal(sig)
                if callable(handler):
                    held[sig] = handler  # before the swap: a handler that raises meanwhile still gets restored
                    signal.signal(sig, record)
        except ValueError:  # not the main interpreter: handlers run elsewhere
            pass
        yield
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)
        for signum, frame in caught:
            held[signum](signum, frame)


def _end_keeper(popen, cgroup, mode):
    """End a keeper and whatever it started, at once, whatever stage it reached.

    SIGSTOP first: a stopped keeper starts nothing more, so what the walk
    below it finds is all there is. Then SIGKILL everything below it (and in
    the cgroup; in session mode, what is in its session, where orphans of the
    command go to init), then the keeper, and reap it. Its pid is ours until
    we reap it (Popen never signals a reaped pid), so walking from it, and
    taking its pid as the session's id, is safe.
    """
    ended = False
    try:
        if popen.pid is not None:
            popen.send_signal(signal.SIGSTOP)
            if popen.returncode is None:
                _spare.retrying(
                    lambda: _byidentity.kill_below_keeper(popen.pid, cgroup=cgroup, session=mode == "session")
                )
            elif cgroup is not None:
                _spare.retrying(lambda: _cgroupworld.terminate(cgroup, 0))
        ended = True
    finally:
        if popen.pid is not None:
            if ended or popen.returncode is not None:
                popen.kill()
                popen.wait()
            else:
                # What it started could not be ended here (no descriptors even with the spare ones, or an
                # interrupt): killing the keeper would leave that to init. Let the keeper run on instead:
                # it passes the stop signal to its command, and ends the tree when the command exits or
                # when we (its owner) die.
                with contextlib.suppress(OSError):
                    popen.send_signal(signal.SIGCONT)
                    popen.send_signal(signal.SIGTERM)


def _continue_if_stopped(pid: int) -> None:
    """SIGCONT pid, our unreaped child (so its pid is ours), if it is stopped (read from the table: portable)."""
    try:
        if _binding.proc(pid).state == "T":
            os.kill(pid, signal.SIGCONT)
    except (NoSuchProcess, AccessDenied, OSError):
        pass  # gone, or unreadable: nothing to continue


def _start_time(pid: int | None) -> int | None:
    """pid's start time, or None if it cannot be read (gone, or no pid)."""
    if pid is None:
        return None
    try:
        return _binding.proc(pid).start_time
    except (NoSuchProcess, AccessDenied, OSError):
        return None


def _close_stdio(obj):
    """Close the stdin/stdout/stderr pipes of a Popen or Tree (those it has)."""
    for f in (obj.stdin, obj.stdout, obj.stderr):
        if f is not None:
            try:
                f.close()
            except OSError:
                pass


def _close_fds(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _keeper_exited(pid: int) -> bool:
    """True if our child pid has exited (a zombie now), without reaping it: Popen reaps it later."""
    return _pidexit.child_exited(pid)


def _wait_keeper(popen: subprocess.Popen, timeout: float | None) -> int:
    """popen.wait(timeout), woken by the keeper's exit rather than by Popen's polling sleeps.

    Popen.wait with a timeout sleeps in doubling steps of up to 50 ms, which
    a teardown would pay after its tree is already gone. A pidfd on our own
    child turns readable when it exits; then wait() returns at once.
    """
    if timeout is None or popen.returncode is not None:
        return popen.wait(timeout)
    fd = _pidexit.open_pidfd(popen.pid)
    if fd is None:  # macOS, or no pidfd to be had: Popen's own wait
        return popen.wait(timeout)
    try:
        if not _pidexit.wait(fd, max(0.0, timeout)):
            raise subprocess.TimeoutExpired(popen.args, timeout)
    finally:
        os.close(fd)
    return popen.wait()


def _keeper_watch() -> _keeperwatch.KeeperWatch:
    return _keeperwatch.instance(_keeper_exited)


def _rc_to_status(rc):
    """A Popen returncode back to a raw wait status."""
    if rc is None:
        return None
    if rc < 0:
        return -rc & 0x7F
    return (rc & 0xFF) << 8


class Keeper:
    """A tree's keeper, our unreaped child: the one owner of the rule that its pid is its own until we reap it.

    While is_ours(), walking from its pid, taking it as a session id and
    signalling it are safe; Popen never signals it once reaped, and only the
    process that spawned it (not a forked child) may reap it.
    """

    def __init__(self, popen: subprocess.Popen) -> None:
        self.popen = popen
        self.pid: int = popen.pid
        self._owner = os.getpid()

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def is_ours(self) -> bool:
        return self.popen.returncode is None and os.getpid() == self._owner

    def start_time(self) -> int | None:
        """Its start time, read while it is ours (None once it cannot be read)."""
        return _start_time(self.pid) if self.is_ours() else None

    def signal(self, sig: int) -> None:
        self.popen.send_signal(sig)  # a no-op once reaped

    def poll(self) -> int | None:
        """Its exit status if it has exited (reaping it then), else None."""
        return self.popen.poll()

    def wait(self, timeout: float | None) -> int:
        """Reap it within timeout (subprocess.TimeoutExpired); see _wait_keeper."""
        return _wait_keeper(self.popen, timeout)

    def exited(self) -> bool:
        """It has exited (a zombie, or reaped) without our waiting for it."""
        return self.popen.returncode is not None or _keeper_exited(self.pid)

    def kill_and_reap(self) -> int:
        self.popen.kill()
        return self.popen.wait()

    def continue_if_stopped(self) -> None:
        if self.is_ours():
            _continue_if_stopped(self.pid)

    def end_now(self, cgroup: str | None, mode: str) -> None:
        """End it and whatever it started, at once (see _end_keeper)."""
        _end_keeper(self.popen, cgroup, mode)
