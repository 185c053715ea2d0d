"""The Supervisor attacked: floods, broken bytes, cancellation at every step, races between stop and restart, SIGINT."""

import asyncio
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import proctree
from proctree import ServiceSpec, Supervisor
from support.stubborn import survives_polite_signals

PY = sys.executable
STUBBORN = survives_polite_signals(say="up", seconds=120)


def run(coro, timeout=90):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def alive(pid):
    try:
        return not proctree.proc(pid).is_zombie
    except proctree.NoSuchProcess:
        return False


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_a_huge_line_and_invalid_utf8_stay_within_the_ring():
    script = "import sys; w = sys.stdout.buffer.write; w(b'x' * (10 * 1024 * 1024)); w(b'\\n\\xff\\xfe bad \\xc3\\n'); w(b'tail')"

    async def main():
        async with Supervisor(log_line=4096) as sup:
            before = rss_kib()
            snap = await sup.start([PY, "-c", script])
            done = await sup.wait(snap.id, until=(), timeout=60)
            grown = rss_kib() - before
            assert done.status == "exited" and done.exit_code == 0
            rows = sup.read(snap.id).rows
            assert len(rows) == 3
            assert rows[0].cut and len(rows[0].text) < 4200
            assert "\ufffd" in rows[1].text and rows[2].text == "tail"
            assert grown < 64 * 1024, grown  # the 10 MB line was never held whole

    run(main())


def test_sixteen_term_ignorers_stop_within_about_one_grace():
    async def main():
        async with Supervisor(max_services=16, stop_grace=1.0) as sup:
            snaps = await sup.start_all([ServiceSpec([PY, "-c", STUBBORN], ready="log:^up$") for _ in range(16)])
            for s in snaps:
                assert (await sup.wait(s.id, timeout=30)).status == "ready"
            pids = [s.pid for s in snaps]
            t0 = time.monotonic()
            stopped = await sup.stop("all")
            took = time.monotonic() - t0
            assert {s.status for s in stopped} == {"stopped"} and len(stopped) == 16
            assert not any(alive(p) for p in pids)
            assert took < 8, took  # one grace for all, not one after another

    run(main())


def test_stop_and_restart_racing_end_stopped():
    async def main():
        async with Supervisor(stop_grace=0.3) as sup:
            snap = await sup.start([PY, "-c", STUBBORN], ready="log:^up$")
            await sup.wait(snap.id, timeout=20)
            results = await asyncio.gather(sup.restart(snap.id), sup.stop(snap.id), sup.restart(snap.id))
            final = sup.get(snap.id)
            assert final.status == "stopped", (final, results)
            assert sup.live_count() == 0

    run(main())


def test_restart_during_backoff_starts_at_once():
    async def main():
        async with Supervisor(backoff=proctree.Backoff(initial=30, jitter=0)) as sup:
            snap = await sup.start("echo run; exit 1", restart="on-failure")
            restarting = await sup.wait(snap.id, until="restarting", timeout=20)
            assert restarting.status == "restarting" and "restarting in 30.00 s" in restarting.reason
            t0 = time.monotonic()
            [again] = await sup.restart(snap.id)
            assert again.restarts == 1 and time.monotonic() - t0 < 10
            await sup.wait(snap.id, until="restarting", timeout=20)
            [stopped] = await sup.stop(snap.id)  # a stop during the backoff does not wait it out
            assert stopped.status == "stopped"

    run(main())


def test_a_cancelled_start_leaves_nothing():
    async def main():
        async with Supervisor() as sup:
            for delay in (0, 0.001, 0.01, 0.05):
                task = asyncio.ensure_future(sup.start("sleep 60"))
                await asyncio.sleep(delay)
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
            # Whatever got spawned was asked to stop; let those stops finish.
            for s in sup.list():
                await sup.stop(s.id)
            assert sup.live_count() == 0

    run(main())


def test_asyncio_run_ending_without_a_stop_leaves_nothing():
    async def main():
        sup = Supervisor()
        await sup.start([PY, "-c", STUBBORN])
        await sup.start("sleep 60; echo never")
        # No `async with`, no stop: asyncio.run cancels the lifecycle tasks at its end.

    run(main())


