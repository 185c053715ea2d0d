"""proctree.Popen: subprocess.Popen, exactly, with the command's whole tree contained.

Popen's own code (_posixsubprocess) forks, with every Popen argument applied
as Popen applies it; the forked child execs proctree's exec step
(``proctree-enter``, csrc/popen/), which clones the command into a cgroup of
its own with CLONE_PARENT and exits: the command is the caller's own child
(os.waitpid, pidfds, asyncio's child watchers and Popen's own wait see it),
Popen gets its pid, and every Popen attribute and method is Popen's. The
cgroup is nested in the owner's holding tree (popenhold.py), whose keeper
ends every command's tree when the owner dies, however it dies; when the
command exits, what it left in its cgroup is ended (unless keep_orphans=True).

Where cgroup containment is unavailable (no writable cgroup v2, macOS), the
command is started by Popen's own code, unchanged, with the holding tree's
markers in its environment, and its tree is found by them (popenmarked.py;
docs/dropin.md, "Without cgroups"). Where not even that works, Popen raises
ContainmentUnavailable naming why.

This module must never signal anything but the command (Popen's own
send_signal) and, through popenhold, the members of the command's own cgroup.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import subprocess
import sys
import termios
import threading
import types

from .. import _fds
from .._errors import ContainmentUnavailable
from . import cgrouppool as _pool
from . import detach as _detach
from . import initsig as _initsig
from . import popenhold as _hold
from . import popenmarked as _marked
from . import realpopen as _realpopen

TYPE_CHECKING = False  # typing costs import time, and this module loads with the name proctree.Popen
if TYPE_CHECKING:
    from typing import Any

_Base: Any = _realpopen.genuine_popen()
_EXECUTE = _Base._execute_child
# _execute_child's parameters, all positional-or-keyword: bound by name without inspect's bind(), which
# costs every start microseconds.
_EXECUTE_PARAMS = _EXECUTE.__code__.co_varnames[: _EXECUTE.__code__.co_argcount]
_SUBPROCESS_GLOBALS = _EXECUTE.__globals__  # the genuine module's namespace (live: tests patch it)

# The step each _execute_child call hands to _fork_exec_via_step (per thread: Popens start concurrently).
_local = threading.local()

PREEXEC_FN_REFUSED = (
    "proctree.Popen does not accept preexec_fn: the function would run in the forked child before it "
    "joins its containment (and is unsafe with threads); do the setup in the command, or use "
    "user=/group=/extra_groups=/umask=/process_group=/start_new_session=, which proctree.Popen honours"
)


_ID_LIMIT = 2**32 - 1  # uid_t and gid_t are 32 bits on Linux; (uid_t)-1 means "unchanged", never an id


def _check_ids(uid: Any, gid: Any, gids: Any) -> None:
    """The checks _posixsubprocess makes of these before it forks (they reach the step as text instead)."""
    for value, kind in ((uid, "uid"), (gid, "gid")):
        if value is not None and not 0 <= value < _ID_LIMIT:
            raise OverflowError(f"{kind} is greater than maximum")
    if gids is not None and any(not 0 <= g < _ID_LIMIT for g in gids):
        raise ValueError("invalid group id")


def _ids(value: Any) -> bytes:
    return b"-" if value is None else str(int(value)).encode()


def _groups(gids: Any) -> bytes:
    return b"-" if gids is None else b"g" + b",".join(str(int(g)).encode() for g in gids)


_ALL_SIGNALS = frozenset(getattr(signal, "_signal", signal).valid_signals())  # ints: Signals members cost ~0.1 ms
# The C function under signal.pthread_sigmask: it returns ints, where the wrapper makes each an enum member (~50 µs
# a start for the 62 of the all-blocked mask).
_sigmask: Any = getattr(getattr(signal, "_signal", signal), "pthread_sigmask", signal.pthread_sigmask)


def _mask_bits(mask: Any) -> bytes:
    """A signal mask as the step's <mask> field: hex, bit n-1 for signal n."""
    return b"%x" % sum(1 << (int(s) - 1) for s in mask if 0 < int(s) <= 64)


