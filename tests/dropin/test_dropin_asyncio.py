"""proctree.create_subprocess_exec / _shell: asyncio's Process, the command contained as proctree.Popen contains it."""

import asyncio
import os
import sys

import pytest

import proctree

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0, reason="cgroup v2 containment (root, Linux)"
)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


async def gone(pid: int, timeout: float = 5.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while alive(pid):
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def test_exec_returns_asyncios_process_in_its_own_cgroup():
    async def main():
        p = await proctree.create_subprocess_exec("cat", "/proc/self/cgroup", stdout=asyncio.subprocess.PIPE)
        assert isinstance(p, asyncio.subprocess.Process)
        out, _ = await p.communicate()
        assert p.returncode == 0
        assert b"/cmd-" in out

    asyncio.run(main())


def test_shell_and_its_leftovers():
    async def main():
        p = await proctree.create_subprocess_shell("setsid sleep 300 & echo $!", stdout=asyncio.subprocess.PIPE)
        out, _ = await p.communicate()
        orphan = int(out)
        assert p.returncode == 0
        assert await gone(orphan), "what the command left outlived it (asyncio's watcher reaped it, not Popen)"

    asyncio.run(main())


def test_keep_orphans_passes_through():
    async def main():
        p = await proctree.create_subprocess_shell(
            "setsid sleep 300 >/dev/null & echo $!", stdout=asyncio.subprocess.PIPE, keep_orphans=True
        )
        out, _ = await p.communicate()
        orphan = int(out)
        await asyncio.sleep(0.2)
        try:
            assert alive(orphan)
        finally:
            os.kill(orphan, 9)  # ours: started by this test
        assert await gone(orphan)

    asyncio.run(main())


def test_asyncios_argument_checks():
    async def main():
        with pytest.raises(ValueError):
            await proctree.create_subprocess_exec("true", text=True)
        with pytest.raises(FileNotFoundError):
            await proctree.create_subprocess_exec("/nonexistent/program")

    asyncio.run(main())


def test_cancelled_start_leaves_nothing():
    async def main():
        for delay in (0, 0.001, 0.005):
            task = asyncio.ensure_future(
                proctree.create_subprocess_shell(
                    "setsid sleep 300 & echo $!; sleep 300", stdout=asyncio.subprocess.PIPE
                )
            )
            await asyncio.sleep(delay)
            task.cancel()
            try:
                p = await task
            except asyncio.CancelledError:
                continue
            # Started before the cancel arrived: end it as a caller would, and its leftovers go with it.
            orphan = int(await p.stdout.readline())
            p.kill()
            await p.wait()
            assert await gone(orphan)

    asyncio.run(main())
