"""The run's watchdog, from pytest's side: started with the run, checked at each test's end, restarted once lost.

The watchdog (sentinel.py) is a process of its own that ends what the run
started once pytest dies, however it dies. A test that kills it (a "kill
every child of pytest" cleanup) ends nothing: the plugin notices at that
test's end, says so once in the summary, and starts another, so a pytest
SIGKILLed later still leaves nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys

import proctree

from .describe import Identity, identity

_STRIPPED = ("PROCTREE_TREE", "PROCTREE_OWNER")  # the watchdog is no member of the run


class Watchdog:
    def __init__(self, tree_id: str, grace: float) -> None:
        self.tree_id, self.grace = tree_id, grace
        self.proc: subprocess.Popen[bytes] | None = None
        self.idents: set[Identity] = set()  # every watchdog this run started: never counted
        self.lost: list[str] = []  # where it was found gone (said once in the summary)
        self.start()

    def start(self) -> None:
        me = proctree.proc(os.getpid())
        env = {k: v for k, v in os.environ.items() if k not in _STRIPPED}
        argv = [sys.executable, "-m", "proctree._plugin.sentinel", str(me.pid), str(me.start_time), self.tree_id]
        self.proc = subprocess.Popen(
            [*argv, str(self.grace)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        try:
            self.idents.add(identity(proctree.proc(self.proc.pid)))
        except proctree.NoSuchProcess:
            pass  # gone at once: the next check starts another

    def check(self, where: str) -> None:
        """Restart the watchdog if it is gone (a test killed it); remember where, to say it once."""
        if self.proc is None or self.proc.poll() is None:
            return
        self.lost.append(where)
        self.start()

    def stop(self) -> None:
        p, self.proc = self.proc, None
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
