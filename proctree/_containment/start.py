"""The start sequence: the keeper started, its first status line read, and on any failure everything it started ended."""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import subprocess
import time

from .._errors import ContainmentUnavailable, KeeperLost, NoSuchProcess
from .._table import binding as _binding
from .._table.model import Proc
from . import keeperloss as _keeperloss
from . import protocol as _protocol
from . import spare as _spare
from . import terminal as _terminal
from .evidence import receipt as _receipt
from .keeperproc import (
    _close_fds,
    _close_stdio,
    _end_keeper,
    _handlers_deferred,
    _keeper_watch,
    _KeeperPopen,
    _start_time,
    _wait_keeper,
)
from .launch import _keeper_program, _Launch, _namespace_fields, _warn_no_receipts
from .stopflag import _Stop
from .sweep import _kill_marked
from .tree import Tree

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

# How long spawn() waits for the keeper to report (a hung keeper must not hang us).
START_TIMEOUT = 60.0
# Seconds between looks, while spawn() waits, for a keeper that something stopped.
_STOPPED_KEEPER_CHECK = 0.5


_ALL_SIGNALS = frozenset(getattr(signal, "_signal", signal).valid_signals())  # ints: Signals members cost ~0.1 ms
# The C function under signal.pthread_sigmask: ints, not the wrapper's enum members (~50 µs for an all-blocked mask).
_sigmask: Any = getattr(getattr(signal, "_signal", signal), "pthread_sigmask", signal.pthread_sigmask)
_CALLER_MASK_ENV = "PROCTREE_KEEPER_SIGMASK"  # csrc/keeper/keeper.h's CALLER_MASK_ENV


def _keeper_unsignalled(
    started: list[subprocess.Popen], cmd: list[str], env: dict[str, str], pass_fds: Any, kw: dict[str, Any]
) -> subprocess.Popen:
    """The keeper's Popen, forked with every signal blocked in this thread: it is born with them blocked, so none
    sent to the caller's process group (a Ctrl+C, a hang-up, an application's killpg) can end it before its
    start_new_session takes it out of that group. It keeps them blocked, and gives the command this thread's own
    mask back (CALLER_MASK_ENV, which it takes out of the environment the command inherits)."""
    mask = _sigmask(signal.SIG_BLOCK, _ALL_SIGNALS)
    try:
        bits = sum(1 << (int(s) - 1) for s in mask if 0 < int(s) <= 64)
        env = {**env, _CALLER_MASK_ENV: f"{bits:x}"}
        return _KeeperPopen(started, cmd, env=env, pass_fds=pass_fds, start_new_session=True, **kw)
    finally:
        _sigmask(signal.SIG_SETMASK, mask)  # a held signal's handler may raise: spawn() then ends what started


