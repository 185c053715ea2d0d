"""Contained spawning: spawn() starts a tree that cannot leak, and Tree ends it.

The command runs under a keeper, a small C program (proctree-keeper, built
from csrc/keeper/ into the package) that is the tree's
session leader and, in subreaper mode, a child subreaper, so descendants that
double-fork reparent to it instead of to init. In cgroup mode the command also
runs in a cgroup of its own, which nothing leaves without privilege, and
teardown ends with cgroup.kill. Every member carries the PROCTREE_OWNER
marker. The keeper tears the tree down when the command ends (unless
keep_orphans) and when the owner dies, however it dies. The keeper is started
and heard only through protocol.py; the owner's own teardowns use the teardown
engine and owner.py, never the keeper's code.

This module must never signal a pid it did not verify as part of the tree:
the keeper is our own child (its pid stays ours until we reap it, so nothing
walks from it after that), and cgroup members are members of a cgroup we made.
Nor may it leave a keeper running that no Tree holds: a spawn interrupted or
cancelled at any point ends the keeper and whatever it started before the
interruption propagates. The Tree reaps its keeper itself, through the Popen
that started it; no teardown engine reaps it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import errno
import functools
import itertools
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import warnings
from typing import Any, cast

from .. import _fds
from .._errors import AccessDenied, NoSuchProcess, ReceiptWarning
from .._table import binding as _binding
from .._table import namespaces as _namespaces
from .._table.model import Proc
from .._teardown import engine as _teardown
from .._teardown import many as _many
from .._teardown import signals as _signals
from .._teardown import trioface as _trioface
from .._teardown.report import TeardownReport
from .._validate import check_seconds, check_signal
from . import cgroup as _cgroup
from . import keeperwatch as _keeperwatch
from . import marker as _marker
from . import owner as _owner
from . import protocol as _protocol
from . import receipt as _receipt
from . import spare as _spare
from . import terminal as _terminal

log = logging.getLogger("proctree")

MODES = ("auto", "cgroup", "subreaper", "session")
# The keeper program, built from csrc/keeper/ beside the extension module
# (build_keeper.py). Found relative to the package, never on PATH.
_KEEPER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "proctree-keeper")
_LINUX = sys.platform.startswith("linux")

# Popen keywords spawn() handles itself. Each is accepted at its default (and
# at any value the tree already honours), so a generic Popen wrapper can pass
# them through; a value that would break containment is refused, with why.
POPEN_POLICY = {
    "start_new_session": "any value: the tree always runs in a session of its own, led by the keeper",
    "process_group": "None or 0 (the command leads a process group of its own); another group would "
    "take the command out of the tree's session",
    "preexec_fn": "None only: a function would run in the keeper, not in the command (and is unsafe with threads)",
    "user": "None or the caller's own user: the keeper would lose the right to contain the tree "
    "(run the owner as that user instead)",
    "group": "None or the caller's own group: the keeper would lose the right to contain the tree "
    "(run the owner as that group instead)",
    "extra_groups": "None only: the keeper would lose the right to contain the tree",
}
_UNIX_SHELL = "/bin/sh"  # what Popen runs for shell=True (outside Android)

# How long spawn() waits for the keeper to report (a hung keeper must not hang us).
START_TIMEOUT = 60.0
# How long a teardown waits for the keeper to answer its hold (it answers at once unless stopped or busy).
_HOLD_ANSWER = 2.0
# Seconds between looks, while spawn() waits, for a keeper that something stopped.
_STOPPED_KEEPER_CHECK = 0.5
_counter = itertools.count(1)
# The PROCTREE_TREE value of the next tree (tests replace it to fix one).
_new_tree_id = _marker.new_tree_id


class ContainmentUnavailable(OSError):
    """The containment asked for cannot work here; str() says why."""


class KeeperLost(subprocess.SubprocessError):
    """The tree's keeper died before it reported the command's status (it was killed).

    The command's own status cannot be known then. The owner has ended what
    was left of the tree; report is that teardown's TeardownReport, keeper_pid
    the keeper's pid and keeper_returncode how it ended (Popen's convention).
    """

    def __init__(self, keeper_pid: int, keeper_returncode: int | None, report: TeardownReport | None) -> None:
        self.keeper_pid = keeper_pid
        self.keeper_returncode = keeper_returncode
        self.report = report
        how = (
            "ended"
            if keeper_returncode is None
            else f"was killed by signal {-keeper_returncode}"
            if keeper_returncode < 0
            else f"exited with {keeper_returncode}"
        )
        super().__init__(
            f"the keeper (pid {keeper_pid}) {how} before it reported the command's status; "
            "what was left of the tree has been ended"
        )


class _Stopped(Exception):
    """A worker thread was asked (by a cancelled spawn_async/terminate_async) to stop."""


class _Stop:
    """A request from the event loop that a spawn or teardown running in a worker stop at once.

    fd becomes readable once set (for select), wait(t) sleeps until set, and
    callbacks registered with on_set run when it is set (to reach an event
    loop). Closed by whoever made it, once the worker has finished.
    """

    def __init__(self):
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks = []
        self.fd, self._w = os.pipe()

    def set(self):
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            os.write(self._w, b"x")
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb()

    def is_set(self):
        return self._event.is_set()

    def wait(self, timeout):
        return self._event.wait(timeout)

    def check(self):
        if self._event.is_set():
            raise _Stopped

    def on_set(self, cb):
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(cb)
                return
        cb()

    def close(self):
        _close_fds((self.fd, self._w))


_owner_cache: tuple[int | None, int | None] = (None, None)


def _owner_identity():
    """(pid, start_time) of this process, re-read after a fork."""
    global _owner_cache
    pid = os.getpid()
    if _owner_cache[0] != pid:
        _owner_cache = (pid, _binding.proc(pid).start_time)
    return _owner_cache


def _check_mode(contain):
    if not isinstance(contain, str):
        raise TypeError(f"contain must be a str, not {type(contain).__name__}")
    if contain not in MODES:
        raise ValueError(f"contain must be one of {', '.join(MODES)}; got {contain!r}")
    return contain


def _argv(args, shell, executable):
    """(argv, executable to run) exactly as Popen builds them on POSIX.

    shell=True runs [/bin/sh, "-c", *args], with argv[0] replaced by
    executable when one is given (Popen's rule: bash then runs as bash, not in
    its sh mode); without shell, executable replaces the program run but
    argv[0] stays args[0].
    """
    if isinstance(args, (str, bytes)):
        args = [args]
    elif isinstance(args, os.PathLike):
        if shell:
            raise TypeError("path-like args is not allowed when shell is true")  # as Popen
        args = [args]
    else:
        args = list(args)
    if shell:
        args = [_UNIX_SHELL, "-c"] + args
        if executable:
            args[0] = executable
    argv = [_fs_str(a) for a in args]
    if not argv:
        raise IndexError("list index out of range")  # what Popen raises for []
    exe = _fs_str(executable) if executable is not None else argv[0]
    return argv, exe


def _fs_str(a):
    """One argument as str (bytes and path-likes decoded as Popen encodes them back); TypeError/ValueError as Popen."""
    if isinstance(a, (bytes, os.PathLike)):
        a = os.fsdecode(a)
    if not isinstance(a, str):
        raise TypeError(f"expected str, bytes or os.PathLike object, not {type(a).__name__}")
    if "\0" in a:
        raise ValueError("embedded null byte")
    return a


def _own_id(value, kind):
    """True if user=/group= value names the caller's own (real and effective) id: a no-op Popen would do."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{kind} must be a string or an integer, not {type(value).__name__}")
    if isinstance(value, str):
        import grp
        import pwd

        try:
            value = pwd.getpwnam(value).pw_uid if kind == "user" else grp.getgrnam(value).gr_gid
        except KeyError:
            return False
    if kind == "user":
        return value == os.getuid() == os.geteuid()
    return value == os.getgid() == os.getegid()


