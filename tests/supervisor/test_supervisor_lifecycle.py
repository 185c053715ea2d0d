"""Restarts, crash loops and dependency order on real processes."""

import asyncio
import sys
import textwrap
import time

import pytest

from proctree import Backoff, ServiceSpec, Supervisor
from support.ports import free_port
from support.spawnkit import ALL_MODES, alive
from support.stubborn import survives_polite_signals

PY = sys.executable


def run(coro, timeout=90):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def test_a_crashing_service_restarts_with_growing_delays_then_reports_a_crash_loop():
    backoff = Backoff(initial=0.2, factor=2.0, maximum=10, jitter=0.2, reset_after=30)

    async def main():
        async with Supervisor(backoff=backoff) as sup:
            events = []
            sup.subscribe(lambda e: events.append((time.monotonic(), e.kind, e.snapshot)))
            snap = await sup.start("echo boom; exit 2", restart="on-failure", max_restarts=3, name="crashy")
            final = await sup.wait(snap.id, until=(), timeout=30)
            kinds = [k for _, k, _ in events if k != "output"]
            assert kinds == ["started", "restarting"] * 3 + ["started", "crash-loop", "failed"]
            assert final.status == "failed" and final.restarts == 3 and final.exit_code == 2
            assert "crash loop" in final.reason and "max_restarts=3" in final.reason
            starts = [t for t, k, _ in events if k == "started"]
            gaps = [b - a for a, b in zip(starts, starts[1:])]
            assert gaps[0] < gaps[1] < gaps[2], gaps  # 0.2, 0.4, 0.8 s, each +-20 %
            assert gaps[0] >= 0.15
            restarting = [s for _, k, s in events if k == "restarting"]
            assert all(s.status == "restarting" and s.exit_code == 2 for s in restarting)
            assert [s.restarts for _, k, s in events if k == "started"] == [0, 1, 2, 3]
            assert sup.live_count() == 0

    run(main())


def test_max_restarts_zero_fails_once_without_a_crash_loop():
    async def main():
        async with Supervisor() as sup:
            events = []
            sup.subscribe(lambda e: events.append(e.kind))
            snap = await sup.start("echo boom; exit 3", restart="on-failure", max_restarts=0)
            final = await sup.wait(snap.id, until=(), timeout=30)
            assert [k for k in events if k != "output"] == ["started", "failed"]
            assert (final.status, final.exit_code, final.restarts) == ("failed", 3, 0)
            assert final.reason == "exited with status 3; not restarted (max_restarts=0)"

    run(main())


def test_restart_policies():
    async def main():
        async with Supervisor(backoff=Backoff(initial=0.05, reset_after=30)) as sup:
            clean = await sup.start("exit 0", restart="on-failure", max_restarts=2)
            always = await sup.start("exit 0", restart="always", max_restarts=2)
            never = await sup.start("exit 1", restart="no")
            clean, always, never = [await sup.wait(s.id, until=(), timeout=30) for s in (clean, always, never)]
            assert (clean.status, clean.restarts) == ("exited", 0)
            assert (always.status, always.restarts) == ("failed", 2) and "crash loop" in always.reason
            assert (never.status, never.exit_code, never.restarts) == ("exited", 1, 0)

    run(main())


# Prints its own pid and that of a grandchild that survives the polite signals, then runs until stopped.
STUBBORN_FAMILY = textwrap.dedent(r"""
    import os, signal, subprocess, sys, time
    code = STUBBORN_CODE
    kid = subprocess.Popen([sys.executable, "-c", code])
    print("pids %d %d" % (os.getpid(), kid.pid), flush=True)
    time.sleep(120)
""").replace("STUBBORN_CODE", repr(survives_polite_signals(seconds=120)))


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_restart_ends_the_old_tree_before_the_new_one_starts(mode):
    async def main():
        async with Supervisor(stop_grace=0.5, contain=mode) as sup:
            seen_at_start = []

            def on_event(event):
                if event.kind == "started":
                    # What of the earlier runs is still alive when the new run has started.
                    seen_at_start.append([p for p in old_pids if alive(p)])

            old_pids = []
            sup.subscribe(on_event)
            snap = await sup.start([PY, "-c", STUBBORN_FAMILY], ready="log:^pids ")
            assert (await sup.wait(snap.id, timeout=20)).status == "ready"
            old_pids.extend(int(w) for w in sup.get(snap.id).last_rows[-1].split()[1:])
            assert all(alive(p) for p in old_pids)
            [again] = await sup.restart(snap.id)
            assert again.id == snap.id and again.restarts == 1 and again.pid not in old_pids
            assert seen_at_start == [[], []]
            assert not any(alive(p) for p in old_pids)
            assert (await sup.wait(snap.id, timeout=20)).status == "ready"
            # A finished service is started again under the same id.
            [stopped] = await sup.stop(snap.id)
            assert stopped.status == "stopped"
            [revived] = await sup.restart(snap.id)
            assert revived.id == snap.id and revived.restarts == 2 and revived.status in ("starting", "ready")
            assert sup.live_count() == 1

    run(main())


