"""Find and end processes this test run started and left behind.

Every process a test starts inherits PROCTREE_TEST_RUN=<nonce> from the test
process, even after it double-forks and reparents. A leftover is a process
that carries our nonce and is not the test process itself. Nothing else on
the machine is ever signalled: the nonce is the allowlist, and each kill is
checked against the start time read at the same moment.
"""

import os
import signal

import proctree

MARKER = "PROCTREE_TEST_RUN"


def _environ_has(pid, needle):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return needle in data.split(b"\0")


def leftovers(nonce, exclude=()):
    """Live (non-zombie) processes carrying our nonce, other than those in exclude."""
    needle = f"{MARKER}={nonce}".encode()
    me = os.getpid()
    found = []
    for p in proctree.snapshot().values():
        if p.pid == me or p.pid in exclude or p.is_zombie:
            continue
        if _environ_has(p.pid, needle):
            found.append(p)
    return found


def end(procs):
    """SIGKILL each leftover that is still the same process (pid + start time)."""
    for p in procs:
        try:
            now = proctree.proc(p.pid)
        except proctree.NoSuchProcess:
            continue
        if now.start_time != p.start_time or p.pid in (0, 1, os.getpid()):
            continue
        try:
            os.kill(p.pid, signal.SIGCONT)
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
