"""SyncSupervisor: the Supervisor for synchronous hosts, on real processes."""

import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import pytest

import proctree
from proctree import ServiceSpec, SupervisorError, SyncSupervisor
from support.ports import free_port
from support.spawnkit import alive
from support.stubborn import survives_polite_signals_argv

PY = sys.executable


def test_the_same_calls_blocking():
    port = free_port()
    events = []
    with SyncSupervisor(stop_grace=1, ready_timeout=20) as sup:
        unsubscribe = sup.subscribe(lambda e: events.append((threading.current_thread().name, e.kind)))
        snap = sup.start([PY, "-m", "http.server", "--bind", "127.0.0.1", str(port)], name="web")
        assert snap.status == "starting"
        ready = sup.wait("web", timeout=20)
        assert ready.status == "ready" and ready.url == f"http://127.0.0.1:{port}/"
        assert urllib.request.urlopen(ready.url, timeout=5).status == 200
        [job] = sup.start_all([ServiceSpec("echo job done", name="job")])
        assert sup.wait("job", until=(), timeout=20).last_rows == ("job done",)
        assert [s.id for s in sup.list()] == ["s1", "s2"] and sup.live_count() == 1
        assert sup.read("web").next >= 1
        result = sup.run_foreground(["echo", "hi"])
        assert result.ok and result.output == "hi"
        [restarted] = sup.restart("web")
        assert restarted.restarts == 1
        unsubscribe()
        heard = len(events)
        [stopped] = sup.stop("web")
        assert stopped.status == "stopped" and not alive(stopped.pid)
        assert len(events) == heard
    assert {name for name, _ in events} == {"proctree-supervisor"}  # listeners run in the supervisor's thread
    with pytest.raises(SupervisorError, match="closed"):
        sup.start("true")
    sup.close()  # idempotent


def test_a_listener_calling_back_and_waiting_is_refused_not_hung(caplog):
    with SyncSupervisor() as sup:
        errors = []

        def listener(event):
            try:
                sup.live_count()
            except RuntimeError as exc:
                errors.append(str(exc))

        sup.subscribe(listener)
        sup.start("true")
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            time.sleep(0.01)
        assert errors and "own thread" in errors[0]


def test_leaving_the_block_on_an_exception_stops_everything():
    with pytest.raises(RuntimeError, match="host bug"):
        with SyncSupervisor(stop_grace=0.3) as sup:
            snap = sup.start("sleep 60")
            pid = snap.pid
            raise RuntimeError("host bug")
    assert not alive(pid)
    assert not any(t.name == "proctree-supervisor" and t.is_alive() for t in threading.enumerate())


def test_reap_sync_and_bad_settings():
    with pytest.raises(ValueError):
        SyncSupervisor(contain="jail")
    with SyncSupervisor(stop_grace=30) as sup:
        snap = sup.start(survives_polite_signals_argv(seconds=60))
        t0 = time.monotonic()
        sup.reap_sync()
        sup.reap_sync()
        assert time.monotonic() - t0 < 2
        assert sup.get(snap.id).status == "stopped"
    assert not alive(snap.pid)


SIGINT_HOST = r"""
import sys
import proctree

try:
    with proctree.SyncSupervisor(stop_grace=0.5) as sup:
        snap = sup.start("sleep 60")
        print("pid", snap.pid, flush=True)
        sup.run_foreground(["python3", "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(60)"])
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def test_ctrl_c_while_blocked_cancels_the_call_and_stops_everything():
    import signal
    import subprocess

    host = subprocess.Popen([PY, "-c", SIGINT_HOST], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(host.stdout.readline().split()[1])
        while host.poll() is None and not [p for p in proctree.descendants(host.pid) if p.name.startswith("python3")]:
            time.sleep(0.02)
        fg = [p.pid for p in proctree.descendants(host.pid) if p.name.startswith("python3")]
        host.send_signal(signal.SIGINT)
        assert host.wait(30) == 130
        assert "interrupted" in host.stdout.read()
        assert not alive(pid) and not any(alive(p) for p in fg)
    finally:
        if host.poll() is None:
            host.kill()
        host.wait()
        host.stdout.close()


def test_calls_from_many_threads_at_once():
    from concurrent.futures import ThreadPoolExecutor

    with SyncSupervisor(max_services=8, stop_grace=0.5) as sup:

        def one(i):
            snap = sup.start(f"echo worker {i}; sleep 60", name=f"w{i}", ready="log:worker")
            ready = sup.wait(snap.id, timeout=20)
            [stopped] = sup.stop(snap.id)
            return snap.id, ready.status, stopped.status

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(one, range(8)))
        assert sorted(r[0] for r in results) == sorted(f"s{i}" for i in range(1, 9))
        assert {r[1:] for r in results} == {("ready", "stopped")}
        assert sup.live_count() == 0


def wait_gone(pid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_sync_supervisor_left_open_at_exit_ends_quietly():
    """sys.exit() without close(): atexit's reap_sync ends every tree, and nothing is printed about it."""
    code = textwrap.dedent(
        """
        import sys, time, proctree
        sup = proctree.SyncSupervisor(stop_grace=1)
        a = sup.start("sh -c 'setsid sleep 300 & sleep 300'", name="a")
        b = sup.start("sleep 300", name="b")
        print(a.pid, b.pid, flush=True)
        time.sleep(0.3)
        sys.exit(3)
        """
    )
    for _ in range(3):  # the teardown races the interpreter's shutdown: try it a few times
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert done.returncode == 3, done
        assert "Traceback" not in done.stderr and "failed" not in done.stderr, done.stderr
        for pid in map(int, done.stdout.split()):
            assert wait_gone(pid), pid


def test_start_all_racing_close_from_another_thread_raises_closed(caplog):
    """close() while start_all waits on a dependency: SupervisorError, not snapshots of what close stopped."""
    for delay in (0.05, 0.3, 0.6):
        sup = SyncSupervisor(stop_grace=0.3)
        closer = threading.Timer(delay, sup.close)
        closer.start()
        try:
            with pytest.raises(SupervisorError, match="the supervisor is closed"):
                sup.start_all(
                    [
                        ServiceSpec("sleep 60", name="db", ready="log:never"),
                        ServiceSpec("sleep 60", name="web", depends_on={"db": "ready"}),
                    ]
                )
        finally:
            closer.join()
        # After close, the reads answer from the final state, as the async Supervisor's do.
        final = sup.list()
        assert {s.status for s in final} <= {"stopped"} and sup.live_count() == 0
        assert not any(alive(s.pid) for s in final if s.pid)
        if final:
            assert sup.get("db").status == "stopped" and sup.read("db").rows == ()
    assert "failed running it" not in caplog.text and "cannot schedule" not in caplog.text


def test_reads_answer_after_close_and_the_rest_refuse():
    with SyncSupervisor(stop_grace=0.3) as sup:
        snap = sup.start("echo hello; exec sleep 60", ready="log:hello")
        sup.wait(snap.id, timeout=20)
    assert sup.get(snap.id).status == "stopped" and sup.get(snap.id).pid == snap.pid
    assert [s.status for s in sup.list()] == ["stopped"] and sup.live_count() == 0
    assert [row.text for row in sup.read(snap.id).rows] == ["hello"]
    for refused in (lambda: sup.start("true"), lambda: sup.wait(snap.id), lambda: sup.stop(), lambda: sup.restart()):
        with pytest.raises(SupervisorError, match="closed"):
            refused()
    assert sup.kill_foreground() == 0
    sup.reap_sync()  # no-ops, never errors