def _fork_exec_via_step(*args: Any) -> int:
    """_posixsubprocess.fork_exec, with the exec going through proctree-enter; returns the command's pid.

    Arguments 0, 1, 3 and 13 of fork_exec (argv, the executable list, the fds
    to keep, the error pipe's write end) are the same in every CPython this
    supports. The step (X, forked by _posixsubprocess) clones the command (Y)
    into its cgroup as our own child, reports Y's pid on a pipe and exits; X
    is reaped here and Y's pid is what Popen gets. The step has a copy of the
    error pipe above fd 2 that survives its own exec (Popen's copy is
    close-on-exec), and reports through it what _posixsubprocess would.

    Every signal is blocked in this thread around the fork, so the forked
    child is born with them blocked (the step keeps them so): no signal to
    our process group can kill it before the command exists. The command
    gets this thread's own mask back just before its exec, as Popen's child
    would have had it. A step that dies anyway (SIGKILL) without naming the
    command is a SubprocessError, never a pid taken for the command's.
    """
    step = _local.step
    call = list(args)
    argv, executables, keep, errpipe = call[0], call[1], call[3], call[13]
    report = fcntl.fcntl(errpipe, fcntl.F_DUPFD_CLOEXEC, 3)
    pid_r = pid_w = -1
    try:
        r, w = os.pipe()
        pid_r, pid_w = _fds.above_stdio(r), _fds.above_stdio(w)
        mask = _sigmask(signal.SIG_BLOCK, _ALL_SIGNALS)
        call[0] = [
            _hold.ENTER,
            str(report).encode(),
            str(pid_w).encode(),
            os.fsencode(step.cgroup),
            b"1" if step.setsid else b"0",
            _ids(step.pgid),
            _ids(step.uid),
            _ids(step.gid),
            _groups(step.gids),
            _mask_bits(mask),
            str(len(executables)).encode(),
            *executables,
            b"--",
            *argv,
        ]
        call[1] = (os.fsencode(_hold.ENTER),)
        call[3] = tuple(sorted({*keep, report, pid_w}))
        try:
            first: int = _real_fork_exec()(*call)
        finally:
            _sigmask(signal.SIG_SETMASK, mask)  # a held signal's handler may raise here
    except BaseException:
        if pid_r >= 0:
            os.close(pid_r)
            # An interrupt as fork_exec returned loses the step's pid: reap it by name (it exits at once).
            _hold.reap_steps(wait=1.0)
        raise
    finally:
        os.close(report)
        if pid_w >= 0:
            os.close(pid_w)
    try:
        # Up to the line's end, not to EOF: the command holds a copy of the pipe until it runs its first
        # instructions (it closes it then), which on a busy machine is a scheduling slice later.
        data = b""
        while not data.endswith(b"\n"):
            part = os.read(pid_r, 64)
            if not part:
                break
            data += part
    except BaseException:
        if data.endswith(b"\n"):
            _local.interrupted_command = int(data)  # the command exists: discard() ends and reaps it
        raise
    finally:
        os.close(pid_r)
        status = _reap_step(first)
    if data.endswith(b"\n") and data[:-1].isdigit():
        return int(data)
    if data == b"E\n" or _unread(errpipe):
        # No command, and the step (or Popen's own child before it, a failed chdir) said why on the error pipe:
        # Popen reads that and raises it (and finds the step reaped).
        return first
    raise subprocess.SubprocessError(
        f"proctree.Popen's exec step (pid {first}) ended before the command existed ({_step_end(status)}); "
        "the command did not run"
    )


def _unread(fd: int) -> int:
    """How many bytes wait in the pipe fd belongs to (either end: FIONREAD counts the pipe's)."""
    try:
        return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder, signed=True)
    except OSError:
        return 0


