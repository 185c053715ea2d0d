"""Trees whose pipes and pidfds are numbered past 1024, where select() cannot go (a supervisor holds thousands).

The test raises its own soft RLIMIT_NOFILE (within the hard limit), holds
1,100 descriptors open, and then drives every wait proctree does: spawn,
wait, wait_async, terminate (its exit waits), a killed keeper (the keeper
watch thread), the pty's status pipe.
"""

import asyncio
import os
import resource
import signal

import pytest

import proctree
from support.spawnkit import ALL_MODES, wait_gone

HELD = 1100


@pytest.fixture
def high_fds():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = HELD + 512
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"the hard fd limit ({hard}) is below {want}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    devnull = os.open(os.devnull, os.O_RDONLY)
    held = [os.dup(devnull) for _ in range(HELD)]
    try:
        yield
    finally:
        for fd in held + [devnull]:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("mode", ALL_MODES)
def test_every_wait_works_with_fds_past_1024(trees, high_fds, mode):
    t = proctree.spawn(["sh", "-c", "exit 3"], contain=mode)
    trees.append(t)
    assert t.status_fd is not None and t.status_fd > 1024 or t.returncode is not None
    assert t.wait(timeout=20) == 3

    t = proctree.spawn(["sleep", "60"], contain=mode, grace=0.5)
    trees.append(t)
    rep = t.terminate()
    assert rep.ok and t.returncode == -signal.SIGTERM

    async def waits():
        t = await proctree.spawn_async(["sh", "-c", "sleep 0.2; exit 4"], contain=mode)
        trees.append(t)
        return await t.wait_async(timeout=20)

    assert asyncio.run(waits()) == 4

    t = proctree.spawn(["sleep", "60"], contain=mode, grace=0.5)
    trees.append(t)
    cmd = t.pid
    os.kill(t.keeper_pid, signal.SIGKILL)  # our own unreaped child
    with pytest.raises(proctree.KeeperLost):
        t.wait(timeout=20)
    assert wait_gone([cmd], 5)


def test_a_pty_tree_with_fds_past_1024(trees, high_fds):
    t = proctree.spawn(["sh", "-c", "read x; exit 5"], pty=True)
    trees.append(t)
    assert t.pty is not None and t.pty > 1024
    os.write(t.pty, b"go\n")
    assert t.wait(timeout=20) == 5
