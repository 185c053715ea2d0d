"""exitwatch.on_exit, the async drop-ins' exit watch on a loop without asyncio's child watcher (uvloop), on a plain
asyncio loop: by a pidfd in the loop's readers, and by the thread where pidfds are missing, for a command that exits,
one that is killed and one reaped elsewhere. It reaps the command, calls back on the loop's thread, signals nothing.
"""

import asyncio
import os
import subprocess
import sys
import threading

import pytest

from proctree._containment import exitwatch
from proctree._teardown import signals as _signals
from support.children import popens

HOW = ["pidfd", "thread"] if sys.platform.startswith("linux") and hasattr(os, "pidfd_open") else ["thread"]


@pytest.fixture
def command():
    """A child reading its stdin (it exits with 3 once that closes); killed and reaped at the end if still there."""
    with popens() as start:
        yield lambda: start([sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(3)"], stdin=subprocess.PIPE)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize(
    "end, code",
    [("exits", 3), ("killed", -9), ("reaped elsewhere", 7)],
)
def test_on_exit_reaps_the_command_and_calls_back_on_the_loop(command, monkeypatch, how, end, code):
    if how == "thread":
        monkeypatch.setattr(_signals, "_pidfd_ok", False)  # as where pidfds are missing
    elif not _signals.pidfds_available():
        pytest.skip("no pidfds here")
    p = command()
    if end == "reaped elsewhere":
        p.kill()
        p.wait(10)  # Popen's own poll() reaped it: its status is what known() tells

    async def main():
        loop = asyncio.get_running_loop()
        got = loop.create_future()

        def exited(status):
            got.set_result((status, threading.get_ident()))

        exitwatch.on_exit(loop, p.pid, exited, lambda: 7)
        await asyncio.sleep(0.05)
        assert not got.done(), "called back before the command exited"
        if end == "exits":
            p.stdin.close()
        elif end == "killed":
            p.kill()
        return await asyncio.wait_for(got, 10)

    if end == "reaped elsewhere":
        status, ident = asyncio.run(_at_once(p.pid))
    else:
        status, ident = asyncio.run(main())
    assert status == code
    assert ident == threading.get_ident(), "called off the loop's thread"
    with pytest.raises(ChildProcessError):
        os.waitpid(p.pid, os.WNOHANG)  # reaped by on_exit (or before it)
    p.returncode = code


async def _at_once(pid):
    """on_exit for a pid reaped before it was called: the status known() tells, on the loop."""
    loop = asyncio.get_running_loop()
    got = loop.create_future()
    exitwatch.on_exit(loop, pid, lambda status: got.set_result((status, threading.get_ident())), lambda: 7)
    return await asyncio.wait_for(got, 10)
