"""The keeper protocol: the keeper's command line and its status lines, as code.

The owner (spawn.py) starts a keeper program with a command line built by
``KeeperArgs.to_argv()``; the keeper reads it back with
``KeeperArgs.from_argv()``. The keeper then writes status lines on the status
fd, formatted by ``ok_line``/``err_line``/``stopped_line``/``exit_line`` and
read back by ``parse_status`` into ``Ok``, ``Err``, ``Stopped`` or ``Exit``.
The owner goes through this module only, and the keeper program
(csrc/keeper/) implements the same rules, so that any keeper that
speaks it can be driven by the same owner and the same conformance tests
(tests/containment/test_keeper_protocol.py).

Command line (after the program)::

    v<PROTOCOL_VERSION> <status fd> <mode> <owner pid> <grace>
    <keep_orphans 0|1> <cgroup|-> <restore_signals 0|1> <exe> <receipts|-> <pty 0|1>
    <stop signal> -- <argv...>

Status lines (ASCII, one per line)::

    ok <pid> <start_time>      the command runs
    err <errno> <stage>        it could not start (stage: exec, cgroup, subreaper, owner, pty)
    stopped <signal>           pty mode: the command stopped (Ctrl+Z at its terminal, SIGSTOP, ...)
    exit <wait status>         it ended (a raw waitpid status)
    done <clean 0|1>           the keeper ended the tree and is about to exit
    held                       the keeper leaves the tree's teardown to the owner
    sweep                      the keeper begins ending the tree itself

The stop signal is the one the keeper sends each member, once, when it
ends the tree (SIGTERM by default; never SIGKILL, SIGSTOP or SIGCONT).

One stop signal per process per teardown. The owner sends the keeper
HOLD_SIGNAL (SIGURG) before it ends the tree itself; the keeper answers
``held`` and from then on never signals a member on its own: when the
command exits it waits for what is left to end (the owner is ending it),
and if the owner dies it waits out the grace without a stop signal (the
owner sent it) before the kill. A keeper that began its own teardown first
(the command exited by itself) wrote ``sweep`` before its first signal and
answers nothing: the owner waits for its ``done``. A hold that reaches the
keeper before it reaps the exit it caused counts (the keeper reads its
pending signals before it decides to sweep). The keeper also remembers the
members of the command's process group it forwarded a stop-type signal to
(the stop signal, SIGTERM, SIGINT, SIGHUP), and its own teardown sends them
no other.
The exe field always names the program: it has no placeholder, so a
program may be called "-".

``done`` is the keeper's last line; a keeper that exits without it was
killed, and its owner ends what is left of the tree (it may be dropped on a
full pipe, which only costs the owner that look). In cgroup mode the keeper
stays outside the cgroup and starts the command inside it (clone3
CLONE_INTO_CGROUP, or the forked child joins it before exec).

In pty mode the keeper's stdin is the slave side of a pseudo-terminal
the owner opened: the keeper makes it its controlling terminal, starts the
command in a process group of its own as the terminal's foreground group, and
reports each stop of the command with a ``stopped`` line (the keeper never
blocks on a full status pipe: a ``stopped`` line may be dropped, the ``exit``
line never is). A SIGCONT to the keeper gives the terminal back to a stopped
command's group and continues it. Any number of ``stopped`` lines may come
between ``ok`` and ``exit``; a reader that does not care skips them.

It never touches a process.
"""

from __future__ import annotations

import math

# No dataclasses or typing at run time: a process's first start loads this module, and must not pay their import.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

try:
    import _signal as _sig  # the C module: the signal wrapper imports enum (~5 ms of keeper startup)
except ImportError:  # pragma: no cover - every CPython has it
    import signal as _sig

PROTOCOL_VERSION = 7
MODES = ("cgroup", "subreaper", "session")
STAGES = ("exec", "cgroup", "subreaper", "owner", "pty")
NONE = "-"  # an absent cgroup or receipt directory
_FIXED = 12  # fields before "--"
# The keeper's exit status for a command line it refuses (another version, a malformed field), the reason on stderr.
REFUSED = 2
# What the owner sends the keeper to say "I end this tree; signal none of it yourself".
# Not forwarded, ignored by default (an older keeper, or a stray one, kills nothing).
HOLD_SIGNAL: int = _sig.SIGURG
# Signals that, forwarded to the command's group, count as its members' stop signal.
STOPPING: tuple[int, ...] = (_sig.SIGTERM, _sig.SIGINT, _sig.SIGHUP)
_NOT_STOP = (_sig.SIGKILL, _sig.SIGSTOP, _sig.SIGCONT)