def _step_end(status: int | None) -> str:
    """How the step ended, for the SubprocessError of a start it did not complete."""
    if status is None:
        return "reaped elsewhere"
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def _reap_step(pid: int) -> int | None:
    """Reap the step, which exits once the command exists (or failed before), even through an interrupt; returns
    its wait status (None if another reaper took it).

    A KeyboardInterrupt (or any exception a signal handler raises) while
    waiting is held until the step is reaped, then raised: the step exits
    within moments, and nothing else would ever reap it.
    """
    held: BaseException | None = None
    status: int | None = None
    while True:
        try:
            status = os.waitpid(pid, 0)[1]
            break
        except ChildProcessError:
            break  # reaped by someone else (a waitpid(-1) child watcher): it is gone either way
        except BaseException as exc:  # noqa: BLE001 - held, then raised once the step is reaped
            held = held or exc
    if held is not None:
        raise held
    return status


def _execute_via_step() -> Any:
    """Popen's own _execute_child, run with _fork_exec_via_step as its fork_exec and never posix_spawn.

    Built per call from the subprocess module's namespace as it is then (a
    test that patches subprocess._USE_VFORK or subprocess._fork_exec is
    honoured).
    """
    names = dict(_SUBPROCESS_GLOBALS)
    names["_USE_POSIX_SPAWN"] = False  # posix_spawn cannot exec through the step
    if "_fork_exec" in names:  # 3.11 and later: the module's own name for fork_exec
        names["_fork_exec"] = _fork_exec_via_step if names["_fork_exec"] is not None else None
    else:  # 3.10: _execute_child calls _posixsubprocess.fork_exec, its only use of that module
        names["_posixsubprocess"] = types.SimpleNamespace(fork_exec=_fork_exec_via_step)
    return types.FunctionType(_EXECUTE.__code__, names, _EXECUTE.__name__, _EXECUTE.__defaults__)


def _real_fork_exec() -> Any:
    """The fork_exec the genuine subprocess module would call now (its namespace is live: tests patch it)."""
    if "_fork_exec" in _SUBPROCESS_GLOBALS:
        return _SUBPROCESS_GLOBALS["_fork_exec"]
    return _SUBPROCESS_GLOBALS["_posixsubprocess"].fork_exec


class _Bound:
    """_execute_child's arguments by name (the shape of inspect's BoundArguments that is used here)."""

    args = ()

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if len(args) > len(_EXECUTE_PARAMS):
            raise TypeError(f"_execute_child() takes {len(_EXECUTE_PARAMS)} positional arguments")
        self.arguments = dict(zip(_EXECUTE_PARAMS, args))
        self.arguments.update(kwargs)
        self.kwargs = self.arguments  # the call passes every argument by name


class _Step(types.SimpleNamespace):
    cgroup: str
    setsid: bool
    pgid: int | None
    uid: int | None
    gid: int | None
    gids: list[int] | None