SIGINT_HOST = textwrap.dedent(r"""
    import asyncio, sys
    import proctree

    async def main():
        async with proctree.Supervisor(stop_grace=0.5) as sup:
            for _ in range(2):
                await sup.start([sys.executable, "-c", sys.argv[1]], ready="log:^up$")
            for s in sup.list():
                await sup.wait(s.id)
                print("pid", s.pid, flush=True)
            print("ready", flush=True)
            await asyncio.sleep(120)

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
""")


def test_sigint_to_the_host_stops_everything_and_exits():
    host = subprocess.Popen([PY, "-c", SIGINT_HOST, STUBBORN], stdout=subprocess.PIPE, text=True)
    try:
        pids = []
        for line in host.stdout:
            if line.startswith("ready"):
                break
            pids.append(int(line.split()[1]))
        assert len(pids) == 2 and all(alive(p) for p in pids)
        t0 = time.monotonic()
        host.send_signal(signal.SIGINT)
        assert host.wait(30) == 130
        assert time.monotonic() - t0 < 15
        assert "interrupted" in host.stdout.read()
        assert not any(alive(p) for p in pids)
    finally:
        if host.poll() is None:
            host.kill()
        host.wait()
        host.stdout.close()


def test_a_listener_may_call_back_into_the_supervisor():
    async def main():
        async with Supervisor() as sup:
            seen = []

            def nosy(event):
                seen.append((event.kind, sup.live_count(), len(sup.list())))
                sup.get(event.snapshot.id)
                sup.read(event.snapshot.id)
                if event.kind == "ready":
                    asyncio.ensure_future(sup.stop(event.snapshot.id))

            sup.subscribe(nosy)
            snap = await sup.start("echo 'Listening on http://127.0.0.1:1/'; sleep 60", ready="log:Listening")
            final = await sup.wait(snap.id, until=("stopped",), timeout=20)
            assert final.status == "stopped"
            assert [k for k, _, _ in seen if k != "output"] == ["started", "ready", "stopped"]

    run(main())


def test_wait_rejects_unknown_statuses_and_times_out():
    async def main():
        async with Supervisor() as sup:
            snap = await sup.start("sleep 60", ready="none")
            assert (await sup.wait(snap.id)).status == "running"
            with pytest.raises(ValueError, match="unknown statuses"):
                await sup.wait(snap.id, until="done")
            with pytest.raises(asyncio.TimeoutError):
                await sup.wait(snap.id, until=(), timeout=0.2)

    run(main())


def test_a_completed_dependency_known_from_before_is_met_at_once():
    async def main():
        async with Supervisor() as sup:
            build = await sup.start("echo built", name="build")
            await sup.wait("build", until=(), timeout=20)
            app = await sup.start("sleep 60", depends_on={"build": "completed"})
            assert app.status in ("starting", "ready", "running") and app.pid
            assert build.id != app.id

    run(main())


def test_reap_sync_and_kill_foreground_from_another_thread():
    async def main():
        async with Supervisor(stop_grace=30) as sup:
            kinds = []
            sup.subscribe(lambda e: kinds.append(e.kind))
            snap = await sup.start([PY, "-c", STUBBORN], ready="log:^up$")
            await sup.wait(snap.id, timeout=20)
            fg = asyncio.ensure_future(sup.run_foreground("sleep 60"))
            while sup.foreground_count() == 0:
                await asyncio.sleep(0.01)
            assert await asyncio.to_thread(sup.kill_foreground) == 1
            assert (await fg).killed
            t0 = time.monotonic()
            await asyncio.to_thread(sup.reap_sync)
            assert sup.get(snap.id).status == "stopped"  # at once, by intent
            [final] = await sup.stop(snap.id)  # waits until its lifecycle is over
            assert final.status == "stopped" and time.monotonic() - t0 < 10
            assert not alive(snap.pid)
            assert kinds.count("stopped") == 1

    run(main())


