"""The async faces under anyio, on its asyncio and trio backends; a clear error under anything else.

terminate_tree_async, spawn_async and Tree's wait_async/terminate_async on
real processes, run by anyio.run(..., backend=...): the same results on
both, a cancel that ends the tree at once (no grace) on both, and a
cancelled spawn that leaves nothing behind (the suite's leak check).
"""

import signal
import subprocess
import time

import pytest

import proctree
from support.stubborn import survives_polite_signals_argv

anyio = pytest.importorskip("anyio")
pytest.importorskip("trio")

BACKENDS = ["asyncio", "trio"]
STUBBORN = survives_polite_signals_argv(say="ready", seconds=60)


def run(backend, fn, *args):
    return anyio.run(fn, *args, backend=backend)


@pytest.fixture
def popen():
    made = []

    def start(argv, **kw):
        p = subprocess.Popen(argv, **kw)
        made.append(p)
        return p

    yield start
    for p in made:
        if p.poll() is None:
            p.kill()
        p.wait()
        if p.stdout is not None:
            p.stdout.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_terminate_tree_async_ends_a_tree(backend, popen):
    p = popen(["sh", "-c", "sleep 30 & sleep 31 & wait"])
    time.sleep(0.2)  # the shell has started its children (not needed for correctness: a rescan finds them)

    async def main():
        return await proctree.terminate_tree_async(p.pid, grace=2)

    report = run(backend, main)
    assert report.ok and p.pid in {q.pid for q in report.found}
    assert p.wait(timeout=5) == -signal.SIGTERM


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancelled_teardown_kills_at_once(backend, popen):
    p = popen(STUBBORN, stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"

    async def main():
        with anyio.move_on_after(0.3) as scope:
            await proctree.terminate_tree_async(p.pid, grace=30)
        return scope.cancelled_caught

    t0 = time.monotonic()
    assert run(backend, main) is True
    assert p.wait(timeout=5) == -signal.SIGKILL
    assert time.monotonic() - t0 < 5  # not the 30 s grace


@pytest.mark.parametrize("backend", BACKENDS)
def test_spawn_async_wait_async_and_terminate_async(backend):
    async def main():
        tree = await proctree.spawn_async(["sh", "-c", "exit 4"])
        code = await tree.wait_async()
        sleeper = await proctree.spawn_async(["sleep", "30"])
        try:
            with pytest.raises(subprocess.TimeoutExpired):
                await sleeper.wait_async(timeout=0.2)
        finally:
            report = await sleeper.terminate_async(grace=1)
        return code, report.ok, sleeper.returncode

    code, ok, rc = run(backend, main)
    assert (code, ok, rc) == (4, True, -signal.SIGTERM)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancelled_wait_async_returns_at_once_and_the_tree_still_ends(backend):
    async def main():
        tree = await proctree.spawn_async(["sleep", "30"])
        t0 = time.monotonic()
        with anyio.move_on_after(0.2):
            await tree.wait_async()
        waited = time.monotonic() - t0
        await tree.terminate_async(grace=1)
        return waited

    assert run(backend, main) < 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("after", [0, 0.002, 0.01, 0.05])
def test_a_cancelled_spawn_async_leaves_nothing(backend, after):
    # Whenever the cancel lands (before, during or after the keeper's start), nothing is
    # left running: the suite's leak check fails this test otherwise.
    async def main():
        made = []
        with anyio.move_on_after(after):
            made.append(await proctree.spawn_async(["sleep", "30"]))
            await anyio.sleep(30)  # only reached when the spawn beat the cancel
        for tree in made:  # a spawn that finished is the caller's to end
            tree.kill()

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancelled_terminate_async_kills_at_once(backend):
    async def main():
        tree = await proctree.spawn_async(STUBBORN, stdout=subprocess.PIPE)
        try:
            await anyio.to_thread.run_sync(tree.stdout.readline)
            t0 = time.monotonic()
            with anyio.move_on_after(0.3):
                await tree.terminate_async(grace=30)
            return time.monotonic() - t0, tree.members()
        finally:
            tree.stdout.close()
            tree.kill()

    elapsed, members = run(backend, main)
    assert elapsed < 5 and members == []


def _drive_by_hand(coro):
    """Run coro without any event loop, as a library other than asyncio and trio would."""
    try:
        coro.send(None)
    except StopIteration:
        pytest.fail("finished without an event loop")
    finally:
        coro.close()


def test_without_asyncio_or_trio_the_error_names_what_is_supported(popen):
    p = popen(["sleep", "30"])
    for coro in (proctree.terminate_tree_async(p.pid), proctree.spawn_async(["sleep", "30"])):
        with pytest.raises(RuntimeError, match="asyncio or trio"):
            _drive_by_hand(coro)
    assert p.poll() is None  # nothing was signalled


def test_the_supervisor_under_trio_says_it_runs_on_asyncio():
    async def main():
        async with proctree.Supervisor():
            pass

    with pytest.raises(RuntimeError, match="SyncSupervisor"):
        run("trio", main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failed_spawn_async_raises_popens_error(backend):
    async def main():
        with pytest.raises(FileNotFoundError):
            await proctree.spawn_async(["/nonexistent/proctree-test-command"])

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_wait_async_timeout_is_timeout_error_and_timeout_expired(backend):
    async def main():
        async with await proctree.spawn_async(["sleep", "30"]) as tree:
            with pytest.raises(TimeoutError) as caught:
                await tree.wait_async(timeout=0.1)
        return caught.value, tree.returncode

    exc, rc = run(backend, main)
    # One exception for both habits: asyncio code catches TimeoutError, code written for wait() TimeoutExpired.
    assert isinstance(exc, subprocess.TimeoutExpired)
    assert (exc.cmd, exc.timeout) == (["sleep", "30"], 0.1)
    assert str(exc) == "Command '['sleep', '30']' timed out after 0.1 seconds"
    assert rc == -signal.SIGTERM  # leaving the async with ended it


@pytest.mark.parametrize("backend", BACKENDS)
def test_async_with_keeps_the_loop_running_through_the_grace(backend):
    # A TERM-ignoring command: leaving the block waits out the 1 s grace, and the loop ticks all the while.
    async def main():
        ticks = 0
        done = False

        async def ticker():
            nonlocal ticks
            while not done:
                ticks += 1
                await anyio.sleep(0.02)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            started = time.monotonic()
            async with await proctree.spawn_async(STUBBORN, stdout=subprocess.PIPE, grace=1.0) as tree:
                assert await anyio.to_thread.run_sync(tree.stdout.readline) == b"ready\n"
            took = time.monotonic() - started
            done = True
        return ticks, took, tree.returncode, tree.stdout.closed

    ticks, took, rc, closed = run(backend, main)
    assert rc == -signal.SIGKILL and closed
    assert took >= 0.9
    assert ticks >= 10, ticks  # a blocking exit would have let the ticker run at most once
