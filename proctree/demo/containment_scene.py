"""Demo scene: a command that daemonizes escapes a plain terminate_tree, and cannot escape spawn()."""

from __future__ import annotations

import proctree

from ._reports import scene

TITLE = "3. Containment: a daemon escapes a plain teardown, and cannot escape spawn()"

# Double-forks a daemon into its own session (so it reparents to init at
# once), reports both pids (demo/_reports.py), then the command itself sleeps.
_DAEMONIZER = r"""
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        report("daemon")
        time.sleep(120)
        os._exit(0)
    os._exit(0)
os.wait()
report("cmd")
time.sleep(120)
"""


def _start_daemonizer(started, out, **launch):
    """Start the daemonizing command; (its handle, the daemon's Proc) or (handle, None)."""
    handle, reports = started.start(_DAEMONIZER, 2, **launch)
    daemon = started.record(dict(reports)["daemon"]) if len(reports) == 2 else None
    if daemon is None:
        out.write("could not start the daemonizing command\n")
    return handle, daemon


def _names(procs):
    return ", ".join(f"{p.pid} {p.name} (sid {p.sid})" for p in procs) or "nothing"


def run(out):
    with scene("containment", out) as started:
        # 1. Plain Popen + terminate_tree(pid).
        popen, daemon = _start_daemonizer(started, out)
        if daemon is None:
            return False
        out.write(
            f"subprocess.Popen: command {popen.pid}, its daemon {daemon.pid} "
            f"(ppid {daemon.ppid}, own session {daemon.sid})\n"
        )
        rep = proctree.terminate_tree(popen.pid, grace=1.0)
        popen.wait()
        out.write(f"  terminate_tree({popen.pid}): found {_names(rep.found)}\n")
        if started.still_running(daemon.pid):
            out.write(f"  the daemon {daemon.pid} ESCAPED: it had already left the tree (cleaning it up now)\n")
        else:
            out.write("  (the daemon did not escape this time)\n")
        started.end()

        # 2. The same command under spawn().
        tree, daemon = _start_daemonizer(started, out, launch=proctree.spawn, grace=1.0)
        if daemon is None:
            return False
        out.write(
            f"\nproctree.spawn (mode {tree.mode}): command {tree.pid}, its daemon {daemon.pid} "
            f"(ppid {daemon.ppid}, own session {daemon.sid})\n"
        )
        if tree.mode_reason:
            out.write(f"  (stronger modes unavailable: {tree.mode_reason})\n")
        out.write(f"  members(): {_names(tree.members())}\n")
        out.write(f"  every member carries PROCTREE_OWNER={tree.marker}\n")
        rep = tree.terminate()
        out.write(
            f"  terminate(): found {_names(rep.found)}; {len(rep.exited)} exited, "
            f"{len(rep.killed)} killed, {len(rep.survivors)} survived, in {rep.elapsed * 1e3:.1f} ms\n"
        )
        caught = daemon.identity in {p.identity for p in rep.found} and not started.still_running(daemon.pid)
        out.write("  the daemon was caught and ended\n" if caught else "  the daemon was NOT caught\n")
        return caught and rep.ok
    return False  # the scene failed, and said why
