"""Tree: one contained process tree, its keeper, its status lines, and its teardown."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

from .. import _lazyimport
from .._errors import NoSuchProcess
from .._table import binding as _binding
from .._table.model import Proc
from .._validate import check_seconds, check_signal
from . import cgroup as _cgroup
from . import keeperloss as _keeperloss
from . import modes as _modes
from . import protocol as _protocol
from .keeperproc import _close_fds, _close_stdio, _keeper_watch
from .launch import _Launch
from .stopflag import _in_worker, _Stopped
from .sweep import _kill_marked, _merge_reports
from .treeparts import TreeParts
from .treeusage import MembersUsage

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

    from .._teardown import report as _report
    from .._teardown.report import TeardownReport
    from . import asyncwait as _asyncwait
    from . import byidentity as _byidentity
    from . import cgroupworld as _cgroupworld
    from .interfaces import Mode
else:  # ending a tree or a cgroup loads at its first use: a start never pays for it
    _cgroupworld = _lazyimport.LazyModule(".cgroupworld", __package__)
    _byidentity = _lazyimport.LazyModule(".byidentity", __package__)
    _report = _lazyimport.LazyModule("proctree._teardown.report", "")
    # Tree.wait_async only: on 3.10 it imports asyncio (its TimeoutError is a base of WaitTimeout there)
    _asyncwait = _lazyimport.LazyModule(".asyncwait", __package__)


def _log() -> Any:
    """proctree's logger, for the rare warning (logging is imported then: a blocking spawn must not pay for it)."""
    import logging

    return logging.getLogger("proctree")