class Popen(_Base):
    """subprocess.Popen whose command's whole process tree is contained.

    Every argument, attribute and method is subprocess.Popen's, and the
    command is the caller's own child. In addition its whole tree is
    contained (in a cgroup of its own where cgroup v2 allows, else found by
    its environment marker): what it leaves running is ended when it exits
    (unless keep_orphans=True), and everything it started is ended when the
    owner dies, however the owner dies. preexec_fn is refused (ValueError):
    see PREEXEC_FN_REFUSED.
    """

    _proctree_cgroup: Any = None  # the command's cgroup path, or its popenmarked.MarkedLeft
    _proctree_keep = False
    _proctree_pid = 0  # the process that made this Popen: the only one where proctree acts for it
    _proctree_detach = False
    _proctree_detach_rule = ""

    def __init__(self, *args: Any, keep_orphans: bool = False, detach: bool = False, **kwargs: Any) -> None:
        self._proctree_init(keep_orphans, detach, args, kwargs)

    def _proctree_init(self, keep_orphans: bool, detach: bool, args: Any, kwargs: dict[str, Any]) -> None:
        if not isinstance(keep_orphans, bool):
            raise TypeError(f"keep_orphans must be a bool, not {type(keep_orphans).__name__}")
        if not isinstance(detach, bool):
            raise TypeError(f"detach must be a bool, not {type(detach).__name__}")
        self._proctree_keep = keep_orphans
        self._proctree_pid = os.getpid()
        # Detached starts (detach.py): decided before anything is made, so a bad PROCTREE_DETACH raises here.
        self._proctree_detach = detach
        self._proctree_detach_rule = _detach.rule()
        super().__init__(*args, **kwargs)

    def _execute_child(self, *args: Any, **kwargs: Any) -> None:
        bound = _Bound((self, *args), kwargs)
        given = bound.arguments
        if _detach.is_detached(self._proctree_detach, bool(given.get("start_new_session")), self._proctree_detach_rule):
            # subprocess.Popen's own start, preexec_fn and all: it outlives us as the stdlib's does.
            _EXECUTE(*bound.args, **bound.kwargs)
            return
        if given.get("preexec_fn") is not None:
            raise ValueError(PREEXEC_FN_REFUSED)
        tree = _hold.holder_for_start()
        if tree is None:
            raise ContainmentUnavailable(
                errno.ENOSYS, f"proctree.Popen cannot contain a command here: {_hold.unavailable_reason()}"
            )
        if tree.mode != "cgroup":
            self._execute_marked(tree, bound)
            return
        _check_ids(given.get("uid"), given.get("gid"), given.get("gids"))
        pgid = given.get("process_group", -1)
        step = _Step(
            cgroup="",
            setsid=bool(given.get("start_new_session")),
            pgid=None if pgid is None or pgid < 0 else pgid,
            uid=given.get("uid"),
            gid=given.get("gid"),
            gids=given.get("gids"),
        )
        # The command (the step's clone) takes the session, group and credentials itself: the step
        # that clones it must still be the caller's to start a process in the cgroup.
        for name, unchanged in (("uid", None), ("gid", None), ("gids", None), ("start_new_session", False)):
            if name in given:
                given[name] = unchanged
        if "process_group" in given:
            given["process_group"] = -1
        path = ""
        try:  # from the cgroup's making on, an interrupt (Ctrl+C) at any point leaves neither it nor the command
            # Made ahead of need by a worker thread (cgrouppool.py), or else by the step in the forked child
            # (which also makes it again if it went missing): never a mkdir on the caller's thread.
            path = _pool.take(tree.cgroup, lambda: _hold.new_cgroup_path(tree)) or ""
            if not path:
                path = _hold.new_cgroup_path(tree)
            step.cgroup = path
            self._proctree_cgroup = path  # a failed exec is reaped inside _execute_child: that ends the cgroup
            _local.step = step
            _execute_via_step()(*bound.args, **bound.kwargs)
            if self.returncode is None:
                _hold.watch(self.pid, path, self._proctree_keep)
        except BaseException:
            if not getattr(self, "_child_created", False):
                self._proctree_cgroup = None
                for taken in _pool.empty_hand():  # taken from the pool, and interrupted before path held it
                    if taken != path:
                        _hold.discard(taken)
                if path:
                    _hold.discard(path, getattr(_local, "interrupted_command", None))
            elif self.returncode is None:
                # Interrupted once Popen had the command (reading its error pipe): Popen's __del__ reaps it
                # later, as it does its own; its exit still ends what it left and removes its cgroup.
                _hold.watch(self.pid, path, self._proctree_keep)
            raise
        finally:
            _pool.empty_hand()
            _local.step = None
            _local.interrupted_command = None

    def _execute_marked(self, tree: Any, bound: _Bound) -> None:
        """The marked fallback (no cgroups here): Popen's own start, the environment marked (popenmarked.py)."""
        env, own = _marked.environment(bound.arguments.get("env"), tree)
        bound.arguments["env"] = env
        _EXECUTE(*bound.args, **bound.kwargs)
        if self.returncode is None:
            left = _marked.MarkedLeft(own, _marked.started(self.pid), self._proctree_keep)
            self._proctree_cgroup = left
            _hold.watch(self.pid, left, self._proctree_keep)

    def _handle_exitstatus(self, *args: Any, **kwargs: Any) -> None:
        # Also reached from __del__ (at interpreter exit too): nothing here may raise.
        super()._handle_exitstatus(*args, **kwargs)
        path = self._proctree_cgroup
        if os.getpid() != self._proctree_pid:
            # A forked child that inherited this Popen: its wait() took ECHILD for an exit, as the
            # stdlib's does, but the command runs on in the parent, whose cgroup this is.
            return
        if path is not None and self.returncode is not None:
            self._proctree_cgroup = None
            try:
                _hold.reaped(self.pid, path, self._proctree_keep)
            except Exception:  # noqa: BLE001 - the owner's death still ends it (the holding keeper)
                pass