def test_reap_sync_during_a_spawn_leaves_the_service_stopped():
    async def main():
        async with Supervisor() as sup:
            for delay in (0, 0.005, 0.02):
                start = asyncio.ensure_future(sup.start("sleep 60"))
                await asyncio.sleep(delay)
                sup.reap_sync()
                snap = await start  # taken when the spawn ended: before or after the reap
                assert sup.get(snap.id).status == "stopped"
                [final] = await sup.stop(snap.id)
                assert final.status == "stopped"
                assert final.pid is None or not alive(final.pid)
            assert sup.live_count() == 0

    run(main())


def test_a_last_line_without_a_newline_is_kept_but_proves_nothing():
    async def main():
        async with Supervisor() as sup:
            snap = await sup.start("printf 'first\\nready now'", ready="log:ready now")
            done = await sup.wait(snap.id, until=(), timeout=20)
            assert done.status == "exited" and done.ready_by is None
            assert done.last_rows == ("first", "ready now")

    run(main())


def test_a_teardown_that_raises_still_ends_by_intent(monkeypatch):
    from proctree._containment.spawn import Tree

    real = Tree.terminate_async

    async def broken(self, grace=None):
        await real(self, 0)
        raise OSError(5, "teardown broke")

    async def main():
        async with Supervisor() as sup:
            snap = await sup.start("sleep 60", ready="none")
            monkeypatch.setattr(Tree, "terminate_async", broken)
            [stopped] = await sup.stop(snap.id)
            assert stopped.status == "stopped" and stopped.kill_incomplete
            assert "teardown broke" in stopped.reason and not alive(snap.pid)
            crashed = await sup.start("exit 3")
            crashed = await sup.wait(crashed.id, until=(), timeout=20)
            assert crashed.status == "failed" and "internal error" in crashed.reason

    run(main())


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt])
def test_a_listener_calling_sys_exit_interrupts_the_host_and_leaves_no_tree(exc_type):
    seen = {}

    async def main():
        async with Supervisor(stop_grace=1.0) as sup:

            def listener(event):
                if event.kind == "started":
                    seen["pid"] = event.snapshot.pid
                    raise exc_type("from a listener")

            sup.subscribe(listener)
            await sup.start("sleep 60", name="victim")
            await asyncio.sleep(30)  # the interruption arrives long before

    t0 = time.monotonic()
    with pytest.raises(exc_type):
        asyncio.run(main())
    assert time.monotonic() - t0 < 20
    assert seen["pid"] and not alive(seen["pid"])


def test_a_listener_raising_another_base_exception_is_isolated():
    class Odd(BaseException):
        pass

    async def main():
        async with Supervisor(stop_grace=1.0) as sup:
            sup.subscribe(lambda e: (_ for _ in ()).throw(Odd()))
            snap = await sup.start("sleep 60", ready="none")
            assert (await sup.wait(snap.id, timeout=10)).status == "running"
            stopped = await sup.stop(snap.id)
            assert stopped[0].status == "stopped" and not alive(snap.pid)

    run(main())


def test_a_sync_supervisors_listener_calling_sys_exit_is_only_logged():
    def listener(event):
        raise SystemExit(3)

    with proctree.SyncSupervisor(stop_grace=1.0) as sup:
        sup.subscribe(listener)
        snap = sup.start("sleep 60", ready="none")
        assert sup.wait(snap.id, timeout=10).status == "running"
        assert sup.stop(snap.id)[0].status == "stopped"
    assert not alive(snap.pid)


def test_leaving_the_block_does_not_wait_for_ever_for_a_slow_coroutine_listener():
    cancelled = []

    async def slow(event):
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(event.kind)
            raise

    async def main():
        async with Supervisor(stop_grace=1.0) as sup:
            sup.subscribe(slow)
            snap = await sup.start("sleep 60")
            await asyncio.sleep(0.3)
            t0 = time.monotonic()
        took = time.monotonic() - t0
        assert took < 10, took  # stop_grace for the listeners, then they are cancelled
        assert cancelled and not alive(snap.pid)

    run(main())
