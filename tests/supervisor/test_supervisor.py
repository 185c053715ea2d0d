"""The Supervisor on real processes: readiness of a real HTTP server, stops that leave nothing, intent, host exit.

Every service here is a real process tree; pids are learned from the
services' own output (a pipe), never guessed. The suite's autouse fixture
fails a test that leaves a process behind.
"""

import asyncio
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

from proctree import Supervisor
from support.ports import answers, free_port
from support.spawnkit import ALL_MODES, alive
from support.stubborn import survives_polite_signals

PY = sys.executable


def wait_gone(pids, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.02)
    return False


def run(coro, timeout=60):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def http_server(port, *extra):
    return [PY, "-m", "http.server", "--bind", "127.0.0.1", str(port), *extra]


async def rows_matching(sup, sid, prefix, n, timeout=15.0):
    """The first n rows of sid's log starting with prefix, as {word: int} (e.g. "pid grandchild 123")."""
    found = {}
    since = 0
    deadline = time.monotonic() + timeout
    while len(found) < n:
        page = sup.read(sid, since)
        since = page.next
        for row in page.rows:
            if row.text.startswith(prefix):
                _, key, value = row.text.split()
                found[key] = int(value)
        if len(found) >= n:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"{sid}: only {found} after {timeout} s; last rows {sup.get(sid).last_rows}")
        await asyncio.sleep(0.02)
    return found


# --- readiness ------------------------------------------------------------------------------------


def test_an_http_server_is_ready_by_the_url_it_prints():
    port = free_port()

    async def main():
        async with Supervisor(ready_timeout=20) as sup:
            snap = await sup.start(http_server(port), name="web")
            assert snap.id == "s1" and snap.status == "starting" and snap.pid and snap.name == "web"
            snap = await sup.wait("web", timeout=20)
            assert snap.status == "ready", snap
            assert snap.ready_by == "url"
            assert snap.url == f"http://127.0.0.1:{port}/"
            assert snap.port == port and not snap.port_preoccupied
            assert snap.ready_at >= snap.started_at
            body = await asyncio.to_thread(lambda: urllib.request.urlopen(snap.url, timeout=5).status)
            assert body == 200
            stopped = await sup.stop("web")
            assert [s.status for s in stopped] == ["stopped"]
            assert not answers(port)

    run(main())


def test_a_silent_server_is_ready_by_a_probe_of_its_port():
    port = free_port()
    quiet = f"exec {PY} -m http.server --bind 127.0.0.1 {port} >/dev/null 2>&1"

    async def tcp_only():
        async with Supervisor(ready_timeout=20) as sup:
            snap = await sup.start(quiet, ready={"tcp": port})
            snap = await sup.wait(snap.id, timeout=20)
            assert snap.status == "ready" and snap.ready_by == "tcp" and snap.port == port

    run(tcp_only())
    port = free_port()
    quiet = f"exec {PY} -m http.server --bind 127.0.0.1 {port} >/dev/null 2>&1"

    async def given_port():
        async with Supervisor(ready_timeout=20) as sup:
            snap = await sup.start(quiet, port=port)
            snap = await sup.wait(snap.id, timeout=20)
            assert snap.status == "ready" and snap.ready_by == "port" and snap.port == port

    run(given_port())


def test_an_http_probe_with_an_expected_status():
    port = free_port()
    quiet = f"exec {PY} -m http.server --bind 127.0.0.1 {port} >/dev/null 2>&1"

    async def main():
        async with Supervisor(ready_timeout=20) as sup:
            ok = await sup.start(quiet, ready={"http": f"http://127.0.0.1:{port}/", "status": 200}, name="ok")
            ok = await sup.wait("ok", timeout=20)
            assert ok.status == "ready" and ok.ready_by == "http" and ok.url == f"http://127.0.0.1:{port}/"

    run(main())


def test_a_missing_page_never_proves_readiness():
    port = free_port()
    quiet = f"exec {PY} -m http.server --bind 127.0.0.1 {port} >/dev/null 2>&1"

    async def main():
        async with Supervisor(ready_timeout=1.5) as sup:
            snap = await sup.start(quiet, ready={"http": f"http://127.0.0.1:{port}/no-such-page", "status": 200})
            snap = await sup.wait(snap.id, timeout=20)
            assert snap.status == "running" and snap.ready_by is None
            assert answers(port)  # it is up; the probe's status is what did not match

    run(main())


