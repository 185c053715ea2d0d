"""The Supervisor's contract: bad input refused before anything starts, limits, ids, listeners, logs."""

import asyncio
import logging
import sys

import pytest

from proctree import ServiceSpec, Supervisor, SupervisorError, SyncSupervisor, UnknownServiceError
from support.spawnkit import alive
from support.stubborn import survives_polite_signals_argv

PY = sys.executable


def run(coro, timeout=60):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


@pytest.mark.parametrize(
    "kw, error, words",
    [
        ({"command": ""}, ValueError, "command is empty"),
        ({"command": "   "}, ValueError, "command is empty"),
        ({"command": []}, ValueError, "command is empty"),
        ({"command": [""]}, ValueError, "program"),
        ({"command": b"ls"}, TypeError, "str"),
        ({"command": ["ls", 3]}, TypeError, r"command\[1\]"),
        ({"command": "ls\0"}, ValueError, "NUL"),
        ({"command": "ls", "port": 0}, ValueError, "1-65535"),
        ({"command": "ls", "port": 65536}, ValueError, "1-65535"),
        ({"command": "ls", "port": True}, TypeError, "port"),
        ({"command": "ls", "port": "80"}, TypeError, "port"),
        ({"command": "ls", "name": "all"}, ValueError, "reserved"),
        ({"command": "ls", "name": "s3"}, ValueError, "reserved"),
        ({"command": "ls", "name": "a b"}, ValueError, "not a service name"),
        ({"command": "ls", "name": "x" * 65}, ValueError, "not a service name"),
        ({"command": "ls", "name": "web", "depends_on": {"web": "ready"}}, ValueError, "itself"),
        ({"command": "ls", "depends_on": {"db": "healthy"}}, ValueError, "condition"),
        ({"command": "ls", "depends_on": "db"}, TypeError, "string"),
        ({"command": "ls", "restart": "sometimes"}, ValueError, "restart"),
        ({"command": "ls", "max_restarts": -1}, ValueError, "max_restarts"),
        ({"command": "ls", "env": {"A=B": "x"}}, ValueError, "variable name"),
        ({"command": "ls", "env": {"A": 1}}, TypeError, "env"),
        ({"command": "ls", "env": ["A"]}, TypeError, "mapping"),
        ({"command": "ls", "ready": "bogus:thing"}, ValueError, "ready"),
        ({"command": "ls", "ready_timeout": -1}, ValueError, "ready_timeout"),
        ({"command": "ls", "stop_grace": float("nan")}, ValueError, "stop_grace"),
        ({"command": "ls", "cwd": 5}, TypeError, "cwd"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(kw, error, words):
    async def main():
        async with Supervisor() as sup:
            command = kw.pop("command")
            with pytest.raises(error, match=words):
                await sup.start(command, **kw)
            assert sup.list() == [] and sup.live_count() == 0

    run(main())


@pytest.mark.parametrize(
    "specs, error, words",
    [
        (
            [ServiceSpec("sleep 60", name="a", depends_on=["b"]), ServiceSpec("sleep 60", name="b", depends_on=["a"])],
            ValueError,
            "dependency cycle: a -> b -> a",
        ),
        ([ServiceSpec("sleep 60", name="a", depends_on=["ghost"])], ValueError, "'a' depends on unknown 'ghost'"),
        (
            [ServiceSpec("sleep 60", name="a"), ServiceSpec("sleep 60", name="a")],
            ValueError,
            "two services are named 'a'",
        ),
        ([ServiceSpec("sleep 60"), "sleep 60"], TypeError, r"specs\[1\]"),
    ],
)
def test_a_bad_batch_is_refused_whole(specs, error, words):
    async def main():
        async with Supervisor() as sup:
            with pytest.raises(error, match=words):
                await sup.start_all(specs)
            assert sup.list() == [] and sup.live_count() == 0
            [ok] = await sup.start_all([ServiceSpec("sleep 60", name="a")])
            assert ok.id == "s1"  # the refused batch used no id

    run(main())


@pytest.mark.parametrize(
    "kw",
    [
        {"max_services": 0},
        {"max_services": True},
        {"stop_grace": -1},
        {"ready_timeout": "3"},
        {"contain": "jail"},
        {"log_rows": 0},
        {"tail_rows": -1},
        {"backoff": 3},
    ],
)
def test_bad_supervisor_settings(kw):
    with pytest.raises((TypeError, ValueError)):
        Supervisor(**kw)


def test_at_max_services_a_start_is_refused_naming_the_live_ids():
    async def main():
        async with Supervisor(max_services=2, max_records=2) as sup:
            a = await sup.start("sleep 60")
            b = await sup.start("sleep 60", name="b")
            with pytest.raises(SupervisorError, match=r"2 of max_services=2 services are live \(s1, s2\)"):
                await sup.start("sleep 60")
            with pytest.raises(SupervisorError):
                await sup.start_all([ServiceSpec("true")])
            await sup.stop(a.id)
            with pytest.raises(SupervisorError, match="already named 'b'"):
                await sup.start("sleep 60", name="b")
            # A finished record is forgotten to make room (max_records=2); a live one never is.
            c = await sup.start("sleep 60", name="c")
            assert c.id == "s3"  # the refused starts used no id
            assert [s.id for s in sup.list()] == [b.id, c.id]
            assert sup.get(a.id) is None  # forgotten: a stale id is a no-op
            assert await sup.stop(a.id) == []
            assert sup.read(a.id).rows == ()
            with pytest.raises(UnknownServiceError, match="was ever given the id .s99."):
                sup.get("s99")
            with pytest.raises(UnknownServiceError, match="no service is named 'nope'"):
                await sup.stop("nope")
            with pytest.raises(TypeError):
                sup.get(1)

    run(main())


def test_ids_are_never_reused():
    async def main():
        async with Supervisor(max_records=1) as sup:
            ids = []
            for _ in range(4):
                snap = await sup.start("true", name="job")
                await sup.wait(snap.id, until=(), timeout=20)
                ids.append(snap.id)
            assert ids == ["s1", "s2", "s3", "s4"]
            assert sup.get("job").id == "s4"

    run(main())


def test_a_listener_that_raises_is_isolated(caplog):
    async def main():
        async with Supervisor() as sup:
            heard = []

            def broken(event):
                raise RuntimeError("listener bug")

            async def broken_async(event):
                raise RuntimeError("async listener bug")

            sup.subscribe(broken)
            sup.subscribe(broken_async)
            unsubscribe = sup.subscribe(lambda e: heard.append(e.kind))
            snap = await sup.start(f'{PY} -c \'print("hello"); print("Listening on port 1")\'; sleep 0.2')
            done = await sup.wait(snap.id, until=(), timeout=20)
            assert done.status == "exited" and done.exit_code == 0
            assert heard[0] == "started" and heard[-1] == "exited" and "output" in heard
            unsubscribe()
            unsubscribe()
            n = len(heard)
            await sup.run_foreground("true")
            await sup.stop("all")
            assert len(heard) == n

    with caplog.at_level(logging.WARNING, logger="proctree.supervisor"):
        run(main())
    assert "listener bug" in caplog.text


def test_output_is_coalesced_and_paged_with_a_monotonic_cursor():
    lines = 50_000
    script = f"import sys\nfor i in range({lines}): sys.stdout.write('line %d\\n' % i)\n"

    async def main():
        async with Supervisor(log_rows=1000, output_interval=0.05) as sup:
            events = []
            sup.subscribe(lambda e: events.append(e) if e.kind == "output" else None)
            snap = await sup.start([PY, "-c", script])
            done = await sup.wait(snap.id, until=(), timeout=60)
            assert done.status == "exited" and done.rows_seen == lines
            assert done.last_rows[-1] == f"line {lines - 1}"
            assert len(events) < lines / 50  # coalesced, not one event per line
            delivered = sum(len(e.rows) for e in events) + sum(e.dropped for e in events)
            assert delivered == lines
            seqs = [r.seq for e in events for r in e.rows]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
            page = sup.read(snap.id, since=0, limit=10)
            assert page.dropped == lines - 1000 and page.rows[0].text == f"line {lines - 1000}"
            more = sup.read(snap.id, since=page.next)
            assert more.dropped == 0 and len(more.rows) == 990 and more.next == lines
            assert sup.read(snap.id, since=lines).rows == ()
            with pytest.raises(ValueError):
                sup.read(snap.id, since=-1)

    run(main())


def test_a_command_that_cannot_start_fails_with_the_reason():
    async def main():
        async with Supervisor() as sup:
            missing = await sup.start(["/nonexistent/server", "--port", "80"])
            assert missing.status == "failed" and "cannot start" in missing.reason
            assert any("No such file" in r for r in missing.last_rows)
            shell = await sup.start("no-such-command-xyz --serve", restart="always")
            shell = await sup.wait(shell.id, until=(), timeout=20)
            assert shell.status == "failed" and "not found" in shell.reason and shell.restarts == 0
            badcwd = await sup.start("true", cwd="/nonexistent/dir")
            assert badcwd.status == "failed" and "/nonexistent/dir" in badcwd.reason
            assert sup.live_count() == 0

    run(main())


def test_a_closed_supervisor_refuses_work():
    async def main():
        sup = Supervisor()
        async with sup:
            await sup.start("sleep 60")
        assert sup.live_count() == 0 and sup.list()[0].status == "stopped"
        with pytest.raises(SupervisorError, match="closed"):
            await sup.start("true")
        with pytest.raises(SupervisorError, match="closed"):
            await sup.run_foreground("true")

    run(main())


@pytest.mark.parametrize("call", ["start_all", "restart"])
def test_a_start_or_restart_that_close_interrupts_raises_closed(call):
    """close() meanwhile: SupervisorError, never snapshots of services the close is stopping."""

    async def main():
        sup = Supervisor(stop_grace=0.3)
        async with sup:
            db = ServiceSpec("sleep 60", name="db", ready="log:never")
            web = ServiceSpec("sleep 60", name="web", depends_on={"db": "ready"})
            if call == "start_all":
                work = asyncio.ensure_future(sup.start_all([db, web]))
            else:  # a restart waits out the grace of a TERM-ignorer
                ignorer = survives_polite_signals_argv(say="up", seconds=60)
                await sup.start(ignorer, name="web", stop_grace=1.5, ready="log:^up$")
                await sup.wait("web", timeout=20)
                work = asyncio.ensure_future(sup.restart("web"))
            await asyncio.sleep(0.2)
            await sup.close()
            with pytest.raises(SupervisorError, match="the supervisor is closed"):
                await work
        assert {s.status for s in sup.list()} == {"stopped"} and sup.live_count() == 0
        assert not any(alive(s.pid) for s in sup.list() if s.pid)

    run(main())


@pytest.mark.parametrize(
    "specs, words",
    [
        ({"a": ServiceSpec("true")}, "not a mapping: give each its name with ServiceSpec(..., name=NAME)"),
        (ServiceSpec("true"), "not one: pass [spec], or use start()"),
        ("true", "not str"),
        (None, "not NoneType"),
        (["true"], "specs[0] must be a ServiceSpec, not str"),
    ],
)
def test_start_all_says_it_takes_a_list_of_specs(specs, words):
    async def main():
        async with Supervisor() as sup:
            with pytest.raises(TypeError) as info:
                await sup.start_all(specs)
            assert words in str(info.value)
            assert sup.list() == []

    run(main())
    with SyncSupervisor() as sync:
        with pytest.raises(TypeError) as info:
            sync.start_all(specs)
        assert words in str(info.value)


def test_a_cancelled_foreground_command_and_a_failing_host_leave_nothing():
    async def main():
        async with Supervisor(stop_grace=0.2) as sup:
            await sup.start("sleep 60")
            await sup.start("sleep 60", depends_on=None)
            task = asyncio.ensure_future(sup.run_foreground("sleep 60"))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            raise RuntimeError("the host failed")

    with pytest.raises(RuntimeError, match="the host failed"):
        run(main())


def test_snapshots_and_events_serialise_to_json():
    import json

    async def main():
        async with Supervisor() as sup:
            out = []
            sup.subscribe(lambda e: out.append(json.dumps(e.to_dict())))
            snap = await sup.start(["echo", "\x1b[31mred\x1b[0m"], name="colour")
            await sup.wait(snap.id, until=(), timeout=20)
            assert sup.get("colour").last_rows == ("red",)
            assert sup.read("colour").rows[0].raw.startswith("\x1b[31mred")
        kinds = [json.loads(o)["kind"] for o in out]
        assert kinds[0] == "started" and "output" in kinds and kinds[-1] == "exited"
        assert json.loads(out[-1])["service"]["command"] == ["echo", "\x1b[31mred\x1b[0m"]

    run(main())


def test_reading_a_forgotten_service_counts_what_the_pager_never_saw():
    async def main():
        async with Supervisor(max_services=2, max_records=1) as sup:
            first = await sup.start("for i in 1 2 3 4 5 6 7 8 9 10; do echo row $i; done")
            await sup.wait(first.id, until=(), timeout=20)
            page = sup.read(first.id, limit=3)
            assert [r.text for r in page.rows] == ["row 1", "row 2", "row 3"]
            second = await sup.start("true")  # max_records=1: the first is forgotten
            await sup.wait(second.id, until=(), timeout=20)
            assert sup.get(first.id) is None
            rest = sup.read(first.id, since=page.next)
            assert rest.rows == () and rest.next == 10 and rest.dropped == 7
            assert sup.read(first.id).dropped == 10
            assert sup.read(first.id, since=10).dropped == 0
            with pytest.raises(ValueError, match="past s1's last row"):
                sup.read(first.id, since=999)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_bad_until_and_oversized_commands_get_clear_errors():
    async def main():
        async with Supervisor() as sup:
            snap = await sup.start("sleep 5", ready="none")
            with pytest.raises(TypeError, match="until must be a status or a collection"):
                await sup.wait(snap.id, until=None)
            with pytest.raises(ValueError, match="the command is 200005 bytes"):
                await sup.start("echo " + "x" * 200_000)
            with pytest.raises(ValueError, match=r"command\[1\] is 200000 bytes"):
                await sup.run_foreground(["true", "x" * 200_000])
            # each argument fits, all of them together do not: the user's program is named, not proctree's keeper
            with pytest.raises(OSError, match="Argument list too long") as caught:
                await sup.run_foreground(["true"] + ["x" * 100_000] * 30)
            assert caught.value.filename == "true"
            failed = await sup.start(["true"] + ["x" * 100_000] * 30)
            assert failed.status == "failed" and "keeper" not in failed.reason
            assert "Argument list too long" in failed.reason
            await sup.stop(snap.id)

    run(main())


def test_a_listener_that_swallows_its_cancellation_is_named_in_a_warning(caplog):
    """It cannot be taken off the host's loop: the warning says asyncio.run() waits for it."""
    release = asyncio.Event()

    async def stubborn(event):
        while not release.is_set():
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                pass  # what the warning is about

    async def main():
        async with Supervisor(stop_grace=0.2) as sup:
            sup.subscribe(stubborn)
            await sup.start("true")
        release.set()  # so that this test's asyncio.run() ends

    with caplog.at_level(logging.WARNING, logger="proctree.supervisor"):
        run(main())
    assert "ignored their cancellation and still run" in caplog.text


def test_a_wait_that_times_out_raises_and_leaves_the_service_alone():
    async def main():
        async with Supervisor(stop_grace=0.3) as sup:
            snap = await sup.start("exec sleep 60", ready="none")
            with pytest.raises(asyncio.TimeoutError):
                await sup.wait(snap.id, until=(), timeout=0.2)
            assert sup.get(snap.id).status == "running" and alive(snap.pid)

    run(main())
    with SyncSupervisor(stop_grace=0.3) as sync:
        snap = sync.start("exec sleep 60", ready="none")
        with pytest.raises(asyncio.TimeoutError):
            sync.wait(snap.id, until=(), timeout=0.2)
        assert sync.get(snap.id).live


def test_a_cancelled_stop_carries_on_and_the_snapshot_keeps_its_status_meanwhile():
    ignorer = survives_polite_signals_argv(say="up", seconds=60)

    async def main():
        async with Supervisor(stop_grace=1.0) as sup:
            snap = await sup.start(ignorer, ready="log:^up$")
            await sup.wait(snap.id, timeout=20)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(sup.stop(snap.id), 0.2)
            during = sup.get(snap.id)
            assert during.status == "ready" and during.live  # no `stopping` status
            done = await sup.wait(snap.id, until=(), timeout=20)
            assert done.status == "stopped" and not alive(snap.pid)

    run(main())
