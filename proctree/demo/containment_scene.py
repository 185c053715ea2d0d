"""Demo scene: a command that daemonizes escapes a plain terminate_tree, and cannot escape spawn()."""
import os
import select
import signal
import subprocess
import sys
import time

import proctree

TITLE = "3. Containment: a daemon escapes a plain teardown, and cannot escape spawn()"

# Double-forks a daemon into its own session (so it reparents to init at
# once), reports both pids on fd W, then the command itself sleeps.
_DAEMONIZER = r"""
import os, sys, time
w = int(sys.argv[1])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, b"daemon %d\n" % os.getpid())
        time.sleep(120)
        os._exit(0)
    os._exit(0)
os.wait()
os.write(w, b"cmd %d\n" % os.getpid())
time.sleep(120)
"""


def _read_pids(fd, n, timeout=10.0):
    buf = b""
    deadline = time.monotonic() + timeout
    while buf.count(b"\n") < n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 100)
        if not chunk:
            break
        buf += chunk
    words = buf.split()
    return dict((k.decode(), int(v)) for k, v in zip(words[0::2], words[1::2]))


def _identity(pid):
    try:
        p = proctree.proc(pid)
    except proctree.NoSuchProcess:
        return None
    return None if p.is_zombie else p


def _end(recorded):
    """SIGKILL each recorded process that is still the same one (pid + start time)."""
    for p in recorded:
        now = _identity(p.pid)
        if now is not None and now.start_time == p.start_time:
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _names(procs):
    return ", ".join(f"{p.pid} {p.name} (sid {p.sid})" for p in procs) or "nothing"


def run(out):
    spawn = proctree.spawn

    recorded = []  # every daemon the scene starts: whatever happens, none outlives it
    popen = tree = None
    ok = True
    try:
        # 1. Plain Popen + terminate_tree(pid).
        r, w = os.pipe()
        popen = subprocess.Popen([sys.executable, "-c", _DAEMONIZER, str(w)], pass_fds=(w,))
        os.close(w)
        pids = _read_pids(r, 2)
        os.close(r)
        daemon = _identity(pids["daemon"]) if len(pids) == 2 else None
        if daemon is None:
            out.write("could not start the daemonizing command\n")
            return False
        recorded.append(daemon)
        out.write(f"subprocess.Popen: command {popen.pid}, its daemon {daemon.pid} "
                  f"(ppid {daemon.ppid}, own session {daemon.sid})\n")
        rep = proctree.terminate_tree(popen.pid, grace=1.0)
        popen.wait()
        escaped = _identity(daemon.pid)
        out.write(f"  terminate_tree({popen.pid}): found {_names(rep.found)}\n")
        if escaped is not None and escaped.start_time == daemon.start_time:
            out.write(f"  the daemon {daemon.pid} ESCAPED: it had already left the tree (cleaning it up now)\n")
        else:
            out.write("  (the daemon did not escape this time)\n")
        _end([daemon])

        # 2. The same command under spawn().
        r, w = os.pipe()
        tree = spawn([sys.executable, "-c", _DAEMONIZER, str(w)], pass_fds=(w,), grace=1.0)
        os.close(w)
        pids = _read_pids(r, 2)
        os.close(r)
        daemon = _identity(pids["daemon"]) if len(pids) == 2 else None
        if daemon is None:
            out.write("could not start the daemonizing command under spawn()\n")
            return False
        recorded.append(daemon)
        out.write(f"\nproctree.spawn (mode {tree.mode}): command {tree.pid}, its daemon {daemon.pid} "
                  f"(ppid {daemon.ppid}, own session {daemon.sid})\n")
        if tree.mode_reason:
            out.write(f"  (stronger modes unavailable: {tree.mode_reason})\n")
        out.write(f"  members(): {_names(tree.members())}\n")
        out.write(f"  every member carries PROCTREE_OWNER={tree.marker}\n")
        rep = tree.terminate()
        out.write(f"  terminate(): found {_names(rep.found)}; {len(rep.exited)} exited, "
                  f"{len(rep.killed)} killed, {len(rep.survivors)} survived, in {rep.elapsed * 1e3:.1f} ms\n")
        caught = daemon.identity in {p.identity for p in rep.found} and _identity(daemon.pid) is None
        out.write("  the daemon was caught and ended\n" if caught else "  the daemon was NOT caught\n")
        ok = caught and rep.ok
        return ok
    except Exception as exc:  # a scene reports, it does not crash the tour
        out.write(f"containment scene failed: {exc!r}\n")
        return False
    finally:
        if tree is not None:
            tree.terminate(grace=0)
        if popen is not None and popen.poll() is None:
            popen.kill()
            popen.wait()
        _end(recorded)