def test_a_preoccupied_port_never_makes_a_service_look_ready():
    port = free_port()

    async def main():
        async with Supervisor(ready_timeout=1.5) as sup:
            other = await sup.start(http_server(port), name="other")
            assert (await sup.wait("other", timeout=20)).status == "ready"
            # Somebody else's server answers on the port: neither a probe of it, nor a URL
            # naming it, nor a "listening" phrase makes ours ready.
            # (One after the other: two live services are never given one port.)
            probe = await sup.start(f"{PY} -c 'import time; print(\"booting\"); time.sleep(60)'", port=port)
            snaps = [await sup.wait(probe.id, timeout=20)]
            await sup.stop(probe.id)
            assert answers(port)  # stopping ours left the other server alone
            liar = await sup.start(f"echo 'Listening on http://127.0.0.1:{port}/'; sleep 60", name="liar", port=port)
            snaps.append(await sup.wait(liar.id, timeout=20))
            for snap in snaps:
                assert snap.status == "running", snap
                assert snap.ready_by is None
            assert all(snap.port_preoccupied and snap.port == port for snap in snaps)
            assert sup.get(other.id).status == "ready"

    run(main())


# --- stopping ---------------------------------------------------------------------------------------

FAMILY = textwrap.dedent(r"""
    import os, subprocess, sys, time
    p1, p2, p3 = sys.argv[1:4]
    kids = [subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", p], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL) for p in (p1, p2)]
    for k in kids:
        print("pid grandchild%d %d" % (kids.index(k), k.pid), flush=True)
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(r)
            os.dup2(os.open(os.devnull, os.O_RDWR), 0)
            os.write(w, b"%d" % os.getpid())
            os.close(w)
            os.execv(sys.executable, [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", p3])
        os._exit(0)
    os.close(w)
    os.wait()
    print("pid daemon %d" % int(os.read(r, 64)), flush=True)
    print("pid main %d" % os.getpid(), flush=True)
    time.sleep(120)
""")


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_service_with_grandchildren_and_a_setsid_daemon_is_stopped_whole(mode):
    ports = [free_port() for _ in range(3)]

    async def main():
        async with Supervisor(stop_grace=2.0, ready_timeout=20, contain=mode) as sup:
            snap = await sup.start([PY, "-c", FAMILY, *map(str, ports)], name="family", ready={"tcp": ports[2]})
            pids = await rows_matching(sup, snap.id, "pid ", 4)
            snap = await sup.wait("family", timeout=20)
            assert snap.status == "ready"
            deadline = time.monotonic() + 20
            while not all(answers(p) for p in ports) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert all(answers(p) for p in ports)
            assert all(alive(p) for p in pids.values())
            [stopped] = await sup.stop("family")
            assert stopped.status == "stopped" and not stopped.kill_incomplete
            assert wait_gone(list(pids.values()), 5), {k: alive(p) for k, p in pids.items()}
            assert not any(answers(p) for p in ports)

    run(main())


STUBBORN = survives_polite_signals(say="pid main {pid}", seconds=120)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_service_ignoring_sigterm_is_killed_after_stop_grace(mode):
    async def main():
        async with Supervisor(stop_grace=0.6, contain=mode) as sup:
            snap = await sup.start([PY, "-c", STUBBORN], ready="log:pid main")
            pids = await rows_matching(sup, snap.id, "pid ", 1)
            assert (await sup.wait(snap.id, timeout=20)).status == "ready"
            t0 = time.monotonic()
            [stopped] = await sup.stop(snap.id)
            took = time.monotonic() - t0
            assert stopped.status == "stopped" and stopped.exit_signal == "SIGKILL"
            assert 0.5 <= took < 10, took
            assert not alive(pids["main"])

    run(main())


def test_stopped_or_exited_is_decided_by_intent():
    # Exits 0 on SIGTERM: a stop must still say "stopped", and an exit by itself "exited".
    polite = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); print('up', flush=True); time.sleep(120)"

    async def main():
        async with Supervisor(stop_grace=5) as sup:
            kinds = []
            sup.subscribe(lambda e: kinds.append((e.snapshot.id, e.kind)))
            quick = await sup.start("echo done; exit 0", name="quick")
            done = await sup.wait("quick", until=(), timeout=20)
            assert done.status == "exited" and done.exit_code == 0 and done.exit_signal is None
            assert "done" in done.last_rows
            slow = await sup.start([PY, "-c", polite], ready="log:^up$")
            assert (await sup.wait(slow.id, timeout=20)).status == "ready"
            [stopped] = await sup.stop(slow.id)
            assert stopped.status == "stopped" and stopped.exit_code == 0
            # Stopping a service that already exited by itself changes nothing.
            [again] = await sup.stop("quick")
            assert again.status == "exited"
            assert (quick.id, "exited") in kinds and (slow.id, "stopped") in kinds
            assert (slow.id, "exited") not in kinds and (quick.id, "stopped") not in kinds

    run(main())


# --- foreground commands ----------------------------------------------------------------------------


