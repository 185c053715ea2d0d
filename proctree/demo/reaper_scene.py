"""Demo scene: a tree whose owner died with its keeper is found and ended by the reaper; a live owner's is not."""

from __future__ import annotations

import os
import signal
import time

import proctree

from ._reports import SCRIPT_HELPERS, scene

TITLE = "4. Orphan reaper: an owner SIGKILLed with its keeper leaves a tree; find_orphans and reap_orphans end it"

# The tree's command: a child, and a daemon in its own session (double fork,
# so it reparents at once); all three report themselves (demo/_reports.py).
_TREE = r"""
if os.fork() == 0:
    report("child")
    wait_forever()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        report("daemon")
        wait_forever()
    os._exit(0)
os.wait()
report("cmd")
wait_forever()
"""

# The owner: a Python process that spawns the tree with proctree.spawn and
# reports itself and the tree's keeper; the tree reports on the same pipe.
_OWNER = r"""
sys.path.insert(0, %r)
import proctree
tree = proctree.spawn([sys.executable, "-c", %r, str(REPORTS)], pass_fds=(REPORTS,), grace=0.5)
report("owner")
report("keeper", tree.keeper_pid)
wait_forever()
"""

_ROLES = ("owner", "keeper", "cmd", "child", "daemon")
_TREE_ROLES = ("cmd", "child", "daemon")


def _desc(p):
    return f"{p.pid} {p.name} (ppid {p.ppid}, sid {p.sid})"


def _wait_gone(started, pids, timeout=5.0):
    deadline = time.monotonic() + timeout
    while any(started.still_running(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _orphaned_tree(started, out):
    """Start an owner that spawns the tree, then SIGKILL its keeper and the owner at once; {role: pid} or None."""
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
    popen, reports = started.start(_OWNER % (package_dir, SCRIPT_HELPERS + _TREE), len(_ROLES))
    pids = dict(reports)
    if set(pids) != set(_ROLES):
        out.write(f"the owner's tree did not start (heard from: {', '.join(pids) or 'nobody'})\n")
        return None
    out.write(f"owner {pids['owner']} spawned a tree: keeper {pids['keeper']}, ")
    out.write(", ".join(f"{role} {pids[role]}" for role in _TREE_ROLES) + "\n")
    # As if the host died all at once: a running owner would end the tree when its
    # keeper dies, and a live keeper would when its owner does. So the owner is
    # stopped first (our own child, unreaped), then the keeper and the owner killed.
    popen.send_signal(signal.SIGSTOP)
    if started.still_running(pids["keeper"]):
        os.kill(pids["keeper"], signal.SIGKILL)
    if not _wait_gone(started, [pids["keeper"]]):
        out.write(f"the keeper {pids['keeper']} did not die\n")
        return None
    popen.kill()
    popen.wait()
    out.write(f"stopped the owner {pids['owner']}, SIGKILLed its keeper {pids['keeper']}, then the owner\n")
    return pids


def run(out):
    with scene("reaper", out) as started:
        pids = _orphaned_tree(started, out)
        if pids is None:
            return False
        members = {pids[r] for r in _TREE_ROLES}
        survivors = [p for p in (started.record(pid) for pid in sorted(members)) if p is not None]
        out.write(f"  still running, owner and keeper gone: {', '.join(map(_desc, survivors)) or 'nothing'}\n")
        if len(survivors) != len(members):
            out.write("  (the tree did not outlive its owner: nothing to show)\n")
            return False

        # A second tree, spawned by this (live) process: its owner is alive.
        live, reports = started.start(_TREE, len(_TREE_ROLES), launch=proctree.spawn, grace=1.0)
        live_pids = {pid for _, pid in reports}
        if len(live_pids) != len(_TREE_ROLES):
            out.write("the second tree did not start\n")
            return False
        out.write(
            f"\na second tree, spawned by this process (alive, mode {live.mode}): "
            f"{', '.join(f'{role} {pid}' for role, pid in reports)}\n"
        )

        # Scoped to the scene's own processes: nothing else on the machine can be a candidate.
        scope = set(started.identities)
        found = proctree.find_orphans(within=scope)
        out.write(f"\nproctree.find_orphans(within=<the scene's {len(scope)} pids>): {len(found)} orphan(s)\n")
        for o in found:
            out.write(f"  {o.proc.pid} {o.proc.name}: {o.reason}, via {o.via}\n      evidence: {o.evidence}\n")
        found_ok = {o.proc.pid for o in found} == members

        rep = proctree.reap_orphans(within=scope, grace=1.0)
        out.write(
            f"proctree.reap_orphans(within=..., grace=1.0): {len(rep.candidates)} candidate(s); "
            f"exited {[p.pid for p in rep.exited]}, killed {[p.pid for p in rep.killed]}, "
            f"{len(rep.survivors)} survived, in {rep.elapsed * 1e3:.0f} ms\n"
        )
        for path in rep.cgroups_removed:
            out.write(f"  removed its leftover cgroup {path}\n")
        gone = _wait_gone(started, members)
        out.write("  the orphaned tree is gone\n" if gone else "  the orphaned tree is NOT gone (cleaning it up now)\n")
        untouched = all(started.still_running(pid) for pid in live_pids)
        out.write(
            f"  the second tree was {'untouched: its owner is alive' if untouched else 'HIT'}"
            f" ({', '.join(str(p) for p in sorted(live_pids))})\n"
        )
        rep2 = live.terminate()
        out.write(
            f"\nthe scene ends the second tree itself: terminate(): {len(rep2.exited)} exited, "
            f"{len(rep2.killed)} killed, {len(rep2.survivors)} survived\n"
        )
        return found_ok and rep.ok and gone and untouched and rep2.ok
    return False  # the scene failed, and said why
