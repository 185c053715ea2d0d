"""The first start on an event loop's thread makes no blocking call there either (issue 28: anyio's suite).

The first start in a process makes the holding tree (its cgroup, its receipt,
the keeper's start): filesystem work done on a worker thread while the loop's
thread waits on a pipe, as Popen itself waits on its error pipe while the
command execs. Each check is a fresh process whose very first start runs on
the loop's thread under blockbuster. The only waits allowed are pipe reads:
the stdlib's own (subprocess.py's error pipe, which the detector lets pass
under asyncio's subprocess_exec and flags in a bare Popen call), the exec
step's pid report, and the worker's end; a control shows the stdlib's bare
Popen passes under the same rules and a mkdir does not.
"""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("blockbuster")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the holding tree is Linux-only")

PROBE = textwrap.dedent(r"""
    import asyncio, os, subprocess, sys
    from blockbuster import BlockBuster
    import proctree
    from proctree import Popen, create_subprocess_exec  # the names' imports happen before the loop
    from proctree._containment import popenhold

    how = sys.argv[1]
    stock = subprocess.Popen

    async def first_start():
        assert popenhold._holder is None  # this is the process's first start
        if how == "sync":  # Popen called straight from a coroutine
            p = proctree.Popen(["sh", "-c", "exit 3"])
            rc = p.wait()
        elif how == "stdlib":  # the control: the stdlib's own start under the same rules
            p = stock(["sh", "-c", "exit 3"])
            rc = p.wait()
        elif how == "mkdir":  # the control: the detector is live
            os.mkdir("/tmp/proctree-first-start-never")
        elif how == "swap":  # a global swap: asyncio's own create_subprocess_exec starts proctree.Popen
            subprocess.Popen = proctree.Popen
            try:
                p = await asyncio.create_subprocess_exec("sh", "-c", "exit 3")
            finally:
                subprocess.Popen = stock
            rc = await p.wait()
        else:
            p = await proctree.create_subprocess_exec("sh", "-c", "exit 3")
            rc = await p.wait()
        assert rc == 3, rc
        if how not in ("stdlib", "mkdir"):
            assert popenhold._holder is not None

    bb = BlockBuster(scanned_modules=["__main__"])
    for name in ("os.read", "io.BufferedReader.read"):
        bb.functions[name].can_block_in("subprocess.py", "_execute_child")  # the stdlib's error pipe
    bb.functions["os.read"].can_block_in("proctree/_containment/popen.py", "_fork_exec_via_step")  # the step's
    bb.functions["os.read"].can_block_in("proctree/_containment/popenhold.py", "_on_worker")  # the holder's start
    bb.activate()
    try:
        asyncio.run(first_start())
    finally:
        bb.deactivate()
    print("ok")
""")


def _run(tmp_path, how: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "probe.py"  # a file: the detector scans calls made from __main__'s file
    path.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "PROCTREE_DETACH"}
    return subprocess.run([sys.executable, str(path), how], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("how", ["sync", "swap", "proctree-async", "stdlib"])
def test_a_first_start_on_a_loops_thread_makes_no_blocking_call(tmp_path, how):
    done = _run(tmp_path, how)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_the_detector_sees_a_blocking_call_here(tmp_path):
    done = _run(tmp_path, "mkdir")
    assert done.returncode != 0 and "BlockingError" in done.stderr and "os.mkdir" in done.stderr
