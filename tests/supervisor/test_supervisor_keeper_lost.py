"""A service whose keeper is SIGKILLed (an OOM kill, `kill -9 <keeper>`), and Tree calls that fail under a service.

The owner ends what a killed keeper left and Tree.wait_async() raises
KeeperLost; the service must then end as a crash would (`failed`, or
restarted under its policy), free its slot and answer stop / restart / wait,
with no traceback and no "Task exception was never retrieved". Whatever a
Tree call raises, the lifecycle task never dies leaving a service live.
"""

import asyncio
import logging
import os
import signal
import sys

import pytest

import proctree
from proctree import Supervisor
from proctree._containment import byidentity as _byidentity
from proctree._containment.spawn import Tree
from support.spawnkit import ALL_MODES, alive, wait_gone
from support.stubborn import survives_polite_signals_sh

PY = sys.executable
# A server-like service with a grandchild (the keeper's death must end both).
SERVICE = f"{PY} -c 'import time; print(\"up\", flush=True); time.sleep(300)' & echo child=$!; wait"


def run(coro, timeout=90):
    async def bounded():
        loop = asyncio.get_running_loop()
        errors = []
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        result = await asyncio.wait_for(coro, timeout)
        return result, errors

    result, errors = asyncio.run(bounded())
    # "Task exception was never retrieved" and the like reach the loop's handler.
    assert not errors, errors
    return result


def kill_keeper(sup, sid):
    """SIGKILL the keeper of a service: our own unreaped child, checked by pid and start time."""
    keeper_pid = sup._records.by_id[sid].tree.keeper_pid
    keeper = proctree.proc(keeper_pid)
    assert keeper.ppid == os.getpid() and keeper.name == "proctree-keeper", keeper
    assert _byidentity.signal_member(keeper, signal.SIGKILL) == "sent"
    return keeper_pid


def child_pid(snap):
    return int(next(row for row in snap.last_rows if row.startswith("child="))[len("child=") :])


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_killed_keeper_fails_the_service_and_frees_it(mode, caplog):
    events = []

    async def main():
        async with Supervisor(max_services=1, stop_grace=0.5, contain=mode) as sup:
            sup.subscribe(lambda e: events.append((e.kind, e.snapshot.status)))
            snap = await sup.start(SERVICE, name="web", ready="log:^up$")
            snap = await sup.wait("web", timeout=30)
            assert snap.status == "ready"
            pids = [snap.pid, child_pid(snap)]
            keeper = kill_keeper(sup, snap.id)

            done = await sup.wait("web", until=(), timeout=30)
            assert done.status == "failed" and not done.live, done
            assert f"keeper (pid {keeper}) was killed by SIGKILL" in done.reason
            assert "tree was ended" in done.reason
            assert done.exit_code is None and done.exit_signal is None
            assert wait_gone(pids, 10), "the tree outlived its killed keeper"
            assert sup.live_count() == 0
            assert ("failed", "failed") in events

            # Everything still answers: stop is a no-op, the slot is free, restart revives it.
            assert [s.status for s in await sup.stop("web")] == ["failed"]
            other = await sup.start("sleep 30", name="other")
            assert other.live
            await sup.stop("other")
            again = (await sup.restart("web"))[0]
            assert again.status in ("starting", "ready") and again.pid not in pids
            assert (await sup.wait("web", timeout=30)).status == "ready"
            return (await sup.stop("web"))[0]

    with caplog.at_level(logging.DEBUG, logger="proctree.supervisor"):
        final = run(main())
    assert final.status == "stopped" and not alive(final.pid)
    assert "failed running it" not in caplog.text and "Traceback" not in caplog.text


def test_a_killed_keeper_is_restarted_as_a_crash_under_on_failure():
    async def main():
        async with Supervisor(stop_grace=0.5, contain="auto") as sup:
            kinds = []
            sup.subscribe(lambda e: kinds.append(e.kind))
            snap = await sup.start(SERVICE, ready="log:^up$", restart="on-failure")
            first = await sup.wait(snap.id, timeout=30)
            kill_keeper(sup, snap.id)

            async def restarted():
                while True:
                    s = sup.get(snap.id)
                    if s.restarts == 1 and s.status == "ready":
                        return s
                    await asyncio.sleep(0.05)

            second = await asyncio.wait_for(restarted(), 30)
            assert second.pid != first.pid and not alive(first.pid)
            assert "restarting" in kinds and kinds.count("started") == 2
            stopped = (await sup.stop(snap.id))[0]
            assert stopped.status == "stopped"

    run(main())


def test_a_keeper_killed_during_a_stop_still_ends_stopped():
    async def main():
        async with Supervisor(stop_grace=2.0) as sup:
            ignorer = survives_polite_signals_sh(say="up")
            snap = await sup.start(ignorer, ready="log:^up$")
            snap = await sup.wait(snap.id, timeout=30)
            stopping = asyncio.ensure_future(sup.stop(snap.id))
            await asyncio.sleep(0.3)  # the SIGTERM is ignored: the stop waits out its grace
            kill_keeper(sup, snap.id)
            done = (await stopping)[0]
            assert done.status == "stopped" and not alive(snap.pid)

    run(main())


@pytest.mark.parametrize("method", ["wait_async", "terminate_async"])
def test_a_tree_call_that_fails_ends_the_service_not_the_task(monkeypatch, caplog, method):
    """A Tree call raising something unexpected: the service fails with the reason, its tree is killed."""
    real = getattr(Tree, method)
    calls = []

    async def broken(self, *args, **kwargs):
        calls.append(method)
        if len(calls) == 1:
            raise RuntimeError(f"{method} broke")
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(Tree, method, broken)

    async def main():
        async with Supervisor(stop_grace=0.5) as sup:
            snap = await sup.start(SERVICE, ready="log:^up$")
            if method == "terminate_async":
                await sup.wait(snap.id, timeout=30)
                pids = [snap.pid, child_pid(sup.get(snap.id))]
                stopped = (await sup.stop(snap.id))[0]
                assert stopped.status == "stopped", stopped  # by intent, whatever failed on the way
                assert "terminate_async broke" in stopped.reason
            else:
                stopped = await sup.wait(snap.id, until=(), timeout=30)
                assert stopped.status == "failed", stopped
                assert "wait_async broke" in stopped.reason
                pids = [snap.pid]
            assert sup.live_count() == 0
            assert wait_gone(pids, 10)

    with caplog.at_level(logging.ERROR, logger="proctree.supervisor"):
        run(main())
    assert "the supervisor failed running it" in caplog.text


def test_a_readiness_watcher_that_fails_is_logged_and_the_run_goes_on(monkeypatch, caplog):
    from proctree._supervisor import service as _service

    async def broken(self, detector):
        raise RuntimeError("watcher broke")

    monkeypatch.setattr(_service.Service, "_watch_readiness", broken)

    async def main():
        async with Supervisor(stop_grace=0.5) as sup:
            snap = await sup.start("echo hello; exec sleep 30", ready="tcp:1")
            await asyncio.sleep(0.3)
            assert sup.get(snap.id).status == "starting"  # nothing proves it ready, and nothing broke
            return (await sup.stop(snap.id))[0]

    with caplog.at_level(logging.ERROR, logger="proctree.supervisor"):
        final = run(main())  # run() fails on "Task exception was never retrieved"
    assert final.status == "stopped" and not alive(final.pid)
    assert "watching its readiness failed" in caplog.text and "watcher broke" in caplog.text
