"""The run's watchdog: a small process that waits for pytest to die and then ends what the run started.

    python -m proctree._plugin.sentinel PID START_TIME TREE_ID GRACE

Started by the plugin (watchdog.py) in a session of its own (no terminal
signal reaches it), without the run's markers (it is no member of the run).
It waits for the pytest process PID (with START_TIME) to exit, by a pidfd
where the kernel has them, and then ends every process whose PROCTREE_TREE
names TREE_ID, with what it started: SIGTERM, GRACE, SIGKILL. Asked to stop
(SIGTERM), it exits at once and ends nothing: the run ended its processes
itself, or a test killed it, and then the plugin starts another.

Losing it ends nothing: unlike a keeper, whose owner ends its tree when it
is lost, nothing watches this process but the plugin, which restarts it.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

import proctree

TREE_ENV = "PROCTREE_TREE"


def same(pid: int, start: int) -> bool:
    """pid is still the process that started at start, and not a zombie."""
    try:
        p = proctree.proc(pid)
    except proctree.NoSuchProcess:
        return False
    return p.start_time == start and not p.is_zombie


def wait_for_exit(pid: int, start: int) -> None:
    fd = None
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pass
    if fd is not None and same(pid, start):  # the pidfd is of the right process: checked after opening it
        select.select([fd], [], [])
        return
    while same(pid, start):
        time.sleep(0.2)


def carriers(tree_id: str) -> list[proctree.Proc]:
    """The live processes whose PROCTREE_TREE names tree_id."""
    me = os.getpid()
    out = []
    for p in proctree.snapshot().procs():
        if p.pid == me or p.is_zombie:
            continue
        try:
            value = proctree.environ(p.pid).get(TREE_ENV, "")
        except (proctree.Error, OSError):
            continue
        if tree_id in value.split(":"):
            out.append(p)
    return out


def end_carriers(tree_id: str, grace: float) -> None:
    found = carriers(tree_id)
    pids = {p.pid for p in found}
    for root in (p for p in found if p.ppid not in pids):
        try:
            proctree.terminate_tree(root.pid, grace=grace)
        except (proctree.Error, OSError):
            pass


def main(argv: list[str]) -> int:
    pid, start, tree_id, grace = int(argv[1]), int(argv[2]), argv[3], float(argv[4])
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # asked to stop: end nothing
    try:
        os.setsid()  # no terminal signal (Ctrl-C, a hang-up) reaches it
    except OSError:
        pass  # a session leader already
    wait_for_exit(pid, start)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # pytest is gone: finish the job
    end_carriers(tree_id, grace)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
