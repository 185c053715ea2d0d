"""proctree.Popen's detached starts: detach=True per call, and PROCTREE_DETACH for a global swap.

A detached command is started by subprocess.Popen's own code, unchanged
(posix_spawn where Popen would use it; no exec step, no holding tree, no
cgroup, no marker): it and what it starts outlive the owner exactly as with
the stdlib. detach=True asks for that per call. A library under a global swap
cannot pass a keyword, so the environment variable PROCTREE_DETACH (read at
each start, so os.environ set at run time counts too) names a rule:

- ``session``: a start with start_new_session=True is detached (the
  stdlib's way of saying "a daemon": its own session, no terminal's signals).
  process_group= is not: a group of its own is how a program keeps a child
  out of its terminal's Ctrl+C, not a sign that it must outlive it. And a
  contained command's own daemons, which it put in a session of their own
  (a launcher that starts the daemon with setsid and exits, as plumbum's
  NOHUP does), are let go when it exits (the variable as it is then): they
  leave its cgroup for the owner's own cgroup, where the stdlib's would be
  (release_daemons).

This module never signals anything; it only moves processes of a command
cgroup of ours into the cgroup the owner itself runs in.
"""

from __future__ import annotations

import contextlib
import os

from . import cgroup as _cgroup

ENV = "PROCTREE_DETACH"
SESSION = "session"
_VALID = ("", SESSION)  # "" (or unset): only detach=True detaches


def rule() -> str:
    """The PROCTREE_DETACH rule now: "" or "session". ValueError naming the variable for any other value."""
    value = os.environ.get(ENV, "")
    if value not in _VALID:
        raise ValueError(
            f"{ENV}={value!r} is not a valid value: use {ENV}=session (a start with start_new_session=True is "
            f"detached) or leave it unset or empty (only detach=True detaches)"
        )
    return value


def is_detached(detach: bool, start_new_session: bool, current_rule: str) -> bool:
    """Whether a start runs detached: asked per call, or start_new_session=True under PROCTREE_DETACH=session."""
    return detach or (current_rule == SESSION and start_new_session)


def release_daemons(path: str, rounds: int = 10) -> bool:
    """Move what the exited command left in a session of its own out of its cgroup, into the owner's cgroup.

    Returns True when nothing of that kind is left in the cgroup (or
    PROCTREE_DETACH is not session as it exits: read then, so that nothing
    per command is remembered); False when one
    could not be moved (no write access to the owner's cgroup): the caller then
    keeps the cgroup as keep_orphans does rather than end a daemon.
    Members still in the owner's session are left for the caller to end.
    Repeated (up to rounds) because a daemon may fork while it is moved.
    """
    try:
        if rule() != SESSION:
            return True
    except ValueError:
        return True  # a bad value is refused at the next start; it asks for nothing here
    try:
        mount, own = _cgroup.find_mount(), _cgroup.own_cgroup()
        if mount is None or own is None:
            return False
        procs = os.path.join(os.path.normpath(mount + own), "cgroup.procs")
        session = os.getsid(0)
        for _ in range(rounds):
            daemons = []
            for pid in _cgroup.pids(path):
                with contextlib.suppress(ProcessLookupError):
                    if os.getsid(pid) != session:
                        daemons.append(pid)
            if not daemons:
                return True
            for pid in daemons:
                with contextlib.suppress(ProcessLookupError), open(procs, "w") as f:
                    f.write(str(pid))
    except OSError:
        return False
    return False
