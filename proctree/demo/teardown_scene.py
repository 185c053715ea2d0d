"""Demo scene: an adversarial tree ended by signalling its root only, then by terminate_tree.

The tree holds the cases that leak when a tool signals one pid: a SIGHUP-
ignoring job in its own process group behind a shell (the classic "Address
already in use" after a restart), a SIGTERM-ignorer, a stopped job, a process
that started its own session, and a zombie. The scene starts the same tree
twice, so the two reports stand side by side.

It must leave nothing behind, even when it fails: every process the tree
reports is recorded by identity (pid + start time) and ended in `finally`.
"""

from __future__ import annotations

import os
import signal
import time

import proctree

from ._reports import Started

TITLE = "2. Teardown: signal the root only, or terminate_tree()"

# Each process reports "role pid" once it is in place (demo/_reports.py).
_TREE = r"""
import signal
report("root")
JOB = ("import os, signal, time\n"
       "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
       "os.setpgid(0, 0)\n"
       "os.write(3, b'hup-ignoring job (own group) %d\\n' % os.getpid())\n"
       "time.sleep(1000)\n")
def shell():
    os.dup2(REPORTS, 3)
    os.execv("/bin/sh", ["sh", "-c", 'echo "shell $$" >&3; "$0" -c "$1"; sleep 1000', sys.executable, JOB])
fork_into(shell)
def ignorer():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    report("term-ignorer")
    wait_forever()
fork_into(ignorer)
def stopper():
    os.kill(os.getpid(), signal.SIGSTOP)
    wait_forever()
s = fork_into(stopper)
os.waitpid(s, os.WUNTRACED)
report("stopped job", s)
def leader():
    os.setsid()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    report("own session")
    wait_forever()
fork_into(leader)
def keeper():
    # Wait for the child to become a zombie without reaping it. os.waitid
    # (WNOWAIT) is Linux-only before Python 3.13 on macOS: read its state instead.
    import proctree
    z = fork_into(lambda: None)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not proctree.proc(z).is_zombie:
        time.sleep(0.001)
    report("zombie", z)
    report("zombie keeper")
    wait_forever()
fork_into(keeper)
wait_forever()
"""
_EXPECTED = 8  # reports before the tree is complete


_ORDER = [
    "root",
    "shell",
    "hup-ignoring job (own group)",
    "term-ignorer",
    "stopped job",
    "own session",
    "zombie keeper",
    "zombie",
]


def _fate(started, pid):
    if started.still_running(pid):
        return "LEFT RUNNING"
    try:
        p = proctree.proc(pid)
    except proctree.NoSuchProcess:
        return "ended"
    return "zombie (harmless)" if p.is_zombie and p.start_time == started.identities.get(pid) else "ended"


def run(out):
    started = Started()
    try:
        # Round 1: what most tools do, SIGTERM to the root's pid.
        p, roles = started.start(_TREE, _EXPECTED, start_new_session=True)
        if len(roles) < _EXPECTED:
            out.write(f"could not start the demo tree (heard {roles})\n")
            return False
        os.kill(p.pid, signal.SIGTERM)
        p.wait()
        time.sleep(0.2)  # give the rest a moment to follow the root, if it would
        naive = {pid: _fate(started, pid) for _, pid in roles}

        # Round 2: the same tree, and terminate_tree.
        p2, roles2 = started.start(_TREE, _EXPECTED, start_new_session=True)
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
            out.write(f"{role:<32}{naive.get(pid, '?'):<28}{how.get(second.get(role, 0), 'not found')}\n")
        leaked = sum(1 for v in naive.values() if v == "LEFT RUNNING")
        out.write(
            f"\nroot only: {leaked} of {len(roles)} processes left running (the scene ends them now).\n"
            f"terminate_tree: {len(report.found)} found, {len(report.exited)} exited, "
            f"{len(report.killed)} SIGKILLed after the 0.5 s grace, {len(report.survivors)} survived, "
            f"in {report.elapsed * 1e3:.0f} ms; group: {report.extra.get('group')}\n"
        )
        left = [pid for _, pid in roles2 if started.still_running(pid)]
        return report.ok and not left and leaked > 0
    finally:
        started.end()
