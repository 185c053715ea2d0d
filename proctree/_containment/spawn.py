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
engine and byidentity.py, never the keeper's code.

This module must never signal a pid it did not verify as part of the tree:
the keeper is our own child (its pid stays ours until we reap it, so nothing
walks from it after that), and cgroup members are members of a cgroup we made.
Nor may it leave a keeper running that no Tree holds: a spawn interrupted or
cancelled at any point ends the keeper and whatever it started before the
interruption propagates. The Tree reaps its keeper itself, through the Popen
that started it; no teardown engine reaps it.
"""

from __future__ import annotations

import functools
import os
import signal

from .. import _record
from .._errors import ContainmentUnavailable, KeeperLost  # noqa: F401 (also importable from here)
from .._validate import check_seconds, check_signal
from . import cgroup as _cgroup
from .arguments import POPEN_POLICY, _argv, _take_popen_policy, _take_pty  # noqa: F401 (the keywords spawn() takes)
from .evidence import marker as _marker
from .launch import (  # noqa: F401 (the modes spawn() takes)
    _LINUX,
    MODES,
    _check_mode,
    _choose,
    _keeper_program,
    _Launch,
    _marker_place,
    _new_tree_id,
    _owner_identity,
    _receipt_directory,
)
from .start import _start
from .stopflag import _in_worker, _Stopped
from .tree import Tree

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any


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
                _remove_created(launch.cgroup)
            if contain != "auto" or launch.mode == "session":
                raise
            # The keeper refused the mode before it started the command (a
            # delegation that allows mkdir but not the move into the cgroup; a
            # kernel or sandbox that refuses PR_SET_CHILD_SUBREAPER): fall back.
            reasons.append(f"{launch.mode}: {os.strerror(exc.errno) if exc.errno else exc.strerror}")
        except BaseException:
            if launch.cgroup is not None:
                _remove_created(launch.cgroup)
            raise
        weaker = "subreaper" if launch.mode == "cgroup" and _LINUX else "session"
        launch = _record.replace(launch, mode=weaker, reason="; ".join(reasons), cgroup=None)


def _remove_created(path: str) -> None:
    """Remove the cgroup spawn() made for a start that failed; never raises over the start's own error.

    cgroup.remove checks that the path is ours by reading the mount table; with
    no descriptor left (EMFILE, often the very reason the start failed) that
    read fails, and the directory stayed for good. This path was made by this
    call, so it is ours by construction: it and its per-owner parent are then
    removed as they stand (rmdir takes only an empty cgroup).
    """
    try:
        _cgroup.remove(path)
    except (OSError, ValueError):
        for d in (path, os.path.dirname(path)):
            try:
                os.rmdir(d)
            except OSError:
                pass


async def spawn_async(args: Any, **kwargs: Any) -> Tree:
    """spawn() without blocking the event loop (the keeper's start runs in a worker thread).

    Spawning from a worker thread is safe: the keeper watches the owner
    process, not the thread that forked it. Cancelled at any point, it leaves
    nothing running (the keeper and the command, if started, are killed and
    reaped) and CancelledError propagates.
    """
    return await _in_worker(functools.partial(_spawn_stoppable, args, kwargs), discard=_discard)


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
        _discard(tree)
        raise _Stopped
    return tree


def _discard(tree: Tree) -> None:
    """End a tree its caller will never see (its spawn_async was cancelled).

    A Tree's private name: spawn is its constructor, and what undoes a tree
    nobody received is the Tree's own (its kill, its keeper, its fds).
    """
    tree._discard()