# The signals the keeper forwards to the command's process group; any other
# signal the owner sends goes to the command directly.
FORWARD: tuple[int, ...] = (
    _sig.SIGHUP,
    _sig.SIGINT,
    _sig.SIGQUIT,
    _sig.SIGTERM,
    _sig.SIGUSR1,
    _sig.SIGUSR2,
    _sig.SIGWINCH,
)


class ProtocolError(ValueError):
    """A keeper command line or status line that does not follow the protocol; str() says what is wrong."""


class _Record:
    """A small frozen record with named fields (a dataclass without the import cost)."""

    __slots__: tuple[str, ...] = ()
    _defaults: dict[str, object] = {}  # fields that may be left out (added in a later protocol version)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(self.__slots__):
            raise TypeError(f"{type(self).__name__} takes {len(self.__slots__)} fields")
        values = dict(zip(self.__slots__, args))
        for k, v in kwargs.items():
            if k not in self.__slots__ or k in values:
                raise TypeError(f"{type(self).__name__}: unexpected or repeated field {k!r}")
            values[k] = v
        for k, v in self._defaults.items():
            values.setdefault(k, v)
        missing = [k for k in self.__slots__ if k not in values]
        if missing:
            raise TypeError(f"{type(self).__name__}: missing {', '.join(missing)}")
        for k in self.__slots__:
            object.__setattr__(self, k, values[k])
        self._complete()
        self._check()

    def _complete(self) -> None:
        """Fill fields whose absence means another field's value."""

    def _check(self) -> None:
        pass

    def _values(self) -> tuple:
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash((type(self).__name__,) + self._values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={getattr(self, k)!r}' for k in self.__slots__)})"


class KeeperArgs(_Record):
    """Everything the owner tells a keeper, as named fields.

    status_fd:       where the keeper writes its status lines
    mode:            "cgroup", "subreaper" or "session"
    owner_pid:       the keeper's parent, whose death ends the tree
    grace:           seconds between SIGTERM and SIGKILL when the keeper ends the tree
    keep_orphans:    when the command exits, leave what it started running
    cgroup:          the tree's cgroup directory (cgroup mode), else None
    restore_signals: reset SIGPIPE/SIGXFSZ to default for the command, as Popen does
    exe:             the program to run, looked up in PATH as Popen does (None given: argv[0]);
                     always written out, so any name, "-" included, is a program
    receipts:        the receipt directory (absolute) where the owner wrote the tree's receipt,
                     <keeper pid>-<keeper start>.json, which the keeper removes when it ends
                     the tree itself; None: no receipt
    pty:             the keeper's stdin is a pseudo-terminal's slave: make it the controlling
                     terminal, the command its foreground group, and report the command's stops
    stop_signal:     the signal each member gets once when the keeper ends the tree
    argv:            the command's argv
    """

    __slots__ = (
        "status_fd",
        "mode",
        "owner_pid",
        "grace",
        "keep_orphans",
        "cgroup",
        "restore_signals",
        "exe",
        "receipts",
        "pty",
        "stop_signal",
        "argv",
    )
    _defaults = {"pty": False, "stop_signal": int(_sig.SIGTERM)}
    status_fd: int
    mode: str
    owner_pid: int
    grace: float
    keep_orphans: bool
    cgroup: str | None
    restore_signals: bool
    exe: str
    receipts: str | None
    pty: bool
    stop_signal: int
    argv: tuple[str, ...]

    def _complete(self) -> None:
        if self.exe is None and isinstance(self.argv, tuple) and self.argv:
            object.__setattr__(self, "exe", self.argv[0])

    def _check(self) -> None:
        _check(_is_fd(self.status_fd), f"status_fd must be an fd number, not {self.status_fd!r}")
        _check(self.mode in MODES, f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        _check(_is_int(self.owner_pid) and self.owner_pid > 0, f"owner_pid must be a pid, not {self.owner_pid!r}")
        _check(_is_number(self.grace) and self.grace >= 0, f"grace must be seconds >= 0, not {self.grace!r}")
        _check(isinstance(self.keep_orphans, bool), "keep_orphans must be a bool")
        _check(isinstance(self.restore_signals, bool), "restore_signals must be a bool")
        _check(isinstance(self.pty, bool), "pty must be a bool")
        _check(
            _is_int(self.stop_signal) and 0 < self.stop_signal < 65 and self.stop_signal not in _NOT_STOP,
            f"stop_signal must be a signal number other than SIGKILL, SIGSTOP and SIGCONT, not {self.stop_signal!r}",
        )
        _check(self.cgroup is None or _is_word(self.cgroup), f"cgroup must be a path or None, not {self.cgroup!r}")
        _check(
            (self.cgroup is not None) == (self.mode == "cgroup"),
            "cgroup is given in cgroup mode only, and cgroup mode needs a cgroup",
        )
        _check(
            isinstance(self.exe, str) and "\0" not in self.exe,
            f"exe must be a program name or path without NUL, not {self.exe!r}",
        )
        _check(
            self.receipts is None or (_is_word(self.receipts) and self.receipts.startswith("/")),
            f"receipts must be an absolute directory or None, not {self.receipts!r}",
        )
        _check(
            isinstance(self.argv, tuple)
            and len(self.argv) > 0
            and all(isinstance(a, str) and "\0" not in a for a in self.argv),
            "argv must be a non-empty tuple of str without NUL",
        )

    def to_argv(self) -> list[str]:
        """The keeper's command line (without the program itself)."""
        return [
            f"v{PROTOCOL_VERSION}",
            str(self.status_fd),
            self.mode,
            str(self.owner_pid),
            repr(float(self.grace)),
            _flag(self.keep_orphans),
            _opt(self.cgroup),
            _flag(self.restore_signals),
            self.exe,
            _opt(self.receipts),
            _flag(self.pty),
            str(int(self.stop_signal)),  # str() of a Signals member is its name before 3.11
            "--",
            *self.argv,
        ]

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> KeeperArgs:
        """Read back what to_argv() wrote; ProtocolError for another version or a malformed line."""
        argv = list(argv)
        _check(all(isinstance(a, str) for a in argv), "keeper arguments must be str")
        _check(len(argv) >= 1 and argv[0].startswith("v"), "keeper arguments must start with a protocol version")
        _check(
            argv[0] == f"v{PROTOCOL_VERSION}",
            f"keeper protocol version {argv[0][1:]!r} is not the supported {PROTOCOL_VERSION}",
        )
        _check(
            len(argv) > _FIXED + 1 and argv[_FIXED] == "--",
            f"keeper arguments need {_FIXED - 1} fields, '--' and a command; got {argv[1:]!r}",
        )
        status_fd, mode, owner, grace, keep, cgroup, restore, exe, receipts, pty, stop = argv[1:_FIXED]
        try:
            return cls(
                status_fd=_int(status_fd, "status_fd"),
                mode=mode,
                owner_pid=_int(owner, "owner_pid"),
                grace=_seconds(grace),
                keep_orphans=_bool(keep, "keep_orphans"),
                cgroup=None if cgroup == NONE else cgroup,
                restore_signals=_bool(restore, "restore_signals"),
                exe=exe,
                receipts=None if receipts == NONE else receipts,
                pty=_bool(pty, "pty"),
                stop_signal=_int(stop, "stop_signal"),
                argv=tuple(argv[_FIXED + 1 :]),
            )
        except ProtocolError:
            raise
        except (TypeError, ValueError) as exc:  # pragma: no cover - every field is checked above
            raise ProtocolError(str(exc)) from None


def receipt_name(keeper_pid: int, keeper_start: int) -> str:
    """The file name of a tree's receipt in the receipts directory: the keeper removes it when it ends the tree."""
    return f"{keeper_pid}-{keeper_start}.json"


class Ok(_Record):
    """The command runs: its pid and start time (the C core's units; 0 if it could not be read)."""

    __slots__ = ("pid", "start_time")
    pid: int
    start_time: int


class Err(_Record):
    """The command could not start: errno (0 if unknown) and the stage that failed."""

    __slots__ = ("errno", "stage")
    errno: int
    stage: str


class Stopped(_Record):
    """pty mode: the command stopped, by this signal (it may be continued later)."""

    __slots__ = ("signal",)
    signal: int


class Exit(_Record):
    """The command ended with this raw wait status."""

    __slots__ = ("wait_status",)
    wait_status: int


class Done(_Record):
    """The keeper's last line: the command has ended and the keeper ended its tree (clean: nothing was left).

    A keeper that exits without it was killed: the owner then ends what is left.
    """

    __slots__ = ("clean",)
    clean: bool


class Held(_Record):
    """The keeper leaves the tree's teardown to the owner: it will signal no member on its own."""

    __slots__ = ()


class Sweep(_Record):
    """The keeper begins ending the tree itself (the command exited): the owner waits for its done."""

    __slots__ = ()


if TYPE_CHECKING:
    Status = Ok | Err | Stopped | Exit | Done | Held | Sweep


def ok_line(pid: int, start_time: int) -> str:
    return _format(Ok(pid, start_time))


def err_line(errno: int, stage: str) -> str:
    return _format(Err(errno, stage))


def stopped_line(signal: int) -> str:
    return _format(Stopped(signal))


def exit_line(wait_status: int) -> str:
    return _format(Exit(wait_status))


def done_line(clean: bool) -> str:
    return _format(Done(clean))


def held_line() -> str:
    return _format(Held())


def sweep_line() -> str:
    return _format(Sweep())


def _format(record: Status) -> str:
    line = {
        Ok: lambda r: f"ok {r.pid} {r.start_time}",
        Err: lambda r: f"err {r.errno} {r.stage}",
        Stopped: lambda r: f"stopped {r.signal}",
        Exit: lambda r: f"exit {r.wait_status}",
        Done: lambda r: f"done {_flag(r.clean)}",
        Held: lambda r: "held",
        Sweep: lambda r: "sweep",
    }[type(record)](record)
    if parse_status(line) != record:
        raise ProtocolError(f"not a valid status record: {record!r}")
    return line


def parse_status(line: str | bytes) -> Status:
    """One status line (without its newline) as Ok, Err, Stopped, Exit, Done, Held or Sweep; ProtocolError if malformed."""
    if isinstance(line, bytes):
        try:
            line = line.decode("ascii")
        except UnicodeDecodeError:
            raise ProtocolError(f"status line is not ASCII: {line!r}") from None
    if not isinstance(line, str):
        raise ProtocolError(f"status line must be str or bytes, not {type(line).__name__}")
    parts = line.split(" ")
    kind, fields = parts[0], parts[1:]
    if kind == "ok" and len(fields) == 2:
        pid, start = _int(fields[0], "pid"), _int(fields[1], "start_time")
        _check(pid > 0, f"ok: pid must be positive in {line!r}")
        return Ok(pid, start)
    if kind == "err" and len(fields) == 2:
        _check(fields[1] in STAGES, f"err: unknown stage {fields[1]!r}")
        return Err(_int(fields[0], "errno"), fields[1])
    if kind == "stopped" and len(fields) == 1:
        sig = _int(fields[0], "signal")
        _check(0 < sig < 128, f"stopped: signal out of range in {line!r}")
        return Stopped(sig)
    if kind == "done" and len(fields) == 1:
        return Done(_bool(fields[0], "clean"))
    if kind == "held" and not fields:
        return Held()
    if kind == "sweep" and not fields:
        return Sweep()
    if kind == "exit" and len(fields) == 1:
        status = _int(fields[0], "wait status")
        _check(status <= 0xFFFF, f"exit: wait status out of range in {line!r}")
        return Exit(status)
    raise ProtocolError(f"malformed keeper status line: {line!r}")


def _check(cond: object, message: str) -> None:
    if not cond:
        raise ProtocolError(message)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_fd(v: object) -> bool:
    return _is_int(v) and v >= 0  # type: ignore[operator]


def _is_number(v: object) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)  # type: ignore[arg-type]


def _is_word(v: object) -> bool:
    # A path field: non-empty, never the absent marker, no NUL.
    return isinstance(v, str) and v not in ("", NONE) and "\0" not in v


def _int(text: str, what: str) -> int:
    """A non-negative decimal (ASCII digits only: int() would take '+1', ' 1', '1_0' and other scripts' digits)."""
    _check(text.isascii() and text.isdigit() and len(text) <= 20, f"{what} must be a decimal number, not {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ProtocolError(f"grace must be a number of seconds, not {text!r}") from None
    _check(text.isascii() and math.isfinite(value) and value >= 0, f"grace must be seconds >= 0, not {text!r}")
    return value


def _bool(text: str, what: str) -> bool:
    _check(text in ("0", "1"), f"{what} must be 0 or 1, not {text!r}")
    return text == "1"


def _flag(v: bool) -> str:
    return "1" if v else "0"


def _opt(v: object) -> str:
    return NONE if v is None else str(v)
