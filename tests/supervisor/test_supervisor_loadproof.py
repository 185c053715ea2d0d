"""The Supervisor under hostile load: a printer cannot stall the loop, a stranger cannot fool readiness.

A service naming, line after line, ports whose listeners have a full accept
queue (a connect there never completes) must not delay the event loop; a
server of another uid on the service's port, bound before or after the
spawn, must never make it ready. Also: stop order through a completed
one-shot, and wait()'s return type.
"""

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
import typing

import pytest

from proctree import ServiceSnapshot, ServiceSpec, Supervisor, SyncSupervisor
from proctree._supervisor.sockets import owned_ports
from support.ports import free_port

PY = sys.executable


def run(coro, timeout=90):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


class LoopLag:
    """Measures how late a 5 ms sleep wakes up on the running loop (the worst case seen)."""

    def __init__(self):
        self.worst = 0.0
        self.task = None

    async def _probe(self):
        loop = asyncio.get_running_loop()
        while True:
            t0 = loop.time()
            await asyncio.sleep(0.005)
            self.worst = max(self.worst, loop.time() - t0 - 0.005)

    def __enter__(self):
        self.task = asyncio.ensure_future(self._probe())
        return self

    def __exit__(self, *exc):
        self.task.cancel()


@pytest.fixture
def jammed_ports():
    """Loopback listeners whose accept queue is full: a connect to them hangs until its timeout."""
    listeners, clients = [], []
    try:
        for _ in range(12):
            server = socket.socket()
            server.bind(("127.0.0.1", 0))
            server.listen(0)
            listeners.append(server)
            for _ in range(4):  # past the backlog: later SYNs are dropped, connects stall
                client = socket.socket()
                client.setblocking(False)
                client.connect_ex(server.getsockname())
                clients.append(client)
        yield [s.getsockname()[1] for s in listeners]
    finally:
        for s in clients + listeners:
            s.close()


def test_jammed_ports_really_stall_a_connect(jammed_ports):
    with socket.socket() as s:
        s.settimeout(0.2)
        t0 = time.monotonic()
        with pytest.raises(OSError):
            s.connect(("127.0.0.1", jammed_ports[0]))
        assert time.monotonic() - t0 >= 0.15


def test_a_hostile_printer_cannot_stall_the_loop(jammed_ports):
    """2,400 lines naming jammed ports in rotation (main blocked 0.1 s per line, 181 s for 1,800)."""
    lines = "".join(
        f"Listening on http://127.0.0.1:{jammed_ports[i % len(jammed_ports)]}/ (try {i})\n"
        f"server listening on port {jammed_ports[(i + 5) % len(jammed_ports)]}\n"
        for i in range(1200)
    )
    printer = f"import sys, time\nsys.stdout.write({lines!r})\nsys.stdout.flush()\ntime.sleep(60)\n"

    async def main():
        async with Supervisor(ready_timeout=3) as sup:
            with LoopLag() as lag:
                t0 = time.monotonic()
                snap = await sup.start([PY, "-c", printer], name="hostile")
                snap = await sup.wait(snap.id, until=("running", "ready"), timeout=30)
                elapsed = time.monotonic() - t0
                seen = sup.get(snap.id).rows_seen
                t1 = time.monotonic()
                await sup.stop(snap.id)
                stop_took = time.monotonic() - t1
            return snap, lag.worst, elapsed, seen, stop_took

    snap, worst, elapsed, seen, stop_took = run(main())
    assert snap.status == "running" and snap.ready_by is None  # none of those ports is the service's
    assert seen >= 2400
    # A blocked read would hold the loop 0.1 s per line, minutes in all; a loaded shared machine alone costs ~0.1 s.
    assert worst < 0.5, f"the loop was held up {worst:.3f} s"
    assert elapsed < 10 and stop_took < 10


STRANGER = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(64)\n"
    "print('listening', flush=True)\n"
    "while True:\n"
    "    c, _ = s.accept(); c.close()\n"
)

