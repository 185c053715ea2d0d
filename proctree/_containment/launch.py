"""What spawn() decides before anything starts: the containment mode, the tree's identity and marker, and where its receipt goes (arguments.py reads the command line and Popen's keywords)."""

from __future__ import annotations

import errno
import itertools
import os
import signal
import sys
import warnings

from .._errors import ContainmentUnavailable, ReceiptWarning
from .._record import record  # a frozen dataclass without dataclasses' import time
from .._table import binding as _binding
from .._table import namespaces as _namespaces
from . import cgroup as _cgroup
from . import protocol as _protocol
from .evidence import marker as _marker
from .evidence import receipt as _receipt

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

MODES = ("auto", "cgroup", "subreaper", "session")


# The keeper program, built from csrc/keeper/ beside the extension module
# (build_keeper.py). Found relative to the package, never on PATH.
_KEEPER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "proctree-keeper")


_LINUX = sys.platform.startswith("linux")


_counter = itertools.count(1)


# The PROCTREE_TREE value of the next tree (tests replace it to fix one).
_new_tree_id = _marker.new_tree_id


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


@record
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

    def keeper_args(self, status_fd: int) -> _protocol.KeeperArgs:
        return _protocol.KeeperArgs(
            status_fd=status_fd,
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
            # os.urandom(3).hex() is secrets.token_hex(3), without the hmac and hashlib imports of secrets.
            name = f"{tag or 'tree'}-{next(_counter)}-{os.urandom(3).hex()}"
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
    level = 1  # stacklevel 1 is this function's own frame
    frame: Any = sys._getframe(0)
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