def _start(launch: _Launch, kw: dict[str, Any], stop: _Stop | None) -> Tree:
    """Start the keeper and, through it, the command; the Tree once the keeper says Ok.

    Any exception before that (an interrupt, a stop request, a failed start)
    ends the keeper and whatever it started before it propagates.
    """
    _spare.hold()
    pass_fds = tuple(kw.pop("pass_fds", ()))
    started: list[subprocess.Popen] = []  # the keeper's Popen, from before its fork
    ours: list[int] = []  # fds of ours still open, closed on failure
    tree = None
    try:
        r, w = _pipe_above_stdio(ours)
        pass_fds = _hand_to_keeper(pass_fds, (w,), kw)
        master = slave = None
        if launch.pty:  # the slave is the keeper's stdio, which it makes its controlling terminal
            master, slave = _terminal.open_pty()
            ours += [master, slave]
            kw.update(stdin=slave, stdout=slave, stderr=slave)
        # In cgroup mode the keeper stays outside the cgroup and starts the command
        # inside it (clone3 CLONE_INTO_CGROUP: no migration to wait for).
        cmd = [_keeper_program(), *launch.keeper_args(w).to_argv()]
        if stop is not None:
            stop.check()
        # start_new_session: the keeper leaves the caller's session and terminal
        # before it execs, so a Ctrl-C at the terminal during its start cannot
        # reach it (a fresh child never leads a group, so this setsid cannot
        # fail; the keeper still tries setsid/setpgid itself).
        try:
            with _handlers_deferred():
                popen = _keeper_unsignalled(started, cmd, launch.env, pass_fds, kw)
        except OSError as exc:
            if exc.errno != errno.E2BIG:
                raise
            # The command's argv (or environment) is what is too long: name it, as Popen does.
            raise OSError(errno.E2BIG, os.strerror(errno.E2BIG), launch.exe) from None
        tree = Tree(launch, popen, r)
        ours.remove(r)  # the Tree's now
        ours.remove(w)
        os.close(w)
        if master is not None and slave is not None:
            tree.pty = master
            ours.remove(master)
            ours.remove(slave)
            os.close(slave)  # the master then reads EIO once every holder of the slave has gone
        first = _first_status(tree, time.monotonic() + START_TIMEOUT, stop)
        if isinstance(first, _protocol.Ok):
            _took_root(tree, first, os.path.basename(launch.exe))
            _write_receipt(tree, launch)
            _keeper_watch().watch(tree.keeper_pid, tree, _keeperloss.on_keeper_exit, _keeperloss.keeper_exit_settled)
            if stop is not None:
                stop.check()
            return tree
    except BaseException:
        _give_up(ours, tree, started, launch)
        raise
    try:
        _wait_keeper(popen, 5.0)  # it reported (or exited): it ends by itself at once
    except subprocess.TimeoutExpired:
        pass  # ended below
    lost = None
    if first is None and popen.returncode is not None and popen.returncode < 0:
        # Killed before its first line: it may have started the command, which (and whatever it
        # started) runs on without it. End that as after any lost keeper (no second sweep below), then say so.
        lost = KeeperLost(popen.pid, popen.returncode, _keeperloss.end_leftovers(tree))
    # An err line: the command never ran, so there is nothing to look for by marker. (A Tree's private
    # name: the start is the other half of its constructor, and _abandon undoes a Tree nobody saw.)
    tree._abandon(sweep=lost is None and not isinstance(first, _protocol.Err))
    raise lost if lost is not None else _start_error(first, launch, popen)


def _pipe_above_stdio(ours: list[int]) -> tuple[int, int]:
    """os.pipe() whose two ends are above fd 2 (each added to ours as soon as it exists).

    A caller that closed some of fds 0-2 gets those numbers back from
    os.pipe(); the keeper's Popen then dup2s a redirected std stream onto the
    status pipe's write end, and the keeper's status lines go to the stream
    instead (the start then waited for a line that never came).
    """
    ends = []
    for fd in os.pipe():
        ours.append(fd)
        while fd <= 2:
            moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
            ours.remove(fd)
            os.close(fd)
            ours.append(moved)
            fd = moved
        ends.append(fd)
    return ends[0], ends[1]


def _give_up(ours: list[int], tree: Tree | None, started: list[subprocess.Popen], launch: _Launch) -> None:
    """A start failed or was interrupted: close our fds, end the keeper and whatever it started."""
    _close_fds(ours)
    if tree is not None:
        tree._abandon(patience=0)  # the Tree's own undo, as after a failed start below
    elif started:
        keeper = started[0]
        keeper_start = _start_time(keeper.pid) if keeper.returncode is None else None
        try:
            _end_keeper(keeper, launch.cgroup, launch.mode)
            if launch.cgroup is None and keeper_start is not None:
                _kill_marked(launch.tree_id, (keeper_start, keeper.pid))
        finally:
            _close_stdio(keeper)


def _hand_to_keeper(pass_fds: tuple[int, ...], fds: tuple[int, ...], kw: dict[str, Any]) -> tuple[int, ...]:
    """pass_fds with the keeper's own fds added, so that they survive Popen's closing of fds."""
    # Popen closes every fd not in pass_fds unless close_fds=False and pass_fds
    # is empty (a non-empty pass_fds overrides close_fds=False, with a warning).
    if kw.get("close_fds", True) or pass_fds:
        return pass_fds + fds
    for fd in fds:  # every inheritable fd goes through: make ours so
        os.set_inheritable(fd, True)
    return pass_fds