Popen.__module__ = "proctree"
Popen.__init__ = _initsig.with_parameters_of(  # type: ignore[method-assign]
    _Base.__init__, Popen.__init__, ("keep_orphans", "detach")
)


def popen_for_dropins() -> Any:
    """What the drop-in functions start a command with: proctree.Popen, or what a test put in its place.

    subprocess.run and asyncio's create_subprocess_* look subprocess.Popen up
    by name at each call, so a test suite that patches it with a mock or a fake
    (not a class) expects that fake to be called; proctree's drop-ins keep that
    habit. A class there (the genuine Popen, or any subclass) never makes them
    start an uncontained command: they use proctree.Popen, or the class itself
    when it is a subclass of proctree.Popen. Nothing else in proctree (spawn,
    the keepers, proctree.Popen) ever looks at the name.
    """
    current = subprocess.Popen
    if not isinstance(current, type):
        return current
    return current if issubclass(current, Popen) else Popen


def _popen_by_current_name(*args: Any, **kwargs: Any) -> Any:
    return popen_for_dropins()(*args, **kwargs)


# subprocess's helpers, each running its own code with popen_for_dropins() for Popen.
def _with_our_popen(fn: Any, names: dict[str, Any]) -> Any:
    copy = types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__doc__ = (
        f"subprocess.{fn.__name__}, with the command started by proctree.Popen (contained; keep_orphans= too)."
    )
    copy.__module__ = "proctree"
    copy.__qualname__ = fn.__name__
    return copy


_helper_names: dict[str, Any] = dict(_SUBPROCESS_GLOBALS)
_helper_names["Popen"] = _popen_by_current_name
run = _with_our_popen(_SUBPROCESS_GLOBALS["run"], _helper_names)
call = _with_our_popen(_SUBPROCESS_GLOBALS["call"], _helper_names)
check_call = _with_our_popen(_SUBPROCESS_GLOBALS["check_call"], _helper_names)
check_output = _with_our_popen(_SUBPROCESS_GLOBALS["check_output"], _helper_names)
_helper_names.update(run=run, call=call, check_call=check_call, check_output=check_output)
# proctree.subprocess's: subprocess's own, their command run by the check_output above.
getstatusoutput = _with_our_popen(_SUBPROCESS_GLOBALS["getstatusoutput"], _helper_names)
_helper_names["getstatusoutput"] = getstatusoutput
getoutput = _with_our_popen(_SUBPROCESS_GLOBALS["getoutput"], _helper_names)
for _shell_helper in (getstatusoutput, getoutput):
    _shell_helper.__module__ = "proctree.subprocess"
    _shell_helper.__doc__ = f"subprocess.{_shell_helper.__name__}, with the command contained as proctree.run's is."
del _shell_helper

# Keep subprocess's own names for what proctree re-exports, so code can catch them from either.
CompletedProcess = subprocess.CompletedProcess
PIPE, STDOUT, DEVNULL = subprocess.PIPE, subprocess.STDOUT, subprocess.DEVNULL