class Tree(MembersUsage):
    """A contained process tree started by spawn().

    pid is the command's own pid; mode the containment in force ("cgroup",
    "subreaper" or "session"); marker the PROCTREE_OWNER value its members
    carry, tree_id this tree's own id (its members' PROCTREE_TREE value, or the
    first id of it when the tree was spawned inside another tree); receipt the
    path of its receipt file (or None); stdin/stdout/stderr the pipes asked
    for, as with Popen. As a context manager, leaving the block tears the
    whole tree down.

    pty is the master fd of the command's pseudo-terminal (spawn(pty=True)),
    else None: write to it to type, read from it to see the screen. The Tree
    closes it (and sets pty to None) when it finishes (wait() without
    keep_orphans, join, terminate, leaving the with block), so read what you
    need before that. stops counts the times the keeper reported the command
    stopped (pty trees: Ctrl+Z at its terminal, SIGSTOP); send_signal(SIGCONT)
    continues it, with its terminal given back to it.

    parts (a TreeParts) is what proctree's own containment modules use of
    the tree: its keeper, status lines, lifecycle and identities. It is no
    API: read the names above instead.
    """

    def __init__(self, launch: _Launch, popen: subprocess.Popen, status_fd: int) -> None:
        self.args = launch.args
        self.pid: int | None = None
        self.mode = launch.mode
        self.mode_reason = launch.reason  # why a stronger mode was not used (contain="auto"), or None
        self.marker = launch.marker
        self.tree_id = launch.tree_id
        self.cgroup = launch.cgroup
        self.grace = launch.grace
        self.keep_orphans = launch.keep_orphans
        self._mode: Mode = _modes.MODES[launch.mode]  # what the members are and how the tree ends, per mode
        self.stdin, self.stdout, self.stderr = popen.stdin, popen.stdout, popen.stderr
        self._popen = popen  # stdio and communicate(); the keeper process itself is self.parts.keeper
        # Its keeper, status lines, lifecycle, lock and identities: what the containment modules use of it.
        self.parts = TreeParts(launch, popen, status_fd)
        self._owner_pid = os.getpid()  # the process whose child the keeper is: the only one that may use this Tree
        self.pty: int | None = None  # the master fd, pty trees only
        self.terminate_signal = launch.stop_signal  # what terminate() sends each member, once, by default

    def __repr__(self) -> str:
        rc = (
            "lost"
            if self.parts.life.lost is not None or (self.parts.channel.eof and self.parts.life.status is None)
            else self._known_returncode()
        )
        return f"<proctree.Tree pid={self.pid} mode={self.mode} returncode={rc}>"

    def _known_returncode(self) -> int | None:
        return None if self.parts.life.status is None else os.waitstatus_to_exitcode(self.parts.life.status)

    @property
    def keeper_pid(self) -> int:
        return self.parts.keeper.pid

    @property
    def stops(self) -> int:
        return self.parts.life.stops

    @property
    def stop_signal(self) -> int | None:
        """The signal of the last stop reported (None before the first)."""
        return self.parts.life.stop_signal

    @property
    def receipt(self) -> str | None:
        """The path of this tree's receipt file while it exists; None if none was written (or it was removed)."""
        return self.parts.receipt

    @property
    def status_fd(self) -> int | None:
        """The fd the keeper's status lines arrive on (readable when the command stops or ends), for select loops.

        Never read it: poll() does, and updates returncode and stops. None once the Tree has finished.
        """
        return self.parts.channel.fd

    @property
    def returncode(self) -> int | None:
        """The command's exit code (negative signal number, as Popen), or None while it runs.

        Raises KeeperLost if the keeper was killed before it reported it.
        """
        return self.poll()

    def poll(self) -> int | None:
        """The command's returncode if it has ended, else None; KeeperLost if its keeper was killed first."""
        self._check_owner()
        self.parts.pump(time.monotonic())
        self._raise_if_lost(None)
        return self._known_returncode()

    def _raise_if_lost(self, deadline: float | None) -> None:
        """Raise KeeperLost if the keeper died without the command's status (once its tree is ended, by deadline)."""
        if self.parts.life.status is not None:
            return
        if self.parts.life.lost is None and self.parts.channel.eof:
            _keeperloss.on_keeper_exit(self)  # EOF came before the keeper watch's call: end the tree here
        if self.parts.life.lost is None:
            return
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self.parts.life.recovered.wait(None if left is None else min(left, threading.TIMEOUT_MAX))
        self._close_status_fd()  # nothing more will come on it
        raise self.parts.life.lost

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the command to end and return its returncode.

        Without keep_orphans this also waits (within timeout) for the keeper to
        end what the command left behind. Raises subprocess.TimeoutExpired.
        """
        self._check_owner()
        deadline = None if timeout is None else time.monotonic() + check_seconds(timeout, "timeout")
        if not self.parts.pump(deadline):
            raise subprocess.TimeoutExpired(self.args, timeout)  # type: ignore[arg-type]
        self._raise_if_lost(deadline)
        if not self.keep_orphans:
            try:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                self.parts.keeper.wait(left)
                self._finish()
            except subprocess.TimeoutExpired:
                pass
        assert self.parts.life.status is not None  # pump() said it is known
        return os.waitstatus_to_exitcode(self.parts.life.status)

    def join(self, timeout: float | None = None) -> int:
        """Wait until nothing of the tree is left running (with keep_orphans: the orphans too).

        Returns the command's returncode; raises subprocess.TimeoutExpired.
        """
        self._check_owner()
        deadline = None if timeout is None else time.monotonic() + check_seconds(timeout, "timeout")
        rc = self.wait(timeout)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            self.parts.keeper.wait(left)  # the keeper ends with its last member
        except subprocess.TimeoutExpired as exc:
            raise self._as_ours(exc) from None
        self._finish()
        return rc

    async def wait_async(self, timeout: float | None = None) -> int:
        """wait() without blocking the event loop (any number of them at once, on one loop or several).

        Its timeout raises WaitTimeout: both subprocess.TimeoutExpired (as wait()) and TimeoutError (as asyncio).
        """
        self._check_owner()
        return await _asyncwait.wait(self, timeout)

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        """Popen.communicate through the keeper: (stdout, stderr), then the command's status is known."""
        self._check_owner()
        if timeout is not None:
            check_seconds(timeout, "timeout")  # the rule wait() applies: NaN, negative and inf are refused
        try:
            out = self._popen.communicate(input, timeout)
        except subprocess.TimeoutExpired as exc:
            raise self._as_ours(exc) from None
        self.parts.pump(time.monotonic() + 5)
        self._finish()
        return out

    def _as_ours(self, exc):
        """A TimeoutExpired from the keeper's Popen, naming the user's command (the output read so far kept)."""
        exc.cmd = self.args
        return exc

    def send_signal(self, sig: int, *, group: bool = False) -> None:
        """Send sig to the command.

        The signals the keeper forwards (protocol.FORWARD) go through it, to the
        command's process group. Any other goes to the command alone, by pidfd
        after checking its start time, while the keeper still holds it
        unreaped: SIGKILL and SIGSTOP cannot be caught, and the keeper drops
        every other signal outside its protocol (SIGPROF, SIGALRM, ...: none
        may end it, or its orphans would escape). group=True sends those too
        to every member of the command's process group (tini's -g), each by
        pidfd after checking its start time, while the command still leads
        that group.
        """
        self._check_owner()
        if isinstance(sig, bool) or not isinstance(sig, int):
            raise TypeError(f"sig must be a signal number, not {type(sig).__name__}")
        if sig in _protocol.FORWARD or (sig == signal.SIGCONT and self.pty is not None):
            if sig in _protocol.STOPPING or sig == self.terminate_signal:
                self._record_stopped(sig)
            # SIGCONT on a pty tree: the keeper gives the terminal back to the command's group first.
            self.parts.keeper.signal(sig)  # our own child, and Popen never signals it once reaped
        elif group:
            self._send_group(sig)
        else:
            self._send_direct(sig)

    def _record_stopped(self, sig: int) -> None:
        """Remember the members of the command's group that a forwarded stop-type signal is about to reach.

        A later teardown sends them no second stop signal (to many servers a
        second one means "force quit" and cuts their drain); the keeper keeps
        the same record for its own teardowns.
        """
        if self.pid is None or self.parts.life.status is not None or not self.parts.keeper.is_ours():
            return
        try:
            snap = _binding.snapshot()
        except OSError:
            return
        for p in snap.values():
            if p.pgid == self.pid and not p.is_zombie:
                self.parts.stopped.setdefault(p.identity, sig)

    def _root_held(self) -> bool:
        """True while the keeper holds the command unreaped: its pid (and its group's id) is still its own."""
        if self.poll() is not None or self.parts.root is None or not self.parts.keeper.is_ours():
            return False
        try:
            now = _binding.proc(self.parts.root.pid)
        except (NoSuchProcess, OSError):
            return False
        return now.ppid == self.keeper_pid and now.start_time == self.parts.root.start_time

    def _send_direct(self, sig):
        if self.parts.root is not None and self._root_held():
            _byidentity.signal_member(self.parts.root, sig)

    def _send_group(self, sig):
        # Checked before the members are read, whose records the sends then check one by one.
        if self.parts.root is not None and self._root_held():
            for p in self.members():
                if p.pgid == self.parts.root.pid:
                    _byidentity.signal_member(p, sig)

    # -- membership and teardown --------------------------------------------
    def _check_owner(self) -> None:
        """RuntimeError in a forked child: the keeper is its parent's child, reaped (and its pid reused) there."""
        if os.getpid() != self._owner_pid:
            raise RuntimeError(
                f"this Tree belongs to process {self._owner_pid}, which spawned it; a forked child "
                "cannot wait for, signal or end it (its keeper is not the child's child)"
            )

    def members(self) -> list[Proc]:
        """The live members of the tree (the command and what it started), as Proc records."""
        from .._table import live as _live

        out: dict[int, Proc] = {}
        if self.parts.keeper.is_ours():
            try:
                for p in _live.descendants(self.keeper_pid):
                    out[p.pid] = p
            except NoSuchProcess:
                pass
        for pid, p in self._mode.members(self.parts).items():  # the cgroup's; in session mode, by sid and marker
            out.setdefault(pid, p)
        return sorted((p for p in out.values() if not p.is_zombie), key=lambda p: p.pid)

    def terminate(self, grace: float | None = None, signal: int | str | None = None) -> TeardownReport:
        """Tear the whole tree down and return the TeardownReport.

        Each member gets the stop signal once (signal, else the tree's
        stop_signal, SIGTERM by default), then SIGKILL after grace if it is
        still there. A member that a forwarded SIGTERM/SIGINT/SIGHUP (or the
        stop signal) already reached gets no second one; the keeper is told to
        leave the teardown to this call, so its own sweep never adds one.
        """
        self._check_owner()
        grace = self.grace if grace is None else check_seconds(grace, "grace")
        sig = self.terminate_signal if signal is None else check_signal(signal, "signal")
        return self._terminate(grace, None, sig)

    def _terminate(self, grace, stop, sig=None):
        """terminate(); once stop (a _Stop, or None) is set, what is left is SIGKILLed at once."""
        sig = self.terminate_signal if sig is None else sig
        with self.parts.lock:
            if self.parts.channel.eof and self.parts.life.status is None and self.parts.life.lost is None:
                _keeperloss.on_keeper_exit(self)  # the keeper is gone: what it left is ended there
            if self.parts.life.recovery is not None:
                self._close_status_fd()
                self._close_pty()
                return self.parts.life.recovery
            t0 = time.monotonic()
            try:
                self.parts.hold_keeper(self.grace, stop)
            except _Stopped:
                grace = 0.0
            if self.cgroup is not None:  # the cgroup is ours even when the keeper no longer is
                rep = self._mode.teardown(self.parts, grace, stop, sig)
                rep = _report.replace(rep, root=self.parts.root, mode=self.mode)
            elif self.parts.keeper.is_ours():
                try:
                    rep = self._mode.teardown(self.parts, grace, stop, sig)
                    rep = _report.replace(rep, root=self.parts.root, mode=self.mode)
                except NoSuchProcess:
                    # The keeper, our unreaped child, cannot vanish; if it did, what it
                    # held went to init with it and the keeper's own sweep has nothing to start from.
                    rep = _report.TeardownReport(root=self.parts.root, mode=self.mode)
            else:
                rep = _report.TeardownReport(root=self.parts.root, mode=self.mode)
            self._finish(clean=rep.ok)
            if self.parts.life.lost is not None and self.parts.life.recovery is None:
                # The keeper died during the teardown without the command's status: what it
                # held may have been reparented away from the walk; end it by its markers too.
                more = _keeperloss.end_leftovers(self)
                rep = _merge_reports(rep, [more], [], [p.pid for p in more.found])
                self.parts.life.recover(rep)
            rep = _report.replace(
                rep,
                elapsed=time.monotonic() - t0,
                extra={
                    **rep.extra,
                    "keeper": self.keeper_pid,
                    **({"cgroup": self.cgroup} if self.cgroup else {}),
                    **({"keeper_swept": True} if self.parts.life.swept else {}),
                },
            )
            return rep

    def kill(self) -> TeardownReport:
        """terminate() with no grace: SIGKILL at once."""
        return self.terminate(grace=0)

    async def terminate_async(self, grace: float | None = None, signal: int | str | None = None) -> TeardownReport:
        """terminate() without blocking the event loop.

        Cancelling it skips the rest of the grace: what is left is SIGKILLed
        at once, the keeper reaped, then CancelledError propagates (as with
        terminate_tree_async).
        """
        self._check_owner()
        grace = self.grace if grace is None else check_seconds(grace, "grace")
        sig = self.terminate_signal if signal is None else check_signal(signal, "signal")
        return await _in_worker(lambda stop: self._terminate(grace, stop, sig))

    def _finish(self, clean=None, release_fds=True):
        """Reap the keeper (it ends once its tree is gone), remove the cgroup, and the receipt.

        clean: whether the tree is known to have ended with nothing left (a
        teardown's report.ok); None: it did, unless session mode kept orphans
        that may still run (their receipt stays, for the reaper).
        release_fds: close the status pipe and the pty too (not from the
        keeper watch's thread: a wait_async() or a pty relay may be reading).
        """
        with self.parts.lock:
            _keeper_watch().forget(self.keeper_pid)  # before it is reaped: the watch trusts its own events
            if self.parts.keeper.returncode is None:
                try:
                    self.parts.keeper.wait(max(2.0, self.grace + 1.0))
                except subprocess.TimeoutExpired:
                    # Still busy: its tree is gone (we just ended it), so end it too.
                    self.parts.keeper.kill_and_reap()
            self.parts.pump(time.monotonic() + 0.5)
            self.parts.drain()
            if self.parts.life.status is None and self.parts.life.lost is None:
                # It ended without the command's status (killed, or ended by us once its tree was
                # gone): the status is unknowable, never the keeper's own passed off as it.
                self.parts.life.lose(self.keeper_pid, self.parts.keeper.returncode)
                self.parts.life.recovered.set()
            if release_fds:
                self._close_status_fd()
                self._close_pty()
            if self.cgroup is not None:
                if _cgroup.populated(self.cgroup):
                    _cgroupworld.terminate(self.cgroup, 0)
                if not _cgroup.remove(self.cgroup):
                    # A read-only or busy cgroupfs: the tree is ended, an empty directory stays behind.
                    _log().warning(
                        "the cgroup %s of tree %s could not be removed; `proctree reap` removes such leftovers",
                        self.cgroup,
                        self.keeper_pid,
                    )
            if self.parts.receipt is not None and (
                clean if clean is not None else not self._mode.may_have_leftovers(self.parts)
            ):
                self.parts.remove_receipt()

    def _abandon(self, patience=0.0, sweep=True):
        """spawn() failed or was interrupted: make sure the keeper and anything it started are gone.

        patience: how long the keeper may take to exit by itself (after it
        reported an error); 0 to end it at once. An interrupt while waiting
        still ends it. sweep: outside a cgroup, also SIGKILL what carries the
        tree's marker (False where the command is known never to have run).
        """
        _keeper_watch().forget(self.keeper_pid)
        try:
            if self.parts.keeper.returncode is None:
                try:
                    self.parts.keeper.wait(patience)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            try:
                if self.parts.keeper.returncode is None:
                    self.parts.keeper.end_now(self.cgroup, self.mode)
                if sweep and self.cgroup is None and self.parts.keeper_start is not None:
                    # A daemon that left the keeper's session, or was reparented away while the keeper
                    # was ended, is found by its marker only (in a cgroup, cgroupworld.terminate had it).
                    _kill_marked(self.tree_id, (self.parts.keeper_start, self.keeper_pid))
            finally:
                self.parts.remove_receipt()
                self._release_fds()

    def _close_status_fd(self):
        """Close the status pipe; while a wait_async() watches it, only once that ends (its number stays ours)."""
        with self.parts.lock:
            self.parts.channel.close()

    def _release_fds(self):
        _close_stdio(self)
        self._close_status_fd()
        self._close_pty()

    def _close_pty(self):
        fd, self.pty = self.pty, None
        if fd is not None:
            _close_fds((fd,))

    def _discard(self):
        """End a tree its caller will never see (its spawn_async was cancelled): kill it and close its pipes.

        If the teardown itself fails, the keeper and what it started are still
        ended (stopped, killed below, killed and reaped) before the error propagates.
        """
        try:
            self.kill()
        except BaseException:
            self._abandon()
            if self.cgroup is not None:
                _cgroup.remove(self.cgroup)
            raise
        finally:
            self._release_fds()

    def __del__(self):
        # A dropped Tree keeps running until its owner dies (the keeper sees to
        # that); only our end of the status pipe is released here.
        parts = getattr(self, "parts", None)
        if parts is not None:
            parts.channel.drop()
        if getattr(self, "pty", None) is not None:
            self._close_pty()

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.terminate()
        finally:
            _close_stdio(self)

    async def __aenter__(self) -> Tree:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """`async with`: terminate_async() (the loop runs on through the grace), then the pipes closed."""
        try:
            await self.terminate_async()
        finally:
            _close_stdio(self)
