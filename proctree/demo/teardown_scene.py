"""Demo scene: an adversarial tree ended by signalling its root only, then by terminate_tree.

The tree holds the cases that leak when a tool signals one pid: a SIGHUP-
ignoring job in its own process group behind a shell (the classic "Address
already in use" after a restart), a SIGTERM-ignorer, a stopped job, a process
that started its own session, and a zombie. The scene starts the same tree
twice, so the two reports stand side by side.

It must leave nothing behind, even when it fails: every process the tree
reports is recorded by identity (pid + start time) and ended in `finally`.
"""
import os
import select
import signal
import subprocess
import sys
import time

import proctree

TITLE = "2. Teardown: signal the root only, or terminate_tree()"

# Each process reports "role pid" on the pipe once it is in place, then the
# root says "ready": the scene never guesses by sleeping.
_TREE = r"""
import os, signal, sys, time
FD = int(sys.argv[1])
def say(role, pid=None):
    os.write(FD, ("%s %d\n" % (role, pid or os.getpid())).encode())
def idle():
    while True:
        time.sleep(1000)
def child(fn):
    pid = os.fork()
    if pid == 0:
        try:
            fn()
        finally:
            os._exit(0)
    return pid
say("root")
JOB = ("import os, signal, time\n"
       "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
       "os.setpgid(0, 0)\n"
       "os.write(3, b'hup-ignoring job (own group) %d\\n' % os.getpid())\n"
       "time.sleep(1000)\n")
def shell():
    os.dup2(FD, 3)
    os.execv("/bin/sh", ["sh", "-c", 'echo "shell $$" >&3; "$0" -c "$1"; sleep 1000', sys.executable, JOB])
child(shell)
def ignorer():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    say("term-ignorer")
    idle()
child(ignorer)
def stopper():
    os.kill(os.getpid(), signal.SIGSTOP)
    idle()
s = child(stopper)
os.waitpid(s, os.WUNTRACED)
say("stopped job", s)
def leader():
    os.setsid()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    say("own session")
    idle()
child(leader)
def keeper():
    # Wait for the child to become a zombie without reaping it. os.waitid
    # (WNOWAIT) is Linux-only before Python 3.13 on macOS: read its state instead.
    import proctree
    z = child(lambda: None)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not proctree.proc(z).is_zombie:
        time.sleep(0.001)
    say("zombie", z)
    say("zombie keeper")
    idle()
child(keeper)
idle()
"""
_EXPECTED = 8  # reports before the tree is complete


def _start(started):
    r, w = os.pipe()
    p = subprocess.Popen([sys.executable, "-c", _TREE, str(w)], pass_fds=(w,), start_new_session=True)
    os.close(w)
    roles = []
    buf = b""
    deadline = time.monotonic() + 20
    try:
        while len(roles) < _EXPECTED and time.monotonic() < deadline:
            if not select.select([r], [], [], max(0.0, deadline - time.monotonic()))[0]:
                break
            data = os.read(r, 4096)
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                role, _, pid = line.decode().rpartition(" ")
                pid = int(pid)
                try:
                    started[pid] = proctree.proc(pid).start_time
                except proctree.NoSuchProcess:
                    pass
                roles.append((role, pid))
    finally:
        os.close(r)
    return p, roles


def _alive(pid, start):
    try:
        p = proctree.proc(pid)
    except proctree.NoSuchProcess:
        return False
    return p.start_time == start and not p.is_zombie


_ORDER = ["root", "shell", "hup-ignoring job (own group)", "term-ignorer", "stopped job",
          "own session", "zombie keeper", "zombie"]


def _fate(pid, start):
    try:
        p = proctree.proc(pid)
    except proctree.NoSuchProcess:
        return "ended"
    if p.start_time != start:
        return "ended"
    return "zombie (harmless)" if p.is_zombie else "LEFT RUNNING"


def _end_all(started, popens):
    """SIGCONT + SIGKILL whatever of ours is still the same process; reap our children."""
    for _ in range(3):
        left = [pid for pid, st in started.items() if _alive(pid, st) and pid > 1 and pid != os.getpid()]
        for pid in left:
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not left:
            break
        time.sleep(0.05)
    for p in popens:
        try:
            p.wait(timeout=5)
        except (subprocess.TimeoutExpired, ChildProcessError):
            pass


def run(out):
    started = {}
    popens = []
    try:
        # Round 1: what most tools do, SIGTERM to the root's pid.
        p, roles = _start(started)
        popens.append(p)
        if len(roles) < _EXPECTED:
            out.write(f"could not start the demo tree (heard {roles})\n")
            return False
        os.kill(p.pid, signal.SIGTERM)
        p.wait()
        time.sleep(0.2)  # give the rest a moment to follow the root, if it would
        naive = {pid: _fate(pid, started[pid]) for _, pid in roles}

        # Round 2: the same tree, and terminate_tree.
        p2, roles2 = _start(started)
        popens.append(p2)
        if len(roles2) < _EXPECTED:
            out.write(f"could not start the demo tree (heard {roles2})\n")
            return False
        report = proctree.terminate_tree(p2.pid, grace=0.5)
        how = {}
        for label, procs in (("exited", report.exited), ("SIGKILLed", report.killed), ("SURVIVED", report.survivors)):
            for q in procs:
                how[q.pid] = label

        out.write(f"{'process':<32}{'SIGTERM to the root only':<28}terminate_tree()\n")
        second = dict(roles2)
        for role, pid in sorted(roles, key=lambda rp: _ORDER.index(rp[0]) if rp[0] in _ORDER else 99):
            out.write(f"{role:<32}{naive.get(pid, '?'):<28}{how.get(second.get(role), 'not found')}\n")
        leaked = sum(1 for v in naive.values() if v == "LEFT RUNNING")
        out.write(
            f"\nroot only: {leaked} of {len(roles)} processes left running (the scene ends them now).\n"
            f"terminate_tree: {len(report.found)} found, {len(report.exited)} exited, "
            f"{len(report.killed)} SIGKILLed after the 0.5 s grace, {len(report.survivors)} survived, "
            f"in {report.elapsed * 1e3:.0f} ms; group: {report.extra.get('group')}\n"
        )
        left = [pid for _, pid in roles2 if _alive(pid, started[pid])]
        return report.ok and not left and leaked > 0
    finally:
        _end_all(started, popens)
