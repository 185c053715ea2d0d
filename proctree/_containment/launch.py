"""What spawn() makes of its arguments before anything starts: the Popen keywords it takes or refuses, the command line, the containment mode, and where the tree's receipt goes."""

from __future__ import annotations

import dataclasses
import errno
import itertools
import os
import secrets
import signal
import sys
import warnings
from typing import Any, cast

from .._errors import ContainmentUnavailable, ReceiptWarning
from .._table import binding as _binding
from .._table import namespaces as _namespaces
from . import cgroup as _cgroup
from . import protocol as _protocol
from .evidence import marker as _marker
from .evidence import receipt as _receipt

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