def _take_popen_policy(kw):
    """Remove the keywords of POPEN_POLICY from kw; ValueError (saying why) for a value that would break containment."""
    for key in POPEN_POLICY:
        if key not in kw:
            continue
        value = kw.pop(key)
        if key == "process_group":
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"process_group must be an int or None, not {type(value).__name__}")
            if value <= 0:
                continue  # 0: the command's own group, which it gets anyway; negative: Popen sets none
        elif key == "start_new_session" or value is None:
            continue
        elif key in ("user", "group") and _own_id(value, key):
            continue
        raise ValueError(f"spawn() does not accept {key}={value!r}: {POPEN_POLICY[key]}")


def spawn(
    args: Any,
    *,
    contain: str = "auto",
    grace: float = 2.0,
    keep_orphans: bool = False,
    tag: str | None = None,
    pty: bool = False,
    stop_signal: int | str = signal.SIGTERM,
    **popen_kwargs: Any,
) -> Tree:
    """Start args as a contained tree and return its Tree once the command runs.

    args and the Popen keywords behave as in subprocess.Popen (stdio pipes,
    cwd, env, text, pass_fds, shell, executable, ...); the keywords of
    POPEN_POLICY are accepted at their defaults and refused (ValueError) at a
    value that would break containment. contain is "auto" (the strongest that
    works here), "cgroup", "subreaper" or "session". A missing executable
    raises the FileNotFoundError Popen raises. Interrupted (KeyboardInterrupt,
    any exception), it leaves nothing running.

    pty=True gives the command a new pseudo-terminal as its controlling
    terminal and its stdin/stdout/stderr (ValueError if any of those is given
    too), sized like the caller's terminal if it has one; Tree.pty is then
    the master side's fd.

    stop_signal (a number or a name, "SIGINT" or "INT"; SIGTERM by default)
    is what each member gets, once, when the tree is ended: by terminate(),
    by the keeper when the command exits and leaves processes behind, and by
    the keeper on the owner's death. SIGKILL, SIGSTOP and SIGCONT are refused
    (ValueError).
    """
    return _spawn(args, contain, grace, keep_orphans, tag, dict(popen_kwargs, pty=pty, stop_signal=stop_signal), None)


def _spawn(args, contain, grace, keep_orphans, tag, popen_kwargs, stop):
    """spawn(); stop (a _Stop, or None) lets another thread abandon it at once."""
    contain = _check_mode(contain)
    grace = check_seconds(grace, "grace")
    popen_kwargs = dict(popen_kwargs)
    stop_signal = check_signal(popen_kwargs.pop("stop_signal", signal.SIGTERM), "stop_signal")
    if not isinstance(keep_orphans, bool):
        raise TypeError(f"keep_orphans must be a bool, not {type(keep_orphans).__name__}")
    tag = _marker.check_tag(tag)
    _take_popen_policy(popen_kwargs)
    pty = _take_pty(popen_kwargs)
    shell = popen_kwargs.pop("shell", False)
    executable = popen_kwargs.pop("executable", None)
    restore_signals = popen_kwargs.pop("restore_signals", True)
    argv, exe = _argv(args, shell, executable)
    env = popen_kwargs.pop("env", None)
    env = dict(os.environ if env is None else env)
    owner_pid, owner_start = _owner_identity()
    marker = _marker.format_marker(owner_pid, owner_start, tag, _marker_place())
    env[_marker.ENV] = marker
    tree_id = _new_tree_id()
    # Inside another tree (the caller carries its marker), the chain keeps the enclosing tree's id too.
    env[_marker.TREE_ENV] = _marker.tree_chain(tree_id, os.environ.get(_marker.TREE_ENV))
    _keeper_program()  # a broken installation says so before anything is made
    if stop is not None:
        stop.check()

    mode, reason, cgroup = _choose(contain, owner_pid, owner_start, tag)
    launch = _Launch(
        args,
        tuple(argv),
        exe,
        env,
        mode,
        reason,
        cgroup,
        grace,
        keep_orphans,
        restore_signals,
        marker,
        tree_id,
        tag,
        (owner_pid, owner_start),
        _receipt_directory(),  # None: no receipts here (no location passed the checks; warned once)
        pty,
        stop_signal,
    )
    reasons = [reason] if reason else []
    while True:
        try:
            return _start(launch, dict(popen_kwargs), stop)
        except ContainmentUnavailable as exc:
            if launch.cgroup is not None:
                _cgroup.remove(launch.cgroup)
            if contain != "auto" or launch.mode == "session":
                raise
            # The keeper refused the mode before it started the command (a
            # delegation that allows mkdir but not the move into the cgroup; a
            # kernel or sandbox that refuses PR_SET_CHILD_SUBREAPER): fall back.
            reasons.append(f"{launch.mode}: {os.strerror(exc.errno) if exc.errno else exc.strerror}")
        except BaseException:
            if launch.cgroup is not None:
                _cgroup.remove(launch.cgroup)
            raise
        weaker = "subreaper" if launch.mode == "cgroup" and _LINUX else "session"
        launch = dataclasses.replace(launch, mode=weaker, reason="; ".join(reasons), cgroup=None)


@dataclasses.dataclass(frozen=True)
class _Launch:
    """What spawn() decided before starting anything: the command, its environment and its containment."""

    args: Any  # as the caller gave them (Tree.args)
    argv: tuple[str, ...]
    exe: str  # the program run (argv[0] unless executable= was given)
    env: dict[str, str]
    mode: str  # "cgroup", "subreaper" or "session"
    reason: str | None  # why a stronger mode was not used, or None
    cgroup: str | None
    grace: float
    keep_orphans: bool
    restore_signals: bool
    marker: str
    tree_id: str  # this tree's own id (its members' PROCTREE_TREE starts with it)
    tag: str | None
    owner: tuple[int, int]  # (pid, start time) of the caller of spawn()
    receipts: str | None  # the receipt directory, or None
    pty: bool = False  # the command runs on a new pseudo-terminal
    stop_signal: int = signal.SIGTERM  # what each member gets, once, when the tree is ended

    def keeper_args(self, status_fd: int, go_fd: int | None) -> _protocol.KeeperArgs:
        return _protocol.KeeperArgs(
            status_fd=status_fd,
            go_fd=go_fd,
            mode=self.mode,
            owner_pid=os.getpid(),
            grace=self.grace,
            keep_orphans=self.keep_orphans,
            cgroup=self.cgroup,
            restore_signals=self.restore_signals,
            exe=None if self.exe == self.argv[0] else self.exe,
            receipts=self.receipts,
            pty=self.pty,
            stop_signal=self.stop_signal,
            argv=self.argv,
        )


