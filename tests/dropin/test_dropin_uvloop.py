"""proctree.create_subprocess_exec / _shell under uvloop: asyncio's own Process over uvloop's pipes, contained.

uvloop starts subprocesses in its own C code, so the drop-ins make asyncio's
own transport there (proctree.Popen for the start, the loop's
connect_read_pipe/connect_write_pipe for the pipes) and see the exit with a
pidfd in the loop's readers (exitwatch.py). Skipped where uvloop is not
installed.
"""

import asyncio
import os
import subprocess
import sys
import time

import pytest

import proctree

uvloop = pytest.importorskip("uvloop")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: cgroup or marked containment")


def _run(coro_fn):
    return uvloop.run(coro_fn())


def _alive(pid: int) -> bool:
    try:
        return not proctree.proc(pid).is_zombie
    except proctree.NoSuchProcess:
        return False


def test_communicate_with_every_pipe_and_the_exit_status():
    async def main():
        assert "uvloop" in type(asyncio.get_running_loop()).__module__
        p = await proctree.create_subprocess_exec(
            "sh", "-c", "cat; echo err >&2; exit 4", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert isinstance(p, asyncio.subprocess.Process)
        return await p.communicate(b"hello"), p.returncode

    assert _run(main) == ((b"hello", b"err\n"), 4)


def test_what_the_command_left_is_ended_when_it_exits():
    async def main():
        p = await proctree.create_subprocess_shell("sleep 60 & echo $!", stdout=asyncio.subprocess.PIPE)
        left = int(await p.stdout.readline())
        assert await p.wait() == 0
        return left

    left = _run(main)
    deadline = time.monotonic() + 10
    while _alive(left) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(left)


def test_terminate_readline_and_a_missing_program():
    async def main():
        p = await proctree.create_subprocess_exec(
            sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)", stdout=subprocess.PIPE
        )
        assert await p.stdout.readline() == b"up\n"
        p.terminate()
        status = await p.wait()
        with pytest.raises(FileNotFoundError):
            await proctree.create_subprocess_exec("proctree-no-such-program")
        return status

    assert _run(main) == -15


def test_many_at_once_and_detach():
    async def one(i):
        p = await proctree.create_subprocess_exec("sh", "-c", f"echo {i}; exit {i % 3}", stdout=subprocess.PIPE)
        out, _ = await p.communicate()
        return int(out), p.returncode

    async def main():
        results = await asyncio.gather(*(one(i) for i in range(20)))
        p = await proctree.create_subprocess_exec("sh", "-c", "exit 5", detach=True)
        return results, await p.wait()

    results, detached = _run(main)
    assert results == [(i, i % 3) for i in range(20)]
    assert detached == 5


def test_a_cancelled_wait_is_asyncios():
    started: list[tuple[int, int]] = []

    async def main():
        async def start():
            p = await proctree.create_subprocess_exec("sleep", "60", stdout=subprocess.PIPE)
            started.append((p.pid, proctree.proc(p.pid).start_time))
            await p.wait()

        task = asyncio.ensure_future(start())
        while not started:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    _run(main)
    pid, start = started[0]
    if _alive(pid) and proctree.proc(pid).start_time == start:
        os.kill(pid, 15)  # a cancelled wait leaves the command running, as asyncio's own does: end it here
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
