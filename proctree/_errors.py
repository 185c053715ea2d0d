"""Every exception and warning proctree raises or issues, in one place.

The table's errors are constructed like psutil's: Error(pid, ...). Importing
this module stays cheap (it is part of ``import proctree``): KeeperLost, whose
base is subprocess.SubprocessError, is built on first use, so that catching it
costs the subprocess module and nothing of the containment layer.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    import subprocess
    from typing import Any

    # The base layer imports nothing of proctree: KeeperLost.report is a TeardownReport (or None).
    TeardownReport = Any


class Error(Exception):
    """Base class of proctree's own errors."""

    def __init__(self, pid: int | None = None, name: str | None = None, msg: str | None = None) -> None:
        self.pid = pid
        self.name = name
        self.msg = msg
        super().__init__(pid, name, msg)

    def __reduce__(self):
        return (type(self), (self.pid, self.name, self.msg))

    def __str__(self):
        parts = []
        if self.pid is not None:
            parts.append(f"pid={self.pid}")
        if self.name is not None:
            parts.append(f"name={self.name!r}")
        head = f"({', '.join(parts)})" if parts else ""
        detail = self.msg or self._default_msg()
        return f"{detail} {head}".strip()

    def _default_msg(self):
        return "proctree error"


class NoSuchProcess(Error):
    """The process does not exist (or no longer does)."""

    def _default_msg(self):
        return "process no longer exists"


class AccessDenied(Error):
    """The system refused to tell about, or to act on, the process."""

    def _default_msg(self):
        return "access denied"


class ReceiptWarning(UserWarning):
    """spawn() could not keep a receipt for a tree (no usable receipt directory, or the write failed).

    The tree is contained as usual; only a reaper that runs after both its
    owner and its keeper were killed has less to go on. Issued once per process.
    """


class ContainmentUnavailable(OSError):
    """The containment asked for cannot work here; str() says why."""


class SupervisorError(Error):
    """The supervisor refused a request (its limit is reached, it is closed, a name is taken, ...).

    Bad arguments raise TypeError or ValueError as everywhere in proctree;
    this is for requests that are well formed but cannot be honoured now.
    """

    def __init__(self, msg: str | None = None, name: str | None = None) -> None:
        super().__init__(None, name, msg)

    def __reduce__(self):
        return (type(self), (self.msg, self.name))

    def _default_msg(self):
        return "supervisor error"


class UnknownServiceError(SupervisorError, LookupError):
    """No service has that name, or no service was ever given that id."""

    def _default_msg(self):
        return "unknown service"


class ProcfileError(ValueError):
    """A Procfile (or .env, or settings file) that cannot be used as written.

    source: the file (or "<string>"); line: 1-based line number, or None when
    the problem is not one line's.
    """

    def __init__(self, message: str, *, source: str = "Procfile", line: int | None = None) -> None:
        self.source = source
        self.line = line
        self.detail = message
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[object, ...]:
        # pickle and copy rebuild from the parts: args holds the whole message, which __init__ would prefix again.
        return (_rebuild_procfile_error, (type(self), self.detail, self.source, self.line), self.__dict__)


def _rebuild_procfile_error(cls: type[ProcfileError], message: str, source: str, line: int | None) -> ProcfileError:
    return cls(message, source=source, line=line)


class ProcessLeakWarning(UserWarning):
    """A test or fixture left processes running (--proctree-leaks=warn); they were ended."""


def _keeper_lost_class() -> type:
    import subprocess

    class KeeperLost(subprocess.SubprocessError):
        """The tree's keeper died before it reported the command's status (it was killed).

        The command's own status cannot be known then. The owner has ended what
        was left of the tree; report is that teardown's TeardownReport, keeper_pid
        the keeper's pid and keeper_returncode how it ended (Popen's convention).
        """

        # Named as if defined at the top level: pickle finds it through this module's __getattr__.
        __module__ = __name__
        __qualname__ = "KeeperLost"

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

        def __reduce__(self):
            return (type(self), (self.keeper_pid, self.keeper_returncode, self.report))

    return KeeperLost


if TYPE_CHECKING:

    class KeeperLost(subprocess.SubprocessError):
        keeper_pid: int
        keeper_returncode: int | None
        report: TeardownReport | None

        def __init__(self, keeper_pid: int, keeper_returncode: int | None, report: TeardownReport | None) -> None: ...

else:

    def __getattr__(name: str) -> type:
        if name != "KeeperLost":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        cls = globals()["KeeperLost"] = _keeper_lost_class()
        return cls
