"""The run's watchdog, from pytest's side: started with the run, checked at each test, restarted once lost.

The watchdog (sentinel.py) is a process of its own that ends what the run
started once pytest dies, however it dies. A test that kills it (a "kill
every child of pytest" cleanup) ends nothing: the plugin notices at the next
test's setup or end, says so once in the summary, and starts another, so a
pytest SIGKILLed later still leaves nothing.

Below the run's subreaper (handoff.py) it is no child of pytest either: a
shell starts it in the background and exits, so it is the subreaper's (a
test that waits for any child of pytest, or counts them, never sees it).
Otherwise it is pytest's own child.

Below the run's subreaper it watches the subreaper rather than pytest: the
subreaper checks what a live object still held at the session's end once
pytest has exited (reaper.py, the late check), so the watchdog's sweep waits
for that check, and still comes however the subreaper or pytest die.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import proctree

from .describe import Identity, fresh, identity

# The watchdog is no member of the run: no owner marker, and a tree id of its own before the run's (the
# run's subreaper adopts it below one: adoption.py counts only orphans whose innermost tree is the run's).
_OWNER, _TREE = "PROCTREE_OWNER", "PROCTREE_TREE"
_DETACH = '"$@" </dev/null >/dev/null 2>&1 & echo $!'


class Watchdog:
    def __init__(self, tree_id: str, grace: float, detached: bool, watched: int | None = None) -> None:
        """watched: the process whose end ends the run's processes (default: this pytest)."""
        self.tree_id, self.grace, self.detached = tree_id, grace, detached
        self.watched = os.getpid() if watched is None else watched
        self.proc: subprocess.Popen[bytes] | None = None  # our own child (not detached)
        self.current: proctree.Proc | None = None
        self.idents: set[Identity] = set()  # every watchdog this run started: never counted
        self.lost: list[str] = []  # where it was found gone (said once in the summary)
        self.start()

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in (_OWNER, _TREE)}
        env[_TREE] = f"{os.urandom(16).hex()}:{self.tree_id}"
        quiet = subprocess.DEVNULL
        try:
            watched = proctree.proc(self.watched)
            sentinel = [sys.executable, "-m", "proctree._plugin.sentinel"]
            argv = [*sentinel, str(watched.pid), str(watched.start_time), self.tree_id, str(self.grace)]
            if self.detached:
                out = subprocess.run(
                    ["sh", "-c", _DETACH, "sh", *argv],
                    env=env,
                    stdin=quiet,
                    stderr=quiet,
                    capture_output=False,
                    stdout=subprocess.PIPE,
                    check=True,
                    timeout=30,
                ).stdout
                pid = int(out.split()[0])
            else:
                self.proc = subprocess.Popen(argv, env=env, stdin=quiet, stdout=quiet, stderr=quiet, close_fds=True)
                pid = self.proc.pid
            self.current = proctree.proc(pid)
            self.idents.add(identity(self.current))
        except (OSError, ValueError, IndexError, subprocess.SubprocessError, proctree.NoSuchProcess):
            self.current = None  # not started, or gone at once: the next check starts another

    def alive(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            return False
        return self.current is not None and fresh(self.current) is not None

    def check(self, where: str) -> None:
        """Restart the watchdog if it is gone (a test killed it); remember where, to say it once."""
        if self.alive():
            return
        self.lost.append(where)
        self.start()

    def stop(self) -> None:
        current, self.current = self.current, None
        if current is not None and fresh(current) is not None:
            try:
                os.kill(current.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        p, self.proc = self.proc, None
        if p is not None:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