def _take_pty(kw: dict[str, Any]) -> bool:
    """Remove pty from kw; TypeError unless a bool, ValueError if it comes with stdin/stdout/stderr."""
    pty = kw.pop("pty", False)
    if not isinstance(pty, bool):
        raise TypeError(f"pty must be a bool, not {type(pty).__name__}")
    given = [k for k in ("stdin", "stdout", "stderr") if kw.get(k) is not None]
    if pty and given:
        raise ValueError(
            f"spawn() does not accept {', '.join(given)} with pty=True: the terminal is the command's stdio"
        )
    return pty


def _choose(contain, owner_pid, owner_start, tag):
    """(mode, why the stronger modes were not used, cgroup path or None)."""
    reasons = []
    if contain in ("auto", "cgroup"):
        if not _LINUX:
            why = f"cgroups are Linux-only (this is {sys.platform})"
            if contain == "cgroup":
                raise ContainmentUnavailable(errno.ENOSYS, f"contain='cgroup' is unavailable: {why}")
            reasons.append(why)
        else:
            name = f"{tag or 'tree'}-{next(_counter)}-{secrets.token_hex(3)}"
            try:
                return "cgroup", None, _cgroup.create(owner_pid, owner_start, name)
            except _cgroup.Unavailable as exc:
                if contain == "cgroup":
                    raise ContainmentUnavailable(exc.errno, f"contain='cgroup' is unavailable: {exc.strerror}") from exc
                reasons.append(f"cgroup: {exc.strerror}")
    if contain in ("auto", "subreaper"):
        if _LINUX:
            return "subreaper", "; ".join(reasons) or None, None
        why = f"child subreapers are Linux-only (this is {sys.platform})"
        if contain == "subreaper":
            raise ContainmentUnavailable(errno.ENOSYS, f"contain='subreaper' is unavailable: {why}")
        reasons.append(why)
    return "session", "; ".join(reasons) or None, None


class _KeeperPopen(subprocess.Popen):
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
        super()._execute_child(*args, **kwargs)  # type: ignore[misc]  # private in typeshed, present in CPython


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


def _keeper_program() -> str:
    """The keeper's path, or ContainmentUnavailable naming it when it is missing or not executable."""
    if not os.path.isfile(_KEEPER):
        why = "is missing"
    elif not os.access(_KEEPER, os.X_OK):
        why = "is not executable"
    else:
        return _KEEPER
    raise ContainmentUnavailable(
        errno.ENOENT if why == "is missing" else errno.EACCES,
        f"proctree's keeper program {_KEEPER} {why}: the installation is incomplete "
        "(reinstall proctree; in a source checkout, `pip install -e .` builds it)",
    )


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
                _spare.retrying(lambda: _owner.kill_below_keeper(popen.pid, cgroup=cgroup, session=mode == "session"))
            elif cgroup is not None:
                _spare.retrying(lambda: _owner.end_cgroup(cgroup, 0))
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


def _marked_roots(tree_id: str, after: tuple[int, int], keeper: int | None) -> list[Proc]:
    """The live processes whose PROCTREE_TREE names tree_id, as roots of their own trees (a marked
    process below another marked one is left to that one's teardown).

    after: (start time, pid) of the keeper: only processes started after it
    count (in its clock tick: with a higher pid, as pids are handed out in
    order). keeper: a live keeper whose members (descendants, session) are
    left out, or None. The caller is never among them.
    """
    me = os.getpid()
    snap = _binding.snapshot()
    members = set()
    if keeper is not None:
        members.add(keeper)
        if keeper in snap:
            members.update(snap.descendant_pids(keeper))
    candidates = {
        p.pid: p
        for p in snap.values()
        if (p.start_time, p.pid) > after
        and p.pid not in members
        and (keeper is None or p.sid != keeper)
        and p.pid not in (me, 0, 1)
        and not p.is_zombie
    }
    found = _binding.env_scan(_marker.TREE_ENV, sorted(candidates))
    marked = {pid: p for pid, p in candidates.items() if _marker.carries_tree(found.get(pid), tree_id)}

    def under_another(p: Proc) -> bool:
        seen = set()
        q = p
        while q.ppid in snap and q.ppid not in seen and q.ppid > 1:
            seen.add(q.ppid)
            if q.ppid in marked:
                return True
            q = snap[q.ppid]
        return False

    return sorted((p for p in marked.values() if not under_another(p)), key=lambda p: p.pid)


def _kill_marked(tree_id: str, after: tuple[int, int]) -> list[TeardownReport]:
    """SIGKILL, as trees of their own, what carries tree_id and started after the (dead) keeper: twice, for late forks."""
    reports: list[TeardownReport] = []
    for _ in range(2):
        roots = _spare.retrying(lambda: _marked_roots(tree_id, after, None))
        if not roots:
            break
        reports += _many.end_trees(roots, grace=0, signal_group=False)
    return reports


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
        r, w = os.pipe()
        ours += [r, w]
        pass_fds = _hand_to_keeper(pass_fds, (w,), kw)
        master = slave = None
        if launch.pty:  # the slave is the keeper's stdio, which it makes its controlling terminal
            master, slave = _terminal.open_pty()
            ours += [master, slave]
            kw.update(stdin=slave, stdout=slave, stderr=slave)
        # No go fd: in cgroup mode the keeper stays outside the cgroup and starts the
        # command inside it (clone3 CLONE_INTO_CGROUP: no migration to wait for).
        cmd = [_keeper_program(), *launch.keeper_args(w, None).to_argv()]
        if stop is not None:
            stop.check()
        # start_new_session: the keeper leaves the caller's session and terminal
        # before its interpreter even starts, so a Ctrl-C at the terminal in
        # those ~15 ms cannot reach it (a fresh child never leads a group, so this
        # setsid cannot fail; the keeper still tries setsid/setpgid itself).
        try:
            with _handlers_deferred():
                popen = _KeeperPopen(started, cmd, env=launch.env, pass_fds=pass_fds, start_new_session=True, **kw)
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
        first = tree._first_status(time.monotonic() + START_TIMEOUT, stop)
        if isinstance(first, _protocol.Ok):
            tree._took_root(first, os.path.basename(launch.exe))
            tree._write_receipt(launch)
            _keeper_watch().watch(tree.keeper_pid, tree, Tree._on_keeper_exit, Tree._keeper_exit_settled)
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
    if first is None and popen.returncode is not None and popen.returncode < 0:
        # Killed before its first line: it may have started the command, which (and whatever it
        # started) runs on without it. End that as after any lost keeper, then say so.
        lost = KeeperLost(popen.pid, popen.returncode, tree._end_leftovers())
        tree._abandon(sweep=False)  # swept just now
        raise lost
    # An err line: the command never ran, so there is nothing to look for by marker.
    tree._abandon(sweep=not isinstance(first, _protocol.Err))
    raise _start_error(first, launch, popen)


def _give_up(ours: list[int], tree: Tree | None, started: list[subprocess.Popen], launch: _Launch) -> None:
    """A start failed or was interrupted: close our fds, end the keeper and whatever it started."""
    _close_fds(ours)
    if tree is not None:
        tree._abandon(patience=0)
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