# A service that says it listens on PORT; it tries to bind it and carries on (sleeping) when it cannot.
BOASTER = (
    "import socket, sys, time\n"
    "port = int(sys.argv[1])\n"
    "print(f'Listening on http://127.0.0.1:{port}/', flush=True)\n"
    "time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0)\n"
    "s = socket.socket()\n"
    "try:\n"
    "    s.bind(('127.0.0.1', port))\n"
    "except OSError as e:\n"
    "    print('bind failed:', e, flush=True)\n"
    "print(f'server listening on port {port}', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def stranger():
    """Start a server of another uid (setpriv) on a port; yields a function taking the port."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a server as another uid")
    started = []

    def start(port):
        # The system's Python where there is one: another uid may not reach a venv under /root.
        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else PY
        proc = subprocess.Popen(
            ["setpriv", "--reuid", "12345", "--regid", "12345", "--clear-groups", python, "-c", STRANGER, str(port)],
            stdout=subprocess.PIPE,
            cwd="/",
        )
        started.append(proc)
        if proc.stdout.readline().strip() != b"listening":
            pytest.skip("a server as uid 12345 could not be started here")
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def test_a_strangers_listener_is_not_the_services_own(stranger):
    port = free_port()
    proc = stranger(port)
    assert owned_ports({port}, [proc.pid]) == {port}  # the test's own check: the tables do see it
    assert owned_ports({port}, [os.getpid()]) == set()


@pytest.mark.parametrize("ready", [None, "tcp", "http"])
def test_a_strangers_server_before_the_spawn_never_makes_it_ready(stranger, ready):
    port = free_port()
    stranger(port)
    spec_ready = {"tcp": f"tcp:{port}", "http": f"http://127.0.0.1:{port}/", None: None}[ready]

    async def main():
        async with Supervisor(ready_timeout=2) as sup:
            snap = await sup.start([PY, "-c", BOASTER, str(port)], port=port, ready=spec_ready)
            return await sup.wait(snap.id, until=("ready", "running"), timeout=30)

    snap = run(main())
    assert snap.status == "running" and snap.ready_by is None


@pytest.mark.parametrize("ready", [None, "tcp"])
def test_a_strangers_server_after_the_spawn_never_makes_it_ready(stranger, ready):
    """The pre-flight saw nothing; the stranger binds while the service says it listens: still not ready."""
    port = free_port()
    spec_ready = f"tcp:{port}" if ready == "tcp" else None

    async def main():
        async with Supervisor(ready_timeout=3) as sup:
            snap = await sup.start([PY, "-c", BOASTER, str(port), "1.5"], ready=spec_ready)
            await asyncio.sleep(0.3)
            await asyncio.to_thread(stranger, port)  # the service's bind has failed or will fail
            snap = await sup.wait(snap.id, until=("ready", "running"), timeout=30)
            return snap, sup.read(snap.id).rows

    snap, rows = run(main())
    assert snap.status == "running" and snap.ready_by is None, [r.text for r in rows]


def test_the_trees_own_listener_still_proves_readiness_quickly():
    port = free_port()
    server = (
        "import socket, sys, time\n"
        "s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(8)\n"
        "print(f'Listening on http://127.0.0.1:{sys.argv[1]}/', flush=True)\n"
        "time.sleep(60)\n"
    )

    async def main():
        async with Supervisor(ready_timeout=30) as sup:
            t0 = time.monotonic()
            snap = await sup.start([PY, "-c", server, str(port)])
            snap = await sup.wait(snap.id, timeout=30)
            return snap, time.monotonic() - t0

    snap, took = run(main())
    assert snap.status == "ready" and snap.ready_by == "url" and snap.port == port
    assert took < 10


def test_stop_order_goes_through_a_completed_one_shot(tmp_path):
    """web depends on migrate (completed) which depends on db: web is stopped, and gone, before db is asked."""
    recorder = (
        "import signal, sys, time, os\n"
        "path = sys.argv[1]\n"
        "def on_term(*_):\n"
        "    with open(path, 'a') as f: f.write(f'term {time.time()}\\n')\n"
        "    time.sleep(0.4)\n"
        "    with open(path, 'a') as f: f.write(f'exit {time.time()}\\n')\n"
        "    os._exit(0)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "print('up', flush=True)\n"
        "while True: time.sleep(1)\n"
    )

    async def main():
        async with Supervisor() as sup:
            await sup.start_all(
                [
                    ServiceSpec([PY, "-c", recorder, str(tmp_path / "db")], name="db", ready="log:up"),
                    ServiceSpec(["true"], name="migrate", depends_on={"db": "ready"}, ready="none"),
                    ServiceSpec(
                        [PY, "-c", recorder, str(tmp_path / "web")],
                        name="web",
                        depends_on={"migrate": "completed"},
                        ready="log:up",
                    ),
                ]
            )
            await sup.wait("web", until="ready", timeout=30)
            assert sup.get("migrate").status == "exited"

    run(main())

    def times(name):
        return {k: float(v) for k, v in (line.split() for line in (tmp_path / name).read_text().splitlines())}

    web, db = times("web"), times("db")
    assert web["exit"] <= db["term"], (web, db)


def test_wait_is_typed_as_returning_the_snapshot():
    assert typing.get_type_hints(Supervisor.wait)["return"] is ServiceSnapshot
    assert typing.get_type_hints(SyncSupervisor.wait)["return"] is ServiceSnapshot


def test_wait_for_a_forgotten_id_says_so():
    from proctree import UnknownServiceError

    async def main():
        async with Supervisor(max_records=1) as sup:
            first = await sup.start("true", ready="none")
            await sup.wait(first.id, until=())
            await sup.start("true", ready="none")  # max_records=1: the first is forgotten
            with pytest.raises(UnknownServiceError, match="forgotten"):
                await sup.wait(first.id)

    run(main())


def test_sock_diag_and_the_proc_tables_agree():
    """The netlink answer (fast) and /proc/net/tcp{,6} (the fallback) list the same listener."""
    from proctree._supervisor import sockets

    if not sys.platform.startswith("linux"):
        pytest.skip("Linux tables")
    with socket.socket() as v4, socket.socket(socket.AF_INET6) as v6, socket.socket() as remote_only:
        v4.bind(("127.0.0.1", 0))
        v4.listen(1)
        v6.bind(("::1", 0))
        v6.listen(1)
        remote_only.bind(("127.0.0.1", 0))  # bound, not listening: never a listener
        ports = {v4.getsockname()[1], v6.getsockname()[1], remote_only.getsockname()[1]}
        try:
            fast = sockets._diag_listeners(socket.AF_INET) + sockets._diag_listeners(socket.AF_INET6)
        except OSError as exc:
            pytest.skip(f"no sock_diag here: {exc}")
        fast = sorted(s for s in fast if s.port in ports)
        slow = sorted(sockets._proc_listeners(ports))
        assert fast == slow and len(fast) == 2
        assert sockets.owned_ports(ports, [os.getpid()]) == {v4.getsockname()[1], v6.getsockname()[1]}
