"""What spawn() takes of Popen's arguments: the command line as Popen builds it, and the Popen keywords it accepts or refuses (with why)."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any
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