class Tree:
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
        self.stdin, self.stdout, self.stderr = popen.stdin, popen.stdout, popen.stderr
        self._popen = popen
        self._status_fd: int | None = status_fd
        self._buf = b""
        self._eof = False
        self._status: int | None = None  # the command's raw wait status, once known
        self._root: Proc | None = None
        self._report: TeardownReport | None = None
        self._lock = threading.RLock()
        self._owner_pid = os.getpid()  # the process whose child the keeper is: the only one that may use this Tree
        # The keeper's start time, read while it is our unreaped child (its pid is its own): what
        # "started after the keeper" means for the marker sweeps, even if it dies before its first line.
        self._keeper_start: int | None = _start_time(popen.pid)
        self._receipt: str | None = None
        self._lost: KeeperLost | None = None  # set once the keeper died without its status line
        self._recovery: TeardownReport | None = None  # the owner's teardown of what a killed keeper left
        self._recovered = threading.Event()  # set once what a lost keeper left is ended
        self._readers = 0  # wait_async() calls watching the status pipe
        self._loop_watches: dict[Any, list[Any]] = {}  # event loop -> [future, waiters, reader callback]
        self._done = False  # the keeper's last line came: it ended its tree itself
        self._closing: list[int] = []  # status pipe fds to close once no wait_async() watches them
        self.pty: int | None = None  # the master fd, pty trees only
        self.stops = 0
        self.stop_signal: int | None = None  # the signal of the last stop reported
        self.terminate_signal = launch.stop_signal  # what terminate() sends each member, once, by default
        # (pid, start time) -> the stop-type signal a forward through the keeper sent it: no teardown sends another
        self._stopped: dict[tuple[int, int], int] = {}
        self._held = False  # the keeper said "held": it leaves every teardown to us
        self._swept = False  # the keeper said "sweep": it is ending the tree itself

    def __repr__(self) -> str:
        rc = "lost" if self._lost is not None or (self._eof and self._status is None) else self._known_returncode()
        return f"<proctree.Tree pid={self.pid} mode={self.mode} returncode={rc}>"

    def _known_returncode(self) -> int | None:
        return None if self._status is None else os.waitstatus_to_exitcode(self._status)

    @property
    def keeper_pid(self) -> int:
        return self._popen.pid

    @property
    def receipt(self) -> str | None:
        """The path of this tree's receipt file while it exists; None if none was written (or it was removed)."""
        return self._receipt

    def _write_receipt(self, launch: _Launch) -> None:
        """Write the tree's receipt (the keeper reported Ok: every identity is known now).

        Never fails the spawn: a directory that failed its checks, a receipt
        too long to write whole, or a write error leaves the tree without one.
        """
        try:
            keeper = _binding.proc(self.keeper_pid)  # our unreaped child: its pid is its own
        except (NoSuchProcess, OSError):
            return
        self._keeper_start = keeper.start_time
        if launch.receipts is None or self._root is None:
            return
        try:
            path = _receipt.write(
                launch.receipts,
                owner=launch.owner,
                keeper=(keeper.pid, keeper.start_time),
                command=(self._root.pid, self._root.start_time),
                sid=keeper.sid,
                pgid=self._root.pgid,
                cgroup=launch.cgroup,
                tag=launch.tag,
                mode=launch.mode,
                marker=launch.marker,
                tree=launch.tree_id,
                **_namespace_fields(),
            )
        except OSError as exc:
            _warn_no_receipts(f"writing a receipt into {launch.receipts} failed: {exc.strerror or exc}")
            return
        except ValueError:
            return
        self._receipt = path
        if _keeper_exited(self.keeper_pid):
            # It ended the tree (and looked for the receipt) before we wrote it: nobody else will remove it.
            self._remove_receipt()

    def _remove_receipt(self) -> None:
        path, self._receipt = self._receipt, None
        if path is not None:
            try:
                _receipt.remove(path)
            except OSError:
                pass

    def _took_root(self, ok: _protocol.Ok, name: str) -> None:
        """The keeper reported Ok: record the command, by that identity.

        The full record is read back only if it is still that process (the
        start time is the same C core reading on Linux and macOS, so the check
        holds everywhere); else the keeper's word is kept.
        """
        self.pid = ok.pid
        self._root = Proc(ok.pid, self.keeper_pid, ok.pid, self.keeper_pid, os.getuid(), "R", ok.start_time, name)
        try:
            p = _binding.proc(ok.pid)
        except (NoSuchProcess, OSError):
            return  # it already ended: keep what the keeper told us
        if p.start_time == ok.start_time:
            self._root = p

    # -- status channel -----------------------------------------------------
    def _first_status(self, deadline: float, stop: _Stop | None) -> _protocol.Status | None:
        """The keeper's first status record (Ok or Err), None if it exited without one.

        A line that breaks the protocol is an error of the keeper: SubprocessError.
        A keeper stopped meanwhile (the command may SIGSTOP its parent at once) is
        continued: the keeper watch, which does that later, starts after this line.
        """
        while True:
            try:
                line = self._next_line(min(deadline, time.monotonic() + _STOPPED_KEEPER_CHECK), stop)
                break
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise
                _continue_if_stopped(self._popen.pid)
        if line is None:
            return None
        try:
            return _protocol.parse_status(line)
        except _protocol.ProtocolError as exc:
            raise subprocess.SubprocessError(f"the keeper broke its protocol: {exc}") from None

    def _next_line(self, deadline, stop=None):
        """The next status line from the keeper, None at EOF; TimeoutError once deadline (monotonic) has passed.

        _Stopped as soon as stop (a _Stop, or None) is set.
        """
        while b"\n" not in self._buf:
            if self._eof:
                return None
            left = max(0.0, deadline - time.monotonic())  # 0: just look
            status_fd = self._status_fd
            assert status_fd is not None  # set until _finish, which runs under the lock we hold
            watch = [status_fd] if stop is None else [status_fd, stop.fd]
            ready = _fds.readable(watch, left)
            if stop is not None:
                stop.check()
            if not ready:
                raise TimeoutError
            data = os.read(status_fd, 4096)
            if not data:
                self._eof = True
                return None
            self._buf += data
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode()

    def _pump(self, deadline):
        """Read status lines until the command's status is known or deadline (None: no limit). True if known.

        The lock is held to read what has arrived, never while waiting for
        more: a wait() in one thread must not hold up a terminate() in another.
        """
        while True:
            with self._lock:
                if self._lost is not None:
                    return True  # the keeper watch found it killed (its pipe may still be held open elsewhere)
                while self._status is None:
                    if self._status_fd is None:
                        return self._lost is not None
                    try:
                        line = self._next_line(0)  # a deadline long past: just look
                    except TimeoutError:
                        break  # nothing complete yet: wait below, without the lock
                    if line is None:
                        # The keeper went away without a word (killed): the command's status is
                        # unknowable, and ending what it left is the keeper watch's (_keeper_exited).
                        return True
                    self._status = self._heard(line)
                if self._status is not None or self._eof:
                    return True
                fd = self._status_fd
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            try:
                # Sliced: another thread's _finish may close fd under us (the next look says so).
                _fds.readable([] if fd is None else [fd], 0.5 if left is None else min(left, 0.5))
            except (OSError, ValueError):
                pass

    def _heard(self, line):
        """A status line after Ok: the wait status it carries if it is the exit, else None (a stop is counted;
        a malformed line is ignored, as the keeper's exit without an exit line still tells)."""
        try:
            record = _protocol.parse_status(line)
        except _protocol.ProtocolError:
            return None
        if isinstance(record, _protocol.Stopped):
            self.stops += 1
            self.stop_signal = record.signal
        elif isinstance(record, _protocol.Done):
            self._done = True
        elif isinstance(record, _protocol.Held):
            self._held = True
        elif isinstance(record, _protocol.Sweep):
            self._swept = True
        return record.wait_status if isinstance(record, _protocol.Exit) else None

    def _drain(self) -> None:
        """Read every status line already written (the keeper has exited: up to its done line, or EOF)."""
        while self._status_fd is not None:
            try:
                line = self._next_line(0)
            except TimeoutError:
                return
            if line is None:
                return
            status = self._heard(line)
            if status is not None and self._status is None:
                self._status = status

    @property
    def status_fd(self) -> int | None:
        """The fd the keeper's status lines arrive on (readable when the command stops or ends), for select loops.

        Never read it: poll() does, and updates returncode and stops. None once the Tree has finished.
        """
        return self._status_fd

    @property
    def returncode(self) -> int | None:
        """The command's exit code (negative signal number, as Popen), or None while it runs.

        Raises KeeperLost if the keeper was killed before it reported it.
        """
        return self.poll()

    def poll(self) -> int | None:
        """The command's returncode if it has ended, else None; KeeperLost if its keeper was killed first."""
        self._check_owner()
        self._pump(time.monotonic())
        self._raise_if_lost(None)
        return self._known_returncode()

    def _raise_if_lost(self, deadline: float | None) -> None:
        """Raise KeeperLost if the keeper died without the command's status (once its tree is ended, by deadline)."""
        if self._status is not None:
            return
        if self._lost is None and self._eof:
            self._on_keeper_exit()  # EOF came before the keeper watch's call: end the tree here
        if self._lost is None:
            return
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self._recovered.wait(None if left is None else min(left, threading.TIMEOUT_MAX))
        self._close_status_fd()  # nothing more will come on it
        raise self._lost

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the command to end and return its returncode.

        Without keep_orphans this also waits (within timeout) for the keeper to
        end what the command left behind. Raises subprocess.TimeoutExpired.
        """
        self._check_owner()
        deadline = None if timeout is None else time.monotonic() + check_seconds(timeout, "timeout")
        if not self._pump(deadline):
            raise subprocess.TimeoutExpired(self.args, cast(float, timeout))
        self._raise_if_lost(deadline)
        if not self.keep_orphans:
            try:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                _wait_keeper(self._popen, left)
                self._finish()
            except subprocess.TimeoutExpired:
                pass
        assert self._status is not None  # _pump() said it is known
        return os.waitstatus_to_exitcode(self._status)

    def join(self, timeout: float | None = None) -> int:
        """Wait until nothing of the tree is left running (with keep_orphans: the orphans too).

        Returns the command's returncode; raises subprocess.TimeoutExpired.
        """
        self._check_owner()
        deadline = None if timeout is None else time.monotonic() + check_seconds(timeout, "timeout")
        rc = self.wait(timeout)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            _wait_keeper(self._popen, left)  # the keeper ends with its last member
        except subprocess.TimeoutExpired as exc:
            raise self._as_ours(exc) from None
        self._finish()
        return rc

    async def wait_async(self, timeout: float | None = None) -> int:
        """wait() without blocking the event loop (any number of them at once, on one loop or several)."""
        self._check_owner()
        if _trioface.running_library() == "trio":
            then = None if self.keep_orphans else 2 * self.grace + 5
            return await _trioface.wait_in_slices(self.wait, timeout, self.args, then)
        loop = asyncio.get_running_loop()
        watch: list[Any] = []
        with self._lock:
            fd = self._status_fd if self._status is None and self._lost is None else None
            if fd is not None:
                self._readers += 1  # the fd stays open (not reused) while a loop watches it
                watch = self._loop_watches.get(loop) or []
                if not watch:
                    # One reader per loop and fd (add_reader would replace another waiter's):
                    # every wait_async() on this loop awaits the same future.
                    fut = loop.create_future()

                    def readable():
                        if self._pump(time.monotonic()) and not fut.done():
                            fut.set_result(None)

                    watch = self._loop_watches[loop] = [fut, 0, readable]
                    loop.add_reader(fd, readable)
                watch[1] += 1
        if fd is not None:
            try:
                watch[2]()
                await asyncio.wait_for(asyncio.shield(watch[0]), timeout)
            except asyncio.TimeoutError:
                raise subprocess.TimeoutExpired(self.args, cast(float, timeout)) from None
            finally:
                with self._lock:
                    watch[1] -= 1
                    if not watch[1]:
                        loop.remove_reader(fd)
                        del self._loop_watches[loop]
                    self._readers -= 1
                    if not self._readers:
                        _close_fds(self._closing)
                        self._closing = []
        return await asyncio.to_thread(self.wait, None if self.keep_orphans else 2 * self.grace + 5)

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        """Popen.communicate through the keeper: (stdout, stderr), then the command's status is known."""
        self._check_owner()
        if timeout is not None:
            check_seconds(timeout, "timeout")  # the rule wait() applies: NaN, negative and inf are refused
        try:
            out = self._popen.communicate(input, timeout)
        except subprocess.TimeoutExpired as exc:
            raise self._as_ours(exc) from None
        self._pump(time.monotonic() + 5)
        self._finish()
        return out

    def _as_ours(self, exc):
        """A TimeoutExpired from the keeper's Popen, naming the user's command (the output read so far kept)."""
        exc.cmd = self.args
        return exc

    def send_signal(self, sig: int) -> None:
        """Send sig to the command.

        The signals the keeper forwards (protocol.FORWARD) go through it, to the
        command's process group. Any other goes to the command alone, by pidfd
        after checking its start time, while the keeper still holds it
        unreaped: SIGKILL and SIGSTOP cannot be caught, and the rest would kill
        the keeper (SIGPROF, SIGABRT, ...: its orphans would escape to init) or
        be swallowed by it (SIGALRM, its wake-up).
        """
        self._check_owner()
        if isinstance(sig, bool) or not isinstance(sig, int):
            raise TypeError(f"sig must be a signal number, not {type(sig).__name__}")
        if sig in _protocol.FORWARD or (sig == signal.SIGCONT and self.pty is not None):
            if sig in _protocol.STOPPING or sig == self.terminate_signal:
                self._record_stopped(sig)
            # SIGCONT on a pty tree: the keeper gives the terminal back to the command's group first.
            self._popen.send_signal(sig)  # our own child, and Popen never signals it once reaped
        else:
            self._send_direct(sig)

    def _record_stopped(self, sig: int) -> None:
        """Remember the members of the command's group that a forwarded stop-type signal is about to reach.

        A later teardown sends them no second stop signal (to many servers a
        second one means "force quit" and cuts their drain); the keeper keeps
        the same record for its own teardowns.
        """
        if self.pid is None or self._status is not None or not self._keeper_is_ours():
            return
        try:
            snap = _binding.snapshot()
        except OSError:
            return
        for p in snap.values():
            if p.pgid == self.pid and not p.is_zombie:
                self._stopped.setdefault(p.identity, sig)

    def _send_direct(self, sig):
        if self.poll() is not None or self._root is None or not self._keeper_is_ours():
            return
        try:
            now = _binding.proc(self._root.pid)
        except (NoSuchProcess, OSError):
            return
        if now.ppid != self.keeper_pid or now.start_time != self._root.start_time:
            return
        _owner.signal_member(self._root, sig)

    # -- membership and teardown --------------------------------------------
    def _keeper_is_ours(self):
        # Until we reap it, the keeper's pid cannot be reused: walking from it is safe.
        return self._popen.returncode is None and os.getpid() == self._owner_pid

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

        out = {}
        if self.cgroup is not None:
            for pid in _cgroup.pids(self.cgroup):
                try:
                    p = _binding.proc(pid)
                except (NoSuchProcess, OSError):
                    continue
                out[pid] = p
        if self._keeper_is_ours():
            try:
                for p in _live.descendants(self.keeper_pid):
                    out[p.pid] = p
            except NoSuchProcess:
                pass
            if self.mode == "session" and self._keeper_is_ours():
                # Session mode: a double-forker that kept our session is still found by sid,
                # and one that left it by the tree's marker (and what it started).
                snap = _binding.snapshot()
                for p in snap.values():
                    if p.sid == self.keeper_pid and p.pid != self.keeper_pid:
                        out.setdefault(p.pid, p)
                for root in self._marked_outsiders():
                    out.setdefault(root.pid, root)
                    if root.pid in snap:
                        for p in snap.descendants(root.pid):
                            out.setdefault(p.pid, p)
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

    def _hold_keeper(self, stop: _Stop | None) -> None:
        """Ask the keeper to leave this teardown to us, and wait for its answer (held, or the end of its own sweep).

        The keeper answers "held" and from then on signals no member itself;
        if its own sweep began first (the command exited by itself) it said
        "sweep" before its first signal, and we wait for its last line instead:
        what it signalled must not be signalled again. A keeper that does not
        answer (stopped, or its pipe full) is not waited for past a bound.
        """
        if self._done or self._held or self._status_fd is None or not self._keeper_is_ours():
            return
        try:
            self._popen.send_signal(_protocol.HOLD_SIGNAL)
        except OSError:
            return
        deadline = time.monotonic() + _HOLD_ANSWER
        while not (self._held or self._done):
            if self._swept:
                deadline = max(deadline, time.monotonic() + self.grace + _HOLD_ANSWER)
            try:
                line = self._next_line(deadline, stop)
            except TimeoutError:
                _continue_if_stopped(self._popen.pid)
                return
            if line is None:
                return
            status = self._heard(line)
            if status is not None and self._status is None:
                self._status = status

    def _terminate(self, grace, stop, sig=None):
        """terminate(); once stop (a _Stop, or None) is set, what is left is SIGKILLed at once."""
        sig = self.terminate_signal if sig is None else sig
        with self._lock:
            if self._eof and self._status is None and self._lost is None:
                self._on_keeper_exit()  # the keeper is gone: what it left is ended there
            if self._recovery is not None:
                self._close_status_fd()
                self._close_pty()
                return self._recovery
            t0 = time.monotonic()
            try:
                self._hold_keeper(stop)
            except _Stopped:
                grace = 0.0
            if self.cgroup is not None:
                rep = self._cgroup_teardown(grace, stop, sig)
                rep = dataclasses.replace(rep, root=self._root, mode=self.mode)
            elif self._keeper_is_ours():
                try:
                    rep = self._engine_teardown(grace, stop, sig)
                    rep = dataclasses.replace(rep, root=self._root, mode=self.mode)
                except NoSuchProcess:
                    # The keeper, our unreaped child, cannot vanish; if it did, what it
                    # held went to init with it and the keeper's own sweep has nothing to start from.
                    rep = TeardownReport(root=self._root, mode=self.mode)
            else:
                rep = TeardownReport(root=self._root, mode=self.mode)
            self._finish(clean=rep.ok)
            if self._lost is not None and self._recovery is None:
                # The keeper died during the teardown without the command's status: what it
                # held may have been reparented away from the walk; end it by its markers too.
                more = self._end_leftovers()
                rep = _merge_reports(rep, [more], [], [p.pid for p in more.found])
                self._lost.report = self._recovery = rep
            rep = dataclasses.replace(
                rep,
                elapsed=time.monotonic() - t0,
                extra={
                    **rep.extra,
                    "keeper": self.keeper_pid,
                    **({"cgroup": self.cgroup} if self.cgroup else {}),
                    **({"keeper_swept": True} if self._swept else {}),
                },
            )
            self._report = rep
            return rep

    def _cgroup_teardown(self, grace, stop, sig):
        """The cgroup's members ended by owner.end_cgroup; a stop skips the rest of the grace."""
        assert self.cgroup is not None  # called in cgroup mode only
        return _owner.end_cgroup(
            self.cgroup,
            grace,
            spare={self.keeper_pid},
            stop_fd=None if stop is None else stop.fd,
            stop_signal=sig,
            already=self._stopped,
        )

    def _engine_teardown(self, grace, stop, sig):
        """The teardown engine on what is below the keeper (the keeper spared: it reaps, then exits by itself).

        Driven in this thread, with no thread or event loop of its own (a
        fork storm that fills the pid space is when a teardown is needed);
        once stop (a _Stop) is set, the rest of the grace is skipped.
        """
        if self.mode == "session":
            return self._session_teardown(grace, stop, sig)
        engine = _teardown.make_teardown(
            self.keeper_pid, grace=grace, include_root=False, signal_group=False, signal=sig, already=self._stopped
        )
        return _teardown.run_blocking(engine, None if stop is None else stop.fd)

    def _session_teardown(self, grace, stop, sig):
        """Session mode: the engine below the keeper, together with the daemons that carry this tree's marker.

        The keeper's tree and the marked outsiders are ended at once (one
        grace), then a last look for late daemons; all in this thread.
        """
        stop_fd = None if stop is None else stop.fd
        protect = {self.keeper_pid}
        daemons = self._marked_outsiders()
        main_engine = _teardown.make_teardown(
            self.keeper_pid, grace=grace, include_root=False, signal_group=False, signal=sig, already=self._stopped
        )
        engines = [main_engine, *_many.make_engines(daemons, grace, protect, False, 16384, sig, False, self._stopped)]
        results = _teardown.run_blocking_many(engines, stop_fd, capture=(NoSuchProcess, ValueError))
        main = results[0]
        if isinstance(main, Exception):
            raise main
        first = [_many.report_of(r, res) for r, res in zip(daemons, results[1:], strict=True)]
        # A daemon forked (and marked) while the teardown ran: once more, at once.
        late = self._marked_outsiders()
        again = (
            _many.end_trees(late, grace=0, protect=protect, signal_group=False, signal=sig, already=self._stopped)
            if late
            else []
        )
        return _merge_reports(main, first, again, [p.pid for p in daemons + late])

    def _marked_outsiders(self) -> list[Proc]:
        """Session mode: processes carrying this tree's PROCTREE_TREE that are not (yet) the keeper's members.

        Only processes that started after the keeper count (in the same clock
        tick: with a higher pid, as pids are handed out in order): an older one
        cannot be a member, whatever its environment says. Returned as the
        roots of their own trees (one whose ancestor is marked too is left to
        that ancestor's teardown); each is pinned to its start time by end_trees.
        """
        if self.mode != "session" or self._keeper_start is None or not self._keeper_is_ours():
            return []
        return self._marked(self.keeper_pid)

    def _marked(self, keeper: int | None) -> list[Proc]:
        """The live processes carrying this tree's PROCTREE_TREE, as roots of their own trees.

        keeper: a live keeper whose members (its descendants and session) are
        left out, or None (it is gone: every marked process counts). Only
        processes that started after the keeper count (see _marked_outsiders).
        """
        since = self._keeper_start
        if since is None:
            since = self._root.start_time if self._root is not None else 0
        return _marked_roots(self.tree_id, (since, self.keeper_pid), keeper)

    def _may_have_leftovers(self) -> bool:
        """Session mode with keep_orphans: something of the tree may still run after the keeper ended."""
        if self.mode != "session" or not self.keep_orphans or self._keeper_start is None:
            return False
        since = self._keeper_start
        snap = _binding.snapshot()
        if any(p.sid == self.keeper_pid and p.start_time >= since and not p.is_zombie for p in snap.values()):
            return True
        recent = [p.pid for p in snap.values() if p.start_time >= since and p.pid != os.getpid()]
        return any(_marker.carries_tree(v, self.tree_id) for v in _binding.env_scan(_marker.TREE_ENV, recent).values())

    def _keeper_exit_settled(self) -> bool:
        """The keeper watch's quick look, which never blocks: True if the keeper that exited ended its tree itself.

        Its last line (done) is in, or the Tree was finished already: nothing
        is left for _on_keeper_exit to do but reap the keeper, which is done
        here without waiting (it has exited). False when that cannot be told
        at once (another thread holds the lock) or the keeper did not end its
        tree: the watch then runs _on_keeper_exit in a thread of its own.
        """
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._recovered.is_set() or self._status_fd is None:
                return True
            self._drain()
            if self._done:
                self._popen.poll()  # reaps it: a dropped Tree's keeper is not left a zombie
            return self._done
        finally:
            self._lock.release()

    def _on_keeper_exit(self) -> None:
        """The keeper exited (the keeper watch saw it, or its status pipe closed): finish the tree.

        A keeper that reported the command's status and exited with it ended
        its tree itself. One that did not (it was killed) left the tree
        running, reparented away from it: end what is left here, at once,
        with the tree's grace, and keep the KeeperLost that wait() and poll()
        raise from now on.
        """
        with self._lock:
            if self._recovered.is_set() or self._status_fd is None:
                return  # handled already, or the tree was finished by its owner
            try:
                rc = _wait_keeper(self._popen, 5.0)  # it has exited: this reaps it
            except subprocess.TimeoutExpired:
                self._popen.kill()  # its status pipe closed but it runs on: a keeper that broke its protocol
                rc = self._popen.wait()
            self._drain()  # every line it wrote before it went
            if self._done:
                return  # it ended its tree itself; the Tree's own calls finish it (and close the pipe)
            if self._status is None:
                # Killed before the command ended: its status is unknowable.
                self._lost = KeeperLost(self.keeper_pid, rc, None)
            try:
                report = self._end_leftovers()
                self._report = self._recovery = report
                if self._lost is not None:
                    self._lost.report = report
                # The pipe and the pty stay open: a wait_async() or a relay may be reading them.
                self._finish(clean=report.ok, release_fds=False)
            finally:
                self._recovered.set()

    def _end_leftovers(self, grace: float | None = None) -> TeardownReport:
        """What a killed keeper left of the tree, ended by the owner: the cgroup's members, or the marked processes.

        Outside a cgroup the members were reparented (to init, or to a
        subreaper above us); they are found by this tree's PROCTREE_TREE, as
        the reaper finds them, and ended as trees of their own, each pinned to
        its start time. A member that scrubbed its environment is beyond reach.
        """
        t0 = time.monotonic()
        grace = self.grace if grace is None else grace
        if self.cgroup is not None:
            rep = _owner.end_cgroup(self.cgroup, grace, stop_signal=self.terminate_signal, already=self._stopped)
        else:
            sig, done = self.terminate_signal, self._stopped
            roots = self._marked(None)
            first = _many.end_trees(roots, grace=grace, signal_group=False, signal=sig, already=done) if roots else []
            late = self._marked(None)  # forked while the first ones ended
            again = _many.end_trees(late, grace=0, signal_group=False, signal=sig, already=done) if late else []
            rep = _merge_reports(
                TeardownReport(root=self._root, mode=self.mode), first, again, [p.pid for p in roots + late]
            )
        return dataclasses.replace(
            rep,
            root=self._root,
            mode=self.mode,
            elapsed=time.monotonic() - t0,
            extra={**rep.extra, "keeper": self.keeper_pid, "keeper_lost": True},
        )

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
        with self._lock:
            _keeper_watch().forget(self.keeper_pid)  # before it is reaped: the watch trusts its own events
            if self._popen.returncode is None:
                try:
                    _wait_keeper(self._popen, max(2.0, self.grace + 1.0))
                except subprocess.TimeoutExpired:
                    # Still busy: its tree is gone (we just ended it), so end it too.
                    self._popen.kill()
                    self._popen.wait()
            self._pump(time.monotonic() + 0.5)
            self._drain()
            if self._status is None and self._lost is None:
                # It ended without the command's status (killed, or ended by us once its tree was
                # gone): the status is unknowable, never the keeper's own passed off as it.
                self._lost = KeeperLost(self.keeper_pid, self._popen.returncode, None)
                self._recovered.set()
            if release_fds:
                self._close_status_fd()
                self._close_pty()
            if self.cgroup is not None:
                if _cgroup.populated(self.cgroup):
                    _owner.end_cgroup(self.cgroup, 0)
                if not _cgroup.remove(self.cgroup):
                    # A read-only or busy cgroupfs: the tree is ended, an empty directory stays behind.
                    log.warning(
                        "the cgroup %s of tree %s could not be removed; `proctree reap` removes such leftovers",
                        self.cgroup,
                        self.keeper_pid,
                    )
            if self._receipt is not None and (clean if clean is not None else not self._may_have_leftovers()):
                self._remove_receipt()

    def _abandon(self, patience=0.0, sweep=True):
        """spawn() failed or was interrupted: make sure the keeper and anything it started are gone.

        patience: how long the keeper may take to exit by itself (after it
        reported an error); 0 to end it at once. An interrupt while waiting
        still ends it. sweep: outside a cgroup, also SIGKILL what carries the
        tree's marker (False where the command is known never to have run).
        """
        _keeper_watch().forget(self.keeper_pid)
        try:
            if self._popen.returncode is None:
                try:
                    _wait_keeper(self._popen, patience)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            try:
                if self._popen.returncode is None:
                    _end_keeper(self._popen, self.cgroup, self.mode)
                if sweep and self.cgroup is None and self._keeper_start is not None:
                    # A daemon that left the keeper's session, or was reparented away while the keeper
                    # was ended, is found by its marker only (in a cgroup, end_cgroup had it).
                    _kill_marked(self.tree_id, (self._keeper_start, self.keeper_pid))
            finally:
                self._remove_receipt()
                self._release_fds()

    def _close_status_fd(self):
        """Close the status pipe; while a wait_async() watches it, only once that ends (its number stays ours)."""
        with self._lock:
            fd, self._status_fd = self._status_fd, None
            if fd is not None:
                if self._readers:
                    self._closing.append(fd)
                else:
                    _close_fds((fd,))

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
        fd = getattr(self, "_status_fd", None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
            self._status_fd = None
        if getattr(self, "pty", None) is not None:
            self._close_pty()

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.terminate()
        finally:
            _close_stdio(self)


def _keeper_exited(pid: int) -> bool:
    """True if our child pid has exited (a zombie now), without reaping it: Popen reaps it later.

    Read from the table (os.waitid exists on macOS only from Python 3.13).
    """
    try:
        return _binding.proc(pid).is_zombie
    except NoSuchProcess:
        return True
    except (AccessDenied, OSError):
        return False


def _merge_reports(
    main: TeardownReport, daemons: list[TeardownReport], late: list[TeardownReport], roots: list[int]
) -> TeardownReport:
    """One TeardownReport of the keeper's tree (main) and the marked daemons' trees, deduplicated by identity.

    late: the reports of daemons found only after the kill phase (all their
    members count as late); roots: the daemons' pids, kept in extra["marked"].
    """
    others = daemons + late

    def union(name: str, more: tuple[Proc, ...] = ()) -> tuple[Proc, ...]:
        seen: dict[tuple[int, int], Proc] = {}
        for r in (main, *others):
            for p in getattr(r, name):
                seen.setdefault(p.identity, p)
        for p in more:
            seen.setdefault(p.identity, p)
        return tuple(seen.values())

    return dataclasses.replace(
        main,
        found=union("found"),
        exited=union("exited"),
        killed=union("killed"),
        survivors=union("survivors"),
        late=union("late", tuple(p for r in late for p in r.found)),
        denied=union("denied"),
        truncated=main.truncated or any(r.truncated for r in others),
        signals={k: v for r in (*reversed(others), main) for k, v in r.signals.items()},
        extra={**main.extra, **({"marked": sorted(set(roots))} if roots else {})},
    )


def _wait_keeper(popen: subprocess.Popen, timeout: float | None) -> int:
    """popen.wait(timeout), woken by the keeper's exit rather than by Popen's polling sleeps.

    Popen.wait with a timeout sleeps in doubling steps of up to 50 ms, which
    a teardown would pay after its tree is already gone. A pidfd on our own
    child turns readable when it exits; then wait() returns at once.
    """
    if not hasattr(os, "pidfd_open"):
        return popen.wait(timeout)  # macOS: Popen's own wait
    if timeout is None or popen.returncode is not None or not _signals.pidfds_available():
        return popen.wait(timeout)
    try:
        fd = os.pidfd_open(popen.pid)
    except OSError:
        return popen.wait(timeout)
    try:
        if not _fds.readable([fd], max(0.0, timeout)):
            raise subprocess.TimeoutExpired(popen.args, timeout)
    finally:
        os.close(fd)
    return popen.wait()


_receipts_warned = False


def _receipt_directory() -> str | None:
    """The receipt directory, warning once per process when there is none."""
    path = _receipt.directory()
    if path is None:
        _warn_no_receipts(f"no receipt directory ({_receipt.why_no_directory()})")
    return path


def _warn_no_receipts(why: str) -> None:
    global _receipts_warned
    if _receipts_warned:
        return
    _receipts_warned = True
    # Point at the caller's line, outside proctree, whichever path led here.
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    level, frame = 1, cast("Any", sys._getframe(0))  # stacklevel 1 is this function's own frame
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        level, frame = level + 1, frame.f_back
    warnings.warn(
        f"proctree: {why}; trees spawned by this process keep no receipt (docs/reaper.md, 'Receipts')",
        ReceiptWarning,
        stacklevel=level,
    )


def _marker_place() -> tuple[int, int, int] | None:
    """(pid ns, time ns, euid) of the owner for its marker; None (a legacy marker) where the namespaces are unreadable."""
    ns = _namespaces.of("self")
    return None if ns is None else (ns[0], ns[1], os.geteuid())


def _namespace_fields() -> dict[str, int | None]:
    """The owner's pid and time namespaces for its receipts (None where unreadable)."""
    ns = _namespaces.of("self")
    return {"pidns": None if ns is None else ns[0], "timens": None if ns is None else ns[1]}


def _keeper_watch() -> _keeperwatch.KeeperWatch:
    return _keeperwatch.instance(_keeper_exited)


def _rc_to_status(rc):
    """A Popen returncode back to a raw wait status."""
    if rc is None:
        return None
    if rc < 0:
        return -rc & 0x7F
    return (rc & 0xFF) << 8


async def spawn_async(args: Any, **kwargs: Any) -> Tree:
    """spawn() without blocking the event loop (the keeper's start runs in a worker thread).

    Spawning from a worker thread is safe: the keeper watches the owner
    process, not the thread that forked it. Cancelled at any point, it leaves
    nothing running (the keeper and the command, if started, are killed and
    reaped) and CancelledError propagates.
    """
    return await _in_worker(functools.partial(_spawn_stoppable, args, kwargs), discard=Tree._discard)


def _spawn_stoppable(args, kwargs, stop):
    kw = dict(kwargs)
    tree = _spawn(
        args,
        kw.pop("contain", "auto"),
        kw.pop("grace", 2.0),
        kw.pop("keep_orphans", False),
        kw.pop("tag", None),
        kw,  # stop_signal, pty and the Popen keywords
        stop,
    )
    if stop.is_set():
        tree._discard()
        raise _Stopped
    return tree


async def _in_worker(fn, discard=None):
    """fn(stop) in a worker thread, awaited; the asyncio face of spawn and terminate.

    If the awaiting task is cancelled (or anything else interrupts it) before
    fn is done, fn is told to stop at once and is waited for, its result (if
    it got that far) handed to discard (in a worker too), and then the
    interruption propagates: a cancelled call leaves nothing running.
    """
    if _trioface.running_library() == "trio":
        return await _trioface.in_worker(fn, _Stop(), discard)
    loop = asyncio.get_running_loop()
    stop = _Stop()
    work = loop.run_in_executor(None, contextvars.copy_context().run, fn, stop)  # as asyncio.to_thread
    try:
        return await asyncio.shield(work)
    except BaseException:
        if work.done() and (work.cancelled() or work.exception() is not None):
            raise  # fn itself failed: nothing of it is left running
        stop.set()
        await _settle(work)
        if discard is not None and not work.cancelled() and work.exception() is None:
            await _settle(loop.run_in_executor(None, discard, work.result()))
        raise
    finally:
        if work.done():
            stop.close()
        else:  # the loop is going away under us: let the worker close it when done
            work.add_done_callback(lambda _: stop.close())


async def _settle(fut):
    """Wait until fut is done, through further cancellations: what it runs has been told to stop, so it ends soon."""
    while not fut.done():
        try:
            await asyncio.wait([fut])
        except asyncio.CancelledError:
            continue
    if not fut.cancelled():
        fut.exception()  # retrieved: a _Stopped is expected, not "never retrieved"
