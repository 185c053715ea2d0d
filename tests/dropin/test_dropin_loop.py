"""Never blocks the loop: proctree's starts and ends on an event loop's thread make no blocking call there.

Each check runs in a fresh process (the holding tree is made by its first
start) under blockbuster, the blocking-call detector anyio's own suite runs
with: it raises BlockingError for a filesystem call, a blocking read or a
contended lock on a thread that runs an event loop. And the cgroups made
ahead of need (cgrouppool.py) are the holding tree's, never left behind.
"""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("blockbuster")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="cgroup mode is Linux-only")

# Every kind of start and end the drop-ins make from a loop's thread, n rounds, under the detector.
PROBE = textwrap.dedent(r"""
    import asyncio, subprocess, sys
    from blockbuster import blockbuster_ctx
    import proctree
    from proctree import Popen, create_subprocess_exec, create_subprocess_shell  # imported before the loop

    stock = subprocess.Popen

    async def rounds(n):
        for i in range(n):
            p = await proctree.create_subprocess_exec("true")
            assert await p.wait() == 0
            p = await proctree.create_subprocess_shell("echo hi", stdout=subprocess.PIPE)
            assert (await p.communicate())[0] == b"hi\n"
            if sys.argv[2] == "asyncio":
                # The global swap: asyncio's own create_subprocess_exec with subprocess.Popen = proctree.Popen.
                subprocess.Popen = proctree.Popen
                try:
                    p = await asyncio.create_subprocess_exec("sh", "-c", "echo hi", stdout=subprocess.PIPE)
                finally:
                    subprocess.Popen = stock
                assert (await p.communicate())[0] == b"hi\n"
            # Started elsewhere, reaped by poll() on the loop's thread (its cgroup's rmdir goes elsewhere).
            q = await asyncio.to_thread(proctree.Popen, ["sh", "-c", "sleep 30 & exit 3"])
            while q.poll() is None:
                await asyncio.sleep(0.005)
            assert q.returncode == 3

    run = __import__("uvloop").run if sys.argv[2] == "uvloop" else asyncio.run
    with blockbuster_ctx("__main__"):
        run(rounds(int(sys.argv[1])))
    print("ok")
""")


def _run(tmp_path, script: str, *argv: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "probe.py"  # a file: the detector scans calls made from __main__'s file
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "PROCTREE_DETACH"}
    return subprocess.run([sys.executable, str(path), *argv], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_starts_and_ends_on_a_loops_thread_make_no_blocking_call(tmp_path, loop):
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    done = _run(tmp_path, PROBE, "15", loop)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_the_detector_sees_a_blocking_call_here(tmp_path):
    """The probe's detector is live: a mkdir on the loop's thread is caught (so a pass above means something)."""
    script = PROBE.replace(
        "for i in range(n):", "for i in range(n):\n        __import__('os').mkdir('/tmp/proctree-probe-never')"
    )
    done = _run(tmp_path, script, "1", "asyncio")
    assert done.returncode != 0 and "BlockingError" in done.stderr and "os.mkdir" in done.stderr


CLEANUP = textwrap.dedent(r"""
    import os, time
    import proctree
    from proctree._containment import cgrouppool, popenhold

    for _ in range(40):
        proctree.Popen(["true"]).wait()
    holder = popenhold.holder()
    if holder.mode != "cgroup":
        print("skip")
        raise SystemExit(0)
    time.sleep(0.2)  # the pool's thread is done with its last batch
    ready = set(cgrouppool._ready)
    entries = {os.path.join(holder.cgroup, d) for d in os.listdir(holder.cgroup) if d.startswith("cmd-")}
    assert entries == ready, (holder.cgroup, entries, ready)  # only the ready ones
    assert cgrouppool.READY // 2 <= len(entries) <= cgrouppool.READY
    popenhold.release(grace=0)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and os.path.exists(holder.cgroup):
        time.sleep(0.01)
    assert not os.path.exists(holder.cgroup), os.listdir(holder.cgroup)
    print("ok")
""")


def test_the_cgroups_made_ahead_are_the_only_ones_left_and_go_with_the_holding_tree(tmp_path):
    done = _run(tmp_path, CLEANUP)
    assert done.returncode == 0, done.stderr[-3000:]
    if done.stdout.strip() == "skip":
        pytest.skip("no writable cgroup v2 here: the marked fallback makes no cgroups")
    assert done.stdout.strip() == "ok"
