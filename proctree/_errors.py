"""The exceptions proctree raises. Constructed like psutil's: Error(pid, ...)."""

from __future__ import annotations


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