def test_foreground_commands_are_kept_apart_from_services():
    port = free_port()

    async def main():
        async with Supervisor(stop_grace=1) as sup:
            web = await sup.start(http_server(port), name="web")
            assert (await sup.wait("web", timeout=20)).status == "ready"
            result = await sup.run_foreground("echo out; echo err >&2; exit 3")
            assert result.exit_code == 3 and result.output == "out\nerr" and not result.killed

            # Killing foreground work never touches a service.
            long = asyncio.ensure_future(
                sup.run_foreground(f"{PY} -c 'import time; print(1, flush=True); time.sleep(60)'")
            )
            while sup.foreground_count() == 0:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)
            assert sup.kill_foreground() == 1
            killed = await long
            assert killed.killed and killed.exit_signal == "SIGKILL"
            assert sup.get("web").status == "ready" and answers(port)

            # Stopping services never touches foreground work.
            fg = asyncio.ensure_future(sup.run_foreground("sleep 1; echo finished"))
            while sup.foreground_count() == 0:
                await asyncio.sleep(0.01)
            await sup.stop("all")
            assert sup.get(web.id).status == "stopped"
            finished = await fg
            assert finished.exit_code == 0 and finished.output == "finished"

            timed = await sup.run_foreground("sleep 30", timeout=0.3)
            assert timed.timed_out and timed.exit_signal == "SIGTERM"
            fed = await sup.run_foreground(["cat"], input="one\ntwo\n")
            assert fed.output == "one\ntwo" and fed.exit_code == 0
            with pytest.raises(FileNotFoundError):
                await sup.run_foreground(["/nonexistent/command"])

    run(main())


# --- host exit ---------------------------------------------------------------------------------------


def test_reap_sync_is_idempotent_and_does_not_wait_for_the_grace():
    async def main():
        async with Supervisor(stop_grace=30) as sup:
            events = []
            sup.subscribe(lambda e: events.append((e.snapshot.id, e.kind)))
            stubborn = await sup.start([PY, "-c", STUBBORN], ready="log:pid main")
            family = await sup.start([PY, "-c", FAMILY, *(str(free_port()) for _ in range(3))])
            pids = await rows_matching(sup, stubborn.id, "pid ", 1)
            pids.update(await rows_matching(sup, family.id, "pid ", 4))
            fg = asyncio.ensure_future(sup.run_foreground("sleep 60"))
            while sup.foreground_count() == 0:
                await asyncio.sleep(0.01)
            t0 = time.monotonic()
            sup.reap_sync()
            sup.reap_sync()
            took = time.monotonic() - t0
            assert took < 2.0, took  # a stop would wait 30 s for the TERM-ignorer
            assert sup.live_count() == 0
            assert {s.status for s in sup.list()} == {"stopped"}
            assert wait_gone(list(pids.values()), 10)
            assert (await fg).killed
            # When the loop runs on, each service reports its stop once.
            await sup.stop("all")
            assert sorted(k for _, k in events if k == "stopped") == ["stopped", "stopped"]
            sup.reap_sync()

    t0 = time.monotonic()
    run(main())
    assert time.monotonic() - t0 < 25


HOST = textwrap.dedent(r"""
    import asyncio, sys
    import proctree

    async def main():
        async with proctree.Supervisor(stop_grace=2, contain=sys.argv[6]) as sup:
            await sup.start([sys.executable, "-c", sys.argv[1], *sys.argv[2:5]], name="family")
            await sup.start([sys.executable, "-c", sys.argv[5]], name="stubborn")
            seen = set()
            while len(seen) < 5:
                for sid in ("family", "stubborn"):
                    for row in sup.read(sid).rows:
                        if row.text.startswith("pid ") and row.text not in seen:
                            seen.add(row.text)
                            print(row.text, flush=True)
                await asyncio.sleep(0.02)
            print("all up", flush=True)
            await asyncio.sleep(120)

    asyncio.run(main())
""")


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_sigkilled_host_leaves_nothing_running(mode):
    ports = [free_port() for _ in range(3)]
    argv = [PY, "-c", HOST, FAMILY, *map(str, ports), STUBBORN, mode]
    host = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        pids = []
        for line in host.stdout:
            if line.startswith("all up"):
                break
            pids.append(int(line.split()[2]))
        assert len(pids) == 5, pids
        assert all(alive(p) for p in pids)
        host.send_signal(signal.SIGKILL)
        host.wait(10)
        # The keepers see their owner die and end their trees (TERM, then KILL after each tree's grace).
        assert wait_gone(pids, 20), [p for p in pids if alive(p)]
        assert not any(answers(p) for p in ports)
    finally:
        if host.poll() is None:
            host.kill()
        host.wait()
        host.stdout.close()


def test_children_get_unbuffered_python_unless_set():
    async def main():
        async with Supervisor() as sup:
            probe = [PY, "-c", "import os; print('value', os.environ.get('PYTHONUNBUFFERED'))"]
            a = await sup.start(probe)
            b = await sup.start(probe, env={"PYTHONUNBUFFERED": ""})
            c = await sup.start(probe, env={"PYTHONUNBUFFERED": None})
            rows = [(await sup.wait(s.id, until=(), timeout=20)).last_rows for s in (a, b, c)]
            assert rows == [("value 1",), ("value ",), ("value 1",)]

    run(main())