def test_depends_on_orders_the_start_with_a_completed_migration():
    port = free_port()
    migrate = f"{PY} -c 'import time; time.sleep(0.5); print(\"migrated\")'"
    web = f"{PY} -c 'print(\"web up\"); import time; time.sleep(60)'"

    async def main():
        async with Supervisor(ready_timeout=20) as sup:
            order = []
            sup.subscribe(lambda e: order.append((e.snapshot.name, e.kind)) if e.kind != "output" else None)
            snaps = await sup.start_all(
                [
                    ServiceSpec(
                        web, name="web", depends_on={"migrate": "completed", "db": "ready"}, ready="log:web up"
                    ),
                    ServiceSpec(migrate, name="migrate", depends_on={"db": "ready"}),
                    ServiceSpec([PY, "-m", "http.server", "--bind", "127.0.0.1", str(port)], name="db"),
                ]
            )
            assert [s.id for s in snaps] == ["s1", "s2", "s3"]  # ids in the order given
            web_snap = await sup.wait("web", timeout=30)
            assert web_snap.status == "ready", web_snap
            db, mig, web_ = (sup.get(n) for n in ("db", "migrate", "web"))
            assert mig.status == "exited" and mig.exit_code == 0
            assert db.ready_at <= mig.started_at
            assert mig.ended_at <= web_.started_at
            assert order.index(("db", "ready")) < order.index(("migrate", "started"))
            assert order.index(("migrate", "exited")) < order.index(("web", "started"))
            # Stop in reverse order: web before db (migrate has already exited).
            order.clear()
            await sup.stop("all")
            stops = [name for name, kind in order if kind == "stopped"]
            assert stops == ["web", "db"]

    run(main())


def test_a_failed_dependency_fails_its_dependents_with_the_reason():
    async def main():
        async with Supervisor() as sup:
            snaps = await sup.start_all(
                [
                    ServiceSpec("echo 'no database'; exit 4", name="migrate"),
                    ServiceSpec("sleep 60", name="web", depends_on={"migrate": "completed"}),
                    ServiceSpec("sleep 60", name="worker", depends_on=["web"]),
                ]
            )
            web, worker = snaps[1], snaps[2]
            assert web.status == "failed" and "migrate exited with status 4" in web.reason
            assert worker.status == "failed" and "web failed" in worker.reason
            assert web.pid is None and worker.pid is None
            assert sup.live_count() == 0

    run(main())


def test_a_service_waiting_for_its_dependencies_can_be_stopped():
    async def main():
        async with Supervisor() as sup:
            gate = await sup.start("sleep 60", name="gate", ready="log:never")
            start = asyncio.ensure_future(sup.start("sleep 60", name="after", depends_on={"gate": "ready"}))
            while "after" not in [s.name for s in sup.list()]:
                await asyncio.sleep(0.01)
            snap = sup.get("after")
            assert snap.status == "waiting" and "gate (ready)" in snap.reason
            [stopped] = await sup.stop("after")
            assert stopped.status == "stopped" and stopped.pid is None
            assert (await start).status == "stopped"
            assert sup.get(gate.id).status == "starting"

    run(main())


@pytest.mark.parametrize(
    "command",
    [
        "echo working; sleep 0.3; exit 127",  # found, ran, then its own status 127
        "sleep 0.3; exit 126",  # printed nothing: not the shell complaining
        "echo 'no such thing: not found'; echo later; exit 127",  # the shell's words, but not last
    ],
)
def test_an_exit_127_or_126_of_a_command_that_ran_is_restarted_as_any_failure(command):
    async def main():
        async with Supervisor(backoff=Backoff(initial=0.1, jitter=0)) as sup:
            snap = await sup.start(command, restart="on-failure", max_restarts=1)
            done = await sup.wait(snap.id, until=("failed", "exited"), timeout=30)
            assert done.restarts == 1, done
            assert "not found" not in (done.reason or "") and "cannot be run" not in (done.reason or "")

    asyncio.run(asyncio.wait_for(main(), 60))


@pytest.mark.parametrize(
    ("command", "what"),
    [
        ("no-such-command-zq", "not found"),
        ("/etc/passwd", "cannot be run"),
        ("bash -c no-such-command-zq", "not found"),
    ],
)
def test_the_shells_own_127_or_126_fails_at_once_without_restarts(command, what):
    async def main():
        async with Supervisor() as sup:
            snap = await sup.start(command, restart="always")
            done = await sup.wait(snap.id, until=("failed",), timeout=30)
            assert done.status == "failed" and done.restarts == 0 and what in done.reason

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_service_stopped_during_its_backoff_does_not_claim_a_restart():
    async def main():
        async with Supervisor(backoff=Backoff(initial=5, jitter=0)) as sup:
            events = []
            sup.subscribe(lambda e: events.append((e.kind, e.snapshot.reason)))
            snap = await sup.start("exit 1", restart="on-failure")
            await sup.wait(snap.id, until="restarting", timeout=20)
            stopped = (await sup.stop(snap.id))[0]
            assert stopped.status == "stopped" and stopped.exit_code == 1
            assert "restarting in" not in stopped.reason and "before its restart" in stopped.reason
            assert events[-1] == ("stopped", stopped.reason)

    asyncio.run(asyncio.wait_for(main(), 60))