def _start_error(first: _protocol.Status | None, launch: _Launch, popen: subprocess.Popen) -> BaseException:
    """The exception spawn() raises for a keeper that reported Err (or nothing) instead of Ok."""
    if not isinstance(first, _protocol.Err) and popen.returncode == _protocol.REFUSED:
        # Most likely a keeper program from another build, speaking another protocol version.
        return subprocess.SubprocessError(
            f"the keeper {_keeper_program()} refused its command line (status {popen.returncode}; the reason is on "
            f"the command's stderr): is it from another build of proctree (keeper protocol v{_protocol.PROTOCOL_VERSION})?"
        )
    if not isinstance(first, _protocol.Err):
        return subprocess.SubprocessError(f"the keeper exited before starting the command (status {popen.returncode})")
    code, stage = first.errno, first.stage
    msg = os.strerror(code) if code else "unknown error"
    if stage == "exec":
        return OSError(code, msg, launch.exe)  # FileNotFoundError/PermissionError, as Popen
    if stage == "cgroup":
        return ContainmentUnavailable(
            code, f"contain='cgroup' failed: cannot start the command in {launch.cgroup}: {msg}"
        )
    if stage == "subreaper":
        return ContainmentUnavailable(code, f"contain={launch.mode!r} failed in the keeper: {msg} ({stage})")
    return OSError(code, f"the keeper could not start the command ({stage}): {msg}")


def _first_status(tree: Tree, deadline: float, stop: _Stop | None) -> _protocol.Status | None:
    """The keeper's first status record (Ok or Err), None if it exited without one.

    A line that breaks the protocol is an error of the keeper: SubprocessError.
    A keeper stopped meanwhile (the command may SIGSTOP its parent at once) is
    continued: the keeper watch, which does that later, starts after this line.
    """
    while True:
        try:
            line = tree.parts.channel.next_line(min(deadline, time.monotonic() + _STOPPED_KEEPER_CHECK), stop)
            break
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise
            tree.parts.keeper.continue_if_stopped()
    if line is None:
        return None
    try:
        return _protocol.parse_status(line)
    except _protocol.ProtocolError as exc:
        raise subprocess.SubprocessError(f"the keeper broke its protocol: {exc}") from None


def _took_root(tree: Tree, ok: _protocol.Ok, name: str) -> None:
    """The keeper reported Ok: record the command, by that identity.

    The full record is read back only if it is still that process (the
    start time is the same C core reading on Linux and macOS, so the check
    holds everywhere); else the keeper's word is kept.
    """
    tree.pid = ok.pid
    tree.parts.root = Proc(ok.pid, tree.keeper_pid, ok.pid, tree.keeper_pid, os.getuid(), "R", ok.start_time, name)
    try:
        p = _binding.proc(ok.pid)
    except (NoSuchProcess, OSError):
        return  # it already ended: keep what the keeper told us
    if p.start_time == ok.start_time:
        tree.parts.root = p


# -- status channel -----------------------------------------------------


def _write_receipt(tree: Tree, launch: _Launch) -> None:
    """Write the tree's receipt (the keeper reported Ok: every identity is known now).

    Never fails the spawn: a directory that failed its checks, a receipt
    too long to write whole, or a write error leaves the tree without one.
    """
    try:
        keeper = _binding.proc(tree.keeper_pid)  # our unreaped child: its pid is its own
    except (NoSuchProcess, OSError):
        return
    tree.parts.keeper_start = keeper.start_time
    if launch.receipts is None or tree.parts.root is None:
        return
    try:
        owned = (keeper.pid, keeper.start_time)
        data = _receipt.encode(
            owner=launch.owner,
            keeper=owned,
            command=(tree.parts.root.pid, tree.parts.root.start_time),
            sid=keeper.sid,
            pgid=tree.parts.root.pgid,
            cgroup=launch.cgroup,
            tag=launch.tag,
            mode=launch.mode,
            marker=launch.marker,
            tree=launch.tree_id,
            **_namespace_fields(),
        )
        path = _receipt.write(launch.receipts, data, owned)
    except OSError as exc:
        _warn_no_receipts(f"writing a receipt into {launch.receipts} failed: {exc.strerror or exc}")
        return
    except ValueError:
        return
    tree.parts.receipt = path
    if tree.parts.keeper.exited():
        # It ended the tree (and looked for the receipt) before we wrote it: nobody else will remove it.
        tree.parts.remove_receipt()
