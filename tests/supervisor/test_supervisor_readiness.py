"""Readiness: URLs and phrases in output, ports from commands, ready specs, probes and the Detector.

The parsers get table-driven tests on the lines real servers print; the probes
and the Detector run against real servers (`python -m http.server` on a free
loopback port, started in a fixture and always ended).
"""

import asyncio
import shutil
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from proctree._containment.spawn import spawn
from proctree._supervisor.logring import LogRing
from proctree._supervisor.ports import _local_hex_address, is_local_host, local_listener
from proctree._supervisor.readiness import (
    Detector,
    ReadySpec,
    exec_probe,
    find_listening_port,
    find_url,
    http_probe,
    parse_ready,
    port_answers,
    port_from_command,
    tcp_probe,
)
from support.ports import free_port
from support.stubborn import ignore_polite_signals_sh

# --- find_url --------------------------------------------------------------------------------------

URL_CASES = [
    # what servers print
    ("Serving HTTP on 0.0.0.0 port 8000 (http://0.0.0.0:8000/) ...", "http://127.0.0.1:8000/"),
    ("INFO:     Uvicorn running on http://127.0.0.1:8000 (Press CTRL+C to quit)", "http://127.0.0.1:8000/"),
    ("  \u279c  Local:   http://localhost:5173/", "http://localhost:5173/"),
    ("  \u279c  Local:   \x1b[36mhttp://localhost:\x1b[1m5173\x1b[22m/\x1b[39m", "http://localhost:5173/"),
    ("   - Local:        http://localhost:3000", "http://localhost:3000/"),
    ("ready - started server on 0.0.0.0:3000, url: http://localhost:3000", "http://localhost:3000/"),
    (" * Running on http://127.0.0.1:5000", "http://127.0.0.1:5000/"),
    ("Starting development server at http://127.0.0.1:8000/", "http://127.0.0.1:8000/"),
    ("* Listening on http://127.0.0.1:3000", "http://127.0.0.1:3000/"),
    ("<i> [webpack-dev-server] Loopback: http://localhost:8080/, http://[::1]:8080/", "http://localhost:8080/"),
    ("[2026-12-03 07:00:00 +0000] [42] [INFO] Listening at: http://127.0.0.1:8000 (42)", "http://127.0.0.1:8000/"),
    ("Running on https://127.0.0.1:8443/api/v1?x=1.", "https://127.0.0.1:8443/api/v1?x=1"),
    ("open http://[::1]:9000/docs", "http://[::1]:9000/docs"),
    ("bound to http://[::]:9000", "http://[::1]:9000/"),
    ("see HTTP://LOCALHOST:7000/", "http://localhost:7000/"),
    ("loopback range http://127.1.2.3:7001/x", "http://127.1.2.3:7001/x"),
    ("default ports http://localhost and https://localhost", "http://localhost:80/"),
    ("url=http://localhost:4000/", "http://localhost:4000/"),
    ("(http://127.0.0.1:4001)", "http://127.0.0.1:4001/"),
    # followed by a sentence's punctuation, which is not part of it
    ("Open http://127.0.0.1:8000.", "http://127.0.0.1:8000/"),
    ("Open http://127.0.0.1:8000. Press Ctrl+C to stop", "http://127.0.0.1:8000/"),
    ("served (at http://127.0.0.1:8000), ready", "http://127.0.0.1:8000/"),
    ("at http://localhost:8000, http://[::1]:8000", "http://localhost:8000/"),
    ("at http://localhost:8000; ok", "http://localhost:8000/"),
    ("ready at http://localhost:8000: go", "http://localhost:8000/"),
    ("is it http://localhost:8000? yes", "http://localhost:8000/"),
    ("up at http://localhost:8000!", "http://localhost:8000/"),
    ('url "http://localhost:8000".', "http://localhost:8000/"),
    ("see http://localhost:8000...", "http://localhost:8000/"),
    ("Open http://localhost.", "http://localhost:80/"),
    ("Open http://127.0.0.1:8000/app.", "http://127.0.0.1:8000/app"),
    ("Network: http://192.168.1.4:5173/   Local: http://localhost:5173/", "http://localhost:5173/"),
    # not a loopback URL, or not a URL on its own
    ("  \u279c  Network: http://192.168.1.4:5173/", None),
    ("http://example.com:8000/", None),
    ("http://localhost.example.com:8000/", None),
    ("http://127.0.0.1.nip.io:8000/", None),
    ("http://127.0.0.1:8000.nip.io/", None),
    ("http://localhost.:8000/", None),
    ("http://localhost:8000:9000/", None),
    ("http://localhost:8000.5/", None),
    ("http://localhost@evil.example:8000/", None),
    ("http://localhost:8000@evil.example/", None),
    ("http://localhost:8000abc/", None),
    ("http://example.com/?next=http://localhost:3000/", None),
    ("xhttp://localhost:3000/", None),
    ("ftp://localhost:21/", None),
    ("tcp://127.0.0.1:3000", None),
    ("http://localhost:0/", None),
    ("http://localhost:99999/", None),
    ("http://256.0.0.1:80/", None),
    ("http://localhost:\u0668\u0660\u0660\u0660/", None),  # Arabic-Indic digits are not a port
    ("listening on port 3000", None),
    ("", None),
]


@pytest.mark.parametrize(("line", "url"), URL_CASES)
def test_find_url(line, url):
    assert find_url(line) == url


# --- find_listening_port ---------------------------------------------------------------------------

PHRASE_CASES = [
    ("Example app listening on port 3000", 3000),  # express
    ("Server listening on port: 4000", 4000),
    ("Listening on :8080", 8080),
    ("[GIN-debug] Listening and serving HTTP on :8080", 8080),  # gin
    ("\u21e8 http server started on [::]:1323", 1323),  # echo
    ("Serving HTTP on 0.0.0.0 port 8000 (http://0.0.0.0:8000/) ...", 8000),  # http.server
    ("* Listening on tcp://0.0.0.0:3000", 3000),  # puma
    ("* Listening on http://127.0.0.1:9292", 9292),
    ("ready - started server on 0.0.0.0:3000, url: http://localhost:3000", 3000),  # next 12
    ('LOG:  listening on IPv4 address "127.0.0.1", port 5432', 5432),  # postgres
    ("Server running at http://localhost:3001/", 3001),
    ("Listening on localhost:3002", 3002),
    ("listening on *:3003", 3003),
    ("listening on [::1]:3004", 3004),
    ("App started on port 8081 in 120ms", 8081),
    ("Ready on port 3005", 3005),
    ("\x1b[32mlistening\x1b[0m on port \x1b[1m3006\x1b[0m", 3006),
    ('{"t":{"$date":"2026-12-03"},"msg":"Waiting for connections","attr":{"port":27017,"ssl":"off"}}', 27017),  # mongod
    (
        "/usr/sbin/mysqld: ready for connections. Version: '8.0.36'  socket: '/var/run/mysqld/mysqld.sock'  port: 3306",
        3306,
    ),
    ("listening for connections on port 27018", 27018),
    ("Server is up on port 3007", 3007),
    ("Listening at port 3008", 3008),
    # no port, another host, or not a listening line
    ("Ready to accept connections tcp", None),
    # a port that is somebody else's: the verb does not say where this server listens
    ("Started DB pool (host=127.0.0.1 port=5432)", None),
    ("Running migrations: port 5432 database", None),
    ("Running mode=standalone, port=6379.", None),
    ('Started GET "/" for 127.0.0.1 at 2026-12-03 07:00:00 +0000', None),
    ("Started worker 3, upstream port 9000", None),
    ("Listening on 10.0.0.5:3000", None),
    ("listening on 10.0.0.5 port 3000", None),
    ('listening on IPv4 address "192.168.0.2", port 5432', None),
    ("listening on example.com:3000", None),
    ("started at 12:30:45", None),
    ("report 3 started", None),
    ("Started 4 workers; airport 12", None),
    ("listening on port 0", None),
    ("listening on port 70000", None),
    ("compiled successfully in 3000 ms", None),
    ("", None),
]


@pytest.mark.parametrize(("line", "port"), PHRASE_CASES)
def test_find_listening_port(line, port):
    assert find_listening_port(line) == port


# --- port_from_command -----------------------------------------------------------------------------

COMMAND_CASES = [
    ("uvicorn app:app --port 8001", None, 8001),
    ("uvicorn app:app --port=8002 --reload", None, 8002),
    (["uvicorn", "app:app", "--host", "0.0.0.0", "--port", "8003"], None, 8003),
    ("flask run -p 5001", None, 5001),
    ("rails server -p3001", None, 3001),
    ("python -m http.server 8123", None, 8123),
    ("python -m http.server --bind 127.0.0.1 8124", None, 8124),
    ("python manage.py runserver 8004", None, 8004),
    ("python manage.py runserver 0.0.0.0:8005", None, 8005),
    ("gunicorn -b :8006 app:app", None, 8006),
    ("gunicorn --bind 127.0.0.1:8007 app:app", None, 8007),
    ("php -S localhost:8008", None, 8008),
    ("docker run -p 8009:80 nginx", None, 8009),
    ("docker run -p 127.0.0.1:8010:80/tcp nginx", None, 8010),
    ("PORT=4000 node server.js", None, 4000),
    ("PORT=4001 HOST=x npm start", None, 4001),
    ("node server.js", {"PORT": "4002"}, 4002),
    ("node server.js --port $PORT", {"PORT": "4003"}, 4003),
    ("node server.js --port ${PORT}", {"PORT": "4004"}, 4004),
    ("PORT=4005 node server.js --port $PORT", {"PORT": "1"}, 4005),
    ("npm run dev -- --port 3007", None, 3007),
    ("cd web && vite --port 5174", None, 5174),
    ("serve :3008", None, 3008),
    ("cd web&&PORT=3009 npm start", None, 3009),
    ("cd web; PORT=3010 npm start", {"PORT": "1"}, 3010),
    ("sh -c 'uvicorn app:app --port 8011'", None, 8011),
    ('bash -c "cd api && PORT=3012 node s.js"', None, 3012),
    ("streamlit run app.py --server.port 8501", None, 8501),
    ("jekyll serve -P 4000", None, 4000),
    ("godoc -http=:6060", None, 6060),
    ("go run . -addr :8081", None, 8081),
    ("mkdocs serve --dev-addr 127.0.0.1:8013", None, 8013),
    ("python -m SimpleHTTPServer 8014", None, 8014),
    ("uvicorn app --port=8015;", None, 8015),
    ("cat log | grep x && serve --port 9016", None, 9016),
    # nothing to find, or nothing valid
    ("node worker.js", None, None),
    ("mkdir -p build", None, None),
    ("uvicorn app:app --port 0", None, None),
    ("uvicorn app:app --port 70000", None, None),
    ("uvicorn app:app --port $NOPE", None, None),
    ("node server.js", {"PORT": "abc"}, None),
    ("echo 'unbalanced", None, None),
    ("python -m http.server; echo 80", None, None),
    ("echo 'a b' ; sleep 3", None, None),
    ('sh -c \'sh -c "sh -c \\"x --port 9\\""\'', None, None),  # nested past two levels: not looked into
    ("sleep 10:30", None, None),
    ("serve --port \u00b2", None, None),  # a superscript two is a digit to str.isdigit(), not a port
    ("serve --port \u0668\u0660\u0660\u0660", None, None),
    ("", None, None),
    ([], None, None),
]


@pytest.mark.parametrize(("command", "env", "port"), COMMAND_CASES)
def test_port_from_command(command, env, port):
    assert port_from_command(command, env) == port


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("", True),
        ("*", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("127.0.0.1", True),
        ("127.255.0.9", True),
        ("0.0.0.0", True),
        ("::", True),
        ("[::]", True),
        ("[::1]", True),
        ("0:0:0:0:0:0:0:1", True),
        ("10.0.0.5", False),
        ("192.168.1.4", False),
        ("[fe80::1]", False),
        ("example.com", False),
        ("localhost.example.com", False),
        ("12:30", False),
        ("999.0.0.1", False),
    ],
)
def test_is_local_host(host, local):
    assert is_local_host(host) is local


def test_port_from_command_refuses_bytes():
    with pytest.raises(TypeError, match="command"):
        port_from_command(b"serve --port 80")


# --- parse_ready -----------------------------------------------------------------------------------

PARSE_CASES = [
    (None, ReadySpec()),
    ("auto", ReadySpec()),
    ("", ReadySpec()),
    ("none", ReadySpec(kind="none")),
    (False, ReadySpec(kind="none")),
    ("tcp:8000", ReadySpec(kind="tcp", port=8000)),
    ("tcp: 8000 ", ReadySpec(kind="tcp", port=8000)),
    ("tcp:localhost:8001", ReadySpec(kind="tcp", host="localhost", port=8001)),
    ("tcp:[::1]:8002", ReadySpec(kind="tcp", host="::1", port=8002)),
    ("tcp://127.0.0.1:8003", ReadySpec(kind="tcp", port=8003)),
    (8004, ReadySpec(kind="tcp", port=8004)),
    ({"tcp": 8005}, ReadySpec(kind="tcp", port=8005)),
    ({"tcp": 8006, "host": "::1"}, ReadySpec(kind="tcp", host="::1", port=8006)),
    (
        {"tcp": "127.0.0.2:8007", "interval": 1, "timeout": 0.5},
        ReadySpec(kind="tcp", host="127.0.0.2", port=8007, interval=1.0, timeout=0.5),
    ),
    ("http://127.0.0.1:8000/health", ReadySpec(kind="http", url="http://127.0.0.1:8000/health")),
    ("https://localhost/", ReadySpec(kind="http", url="https://localhost/")),
    ({"http": "http://localhost:9/x", "status": 204}, ReadySpec(kind="http", url="http://localhost:9/x", status=204)),
    ("log:ready in \\d+ms", ReadySpec(kind="log", pattern="ready in \\d+ms")),
    ({"log": "^Started"}, ReadySpec(kind="log", pattern="^Started")),
    ("exec:pg_isready -q", ReadySpec(kind="exec", command="pg_isready -q")),
    ({"exec": ["pg_isready", "-q"]}, ReadySpec(kind="exec", command=("pg_isready", "-q"))),
    ({"auto": True, "interval": 0.1}, ReadySpec(interval=0.1)),
]


@pytest.mark.parametrize(("value", "spec"), PARSE_CASES)
def test_parse_ready(value, spec):
    assert parse_ready(value) == spec


def test_parse_ready_compiles_the_log_pattern():
    spec = parse_ready("log:ready in (\\d+)ms")
    assert spec.regex is not None and spec.regex.search("ready in 12ms")
    assert parse_ready(spec) is spec
    assert ReadySpec(kind="log", pattern="x+").regex is not None


BAD_CASES = [
    ("tcp:0", ValueError, "1-65535"),
    ("tcp:65536", ValueError, "1-65535"),
    ("tcp:-1", ValueError, "1-65535"),
    ("tcp:host:99999", ValueError, "1-65535"),
    (0, ValueError, "1-65535"),
    (70000, ValueError, "1-65535"),
    ({"tcp": 0}, ValueError, "1-65535"),
    ("tcp:", ValueError, "no port"),
    ("tcp:web", ValueError, "no port"),
    ("tcp:[::1]", ValueError, "no port"),
    ("tcp:+80", ValueError, "no port"),
    ("tcp:\u0668\u0660\u0660\u0660", ValueError, "no port"),
    ("http://[::1:80/", ValueError, "IPv6"),
    ("http://x:abc/", ValueError, "Port"),
    ({"tcp": 8000, "timeout": 10**400}, ValueError, "timeout"),
    ({"tcp": 8000, "interval": -1}, ValueError, "interval"),
    ("http://localhost:70000/", ValueError, "out of range|port"),
    ("http://localhost:0/", ValueError, "1-65535"),
    ("http://:80/", ValueError, "no host"),
    ({"http": "ftp://x/"}, ValueError, "http://"),
    ({"http": "http://x/", "status": 99}, ValueError, "100-599"),
    ({"http": "http://x/", "status": "200"}, TypeError, "status"),
    ({"http": 80}, TypeError, "URL"),
    ("log:(unclosed", ValueError, "not a valid regular expression"),
    ("log:", ValueError, "empty"),
    ({"log": 3}, TypeError, "pattern"),
    ("exec:", ValueError, "empty"),
    ("exec:   ", ValueError, "empty"),
    ({"exec": []}, ValueError, "empty"),
    ({"exec": ["ok", 3]}, TypeError, "strings"),
    ({"exec": 5}, TypeError, "argv"),
    ("tpc:8000", ValueError, "unknown kind 'tpc'"),
    ("ready", ValueError, "unknown kind"),
    ("8000", ValueError, "unknown kind"),
    ({"tcp": 1, "log": "x"}, ValueError, "exactly one"),
    ({"interval": 1}, ValueError, "exactly one"),
    ({"kind": "tcp", "port": 8000}, ValueError, "unknown key|kind as the key"),
    ({"tcp": 8000, "status": 200}, ValueError, "status"),
    ({"log": "x", "host": "h"}, ValueError, "host"),
    ({"tcp": 8000, "interval": 0}, ValueError, "interval"),
    ({"tcp": 8000, "timeout": float("nan")}, ValueError, "timeout"),
    ({"tcp": 8000, "timeout": "1"}, TypeError, "timeout"),
    ({"tcp": True}, TypeError, "bool"),
    ({"tcp": 8000, "host": ""}, ValueError, "host"),
    ({"auto": "x"}, ValueError, "no argument"),
    ({1: "x"}, TypeError, "keys"),
    (True, TypeError, "True"),
    (1.5, TypeError, "float"),
    ([8000], TypeError, "list"),
]


@pytest.mark.parametrize(("value", "error", "match"), BAD_CASES)
def test_parse_ready_refuses(value, error, match):
    with pytest.raises(error, match=match):
        parse_ready(value)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: tcp_probe("127.0.0.1", 70000, 1), ValueError, "1-65535"),
        (lambda: tcp_probe("127.0.0.1", 0, 1), ValueError, "1-65535"),
        (lambda: tcp_probe("127.0.0.1", True, 1), TypeError, "port"),
        (lambda: tcp_probe(None, 80, 1), TypeError, "host"),
        (lambda: tcp_probe("127.0.0.1", 80, -1), ValueError, "timeout"),
        (lambda: tcp_probe("127.0.0.1", 80, float("nan")), ValueError, "timeout"),
        (lambda: http_probe("ftp://localhost/", None, 1), ValueError, "http://"),
        (lambda: http_probe(b"http://localhost/", None, 1), TypeError, "url"),
        (lambda: http_probe("http://localhost/", None, "1"), TypeError, "timeout"),
        (lambda: exec_probe("true", -1), ValueError, "timeout"),
    ],
)
def test_probes_refuse_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        run(call())


def test_port_answers_refuses_bad_arguments():
    with pytest.raises(ValueError, match="1-65535"):
        port_answers("127.0.0.1", 65536)
    with pytest.raises(TypeError):
        port_answers(80, 80)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"kind": "maybe"}, ValueError, "kind"),
        ({"kind": "tcp"}, ValueError, "needs a port"),
        ({"kind": "tcp", "port": 0}, ValueError, "1-65535"),
        ({"kind": "tcp", "port": "80"}, TypeError, "int"),
        ({"kind": "http"}, ValueError, "needs a url"),
        ({"kind": "log"}, ValueError, "needs a pattern"),
        ({"kind": "log", "pattern": "("}, ValueError, "regular expression"),
        ({"kind": "exec"}, ValueError, "needs a command"),
    ],
)
def test_ready_spec_built_by_hand_is_checked(kwargs, error, match):
    with pytest.raises(error, match=match):
        ReadySpec(**kwargs)


# --- real servers ----------------------------------------------------------------------------------


def wait_answers(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not port_answers("127.0.0.1", port):
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing answers on port {port}")
        time.sleep(0.02)


class Server:
    """A contained `python -m http.server` on a free loopback port (or a script given)."""

    def __init__(self, args=None, port=None, wait=True):
        self.port = port or free_port()
        argv = args or [sys.executable, "-u", "-m", "http.server", str(self.port), "--bind", "127.0.0.1"]
        self.tree = spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if wait:
            wait_answers(self.port)

    def close(self):
        self.tree.terminate(grace=1)
        if self.tree.stdout is not None:
            self.tree.stdout.close()


@pytest.fixture
def servers():
    started: list[Server] = []

    def start(*args, **kwargs):
        server = Server(*args, **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def http_server(servers):
    return servers()


def run(coro):
    return asyncio.run(coro)


def test_port_answers(http_server):
    assert port_answers("127.0.0.1", http_server.port)
    assert port_answers("localhost", http_server.port)
    assert not port_answers("127.0.0.1", free_port())
    assert not port_answers("no-such-host.invalid", http_server.port)


def test_tcp_probe(http_server):
    assert run(tcp_probe("127.0.0.1", http_server.port, 2.0))
    assert run(tcp_probe("localhost", http_server.port, 2.0))
    assert not run(tcp_probe("127.0.0.1", free_port(), 2.0))
    assert not run(tcp_probe("no-such-host.invalid", 80, 2.0))


def test_http_probe(http_server):
    base = f"http://127.0.0.1:{http_server.port}"
    assert run(http_probe(base + "/", None, 5.0))
    assert run(http_probe(base + "/", 200, 5.0))
    assert not run(http_probe(base + "/", 204, 5.0))
    assert not run(http_probe(base + "/missing", None, 5.0))  # 404 is an answer, not a ready one
    assert run(http_probe(base + "/missing", 404, 5.0))
    assert not run(http_probe(f"http://127.0.0.1:{free_port()}/", None, 5.0))
    assert not run(http_probe(f"https://127.0.0.1:{http_server.port}/", None, 5.0))  # TLS to a plain server


def test_http_probe_gives_up_on_a_silent_server():
    """A server that accepts and never answers is not ready, and the probe returns within its timeout."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(5)
        port = listener.getsockname()[1]
        t0 = time.monotonic()
        assert not run(http_probe(f"http://127.0.0.1:{port}/", None, 0.5))
        assert time.monotonic() - t0 < 5


def test_exec_probe_exit_status(tmp_path):
    assert run(exec_probe("true", 10))
    assert not run(exec_probe("false", 10))
    assert not run(exec_probe("exit 3", 10))
    assert run(exec_probe([sys.executable, "-c", "pass"], 10))
    assert not run(exec_probe(["/nonexistent/ready-check"], 10))
    assert run(exec_probe('test "$READY_X" = yes', 10, env={"PATH": "/usr/bin:/bin", "READY_X": "yes"}))
    (tmp_path / "marker").write_text("")
    assert run(exec_probe("test -e marker", 10, cwd=tmp_path))


def test_exec_probe_against_a_server(http_server):
    check = [sys.executable, "-c", f"import socket; socket.create_connection(('127.0.0.1', {http_server.port}), 2)"]
    assert run(exec_probe(check, 20))


def test_exec_probe_timeout_leaves_nothing():
    t0 = time.monotonic()
    assert not run(exec_probe("sleep 60", 0.5))
    assert time.monotonic() - t0 < 15
    # the no-leftover fixture checks that the sleep is gone


def test_exec_probe_timeout_kills_a_term_ignorer():
    t0 = time.monotonic()
    stubborn = ignore_polite_signals_sh()
    assert not run(exec_probe(f'{stubborn}; sleep 60 & sh -c "{stubborn}; sleep 61"; wait', 0.5))
    assert time.monotonic() - t0 < 15


def test_exec_probe_that_cannot_start_is_not_ready(tmp_path):
    assert not run(exec_probe("true", 5, cwd=tmp_path / "missing"))
    assert not run(exec_probe([str(tmp_path)], 5))  # a directory is not a program


def test_exec_probe_ends_what_the_command_left_behind():
    """A check that exits 0 but leaves a background child and a setsid daemon: ready, and nothing outlives it."""
    assert run(exec_probe("sleep 60 & setsid sleep 61 & exit 0", 10))


def test_exec_probe_cancelled_leaves_nothing():
    async def main():
        task = asyncio.ensure_future(exec_probe("sleep 60 & sleep 62", 30))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())


def test_exec_probe_cancelled_by_a_timeout_around_it():
    async def main():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(exec_probe("sleep 60", 30), 0.3)

    run(main())


# --- the Detector ----------------------------------------------------------------------------------


async def until_ready(detector: Detector, tree=None, timeout: float = 20.0) -> str:
    """Output lines and probe rounds, as the supervisor drives them, until the detector says ready."""
    loop = asyncio.get_running_loop()
    ring = LogRing()
    transport = None
    if tree is not None:
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), tree.stdout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if transport is not None:
                try:
                    data = await asyncio.wait_for(reader.read(65536), detector.spec.interval / 5)
                except asyncio.TimeoutError:
                    data = None
                for row in ring.feed(data) if data else ring.close() if data == b"" else []:
                    how = detector.on_line(row.text)
                    if how:
                        return how
            else:
                await asyncio.sleep(detector.spec.interval / 5)
            how = await detector.probe()
            if how:
                return how
        raise AssertionError("never ready")
    finally:
        if transport is not None:
            transport.close()


def test_detector_ready_by_url_from_real_output(servers):
    server = servers(wait=False)
    detector = Detector(ReadySpec(kind="auto", interval=60), ["python", "-m", "http.server"], {}, None)
    assert detector.port is None  # http.server's default port is not in the command: only the output tells
    how = run(until_ready(detector, server.tree))
    assert how == "url" and detector.ready_by == "url"
    assert detector.url == f"http://127.0.0.1:{server.port}/"
    assert detector.port == server.port
    assert run(detector.probe()) is None  # already ready: nothing more to report


def _python_with(module: str) -> str | None:
    """An interpreter here that can import module (the venv's, or the one it was made from), or None."""
    candidates = [sys.executable, getattr(sys, "_base_executable", None), shutil.which("python3")]
    for python in dict.fromkeys(c for c in candidates if c):
        if subprocess.run([python, "-c", f"import {module}"], capture_output=True, timeout=60).returncode == 0:
            return python
    return None


def test_detector_ready_by_flasks_own_output(servers, tmp_path):
    """The real flask development server: its "Running on http://127.0.0.1:PORT" line proves it."""
    python = _python_with("flask")
    if python is None:
        pytest.skip("flask is not installed for any Python here")
    (tmp_path / "app.py").write_text(
        "from flask import Flask\napp = Flask(__name__)\n@app.get('/')\ndef root():\n    return 'ok'\n"
    )
    port = free_port()
    argv = [python, "-m", "flask", "--app", str(tmp_path / "app.py"), "run", "--port", str(port)]
    server = servers(argv, port=port, wait=False)
    assert port_from_command(argv) == port
    detector = Detector(ReadySpec(interval=60), "flask run", {})  # no port known: only its output can tell
    assert run(until_ready(detector, server.tree, timeout=60)) == "url"
    assert detector.url == f"http://127.0.0.1:{port}/"
    assert run(http_probe(detector.url, 200, 5))


def test_detector_ready_by_port_probe(servers):
    port = free_port()
    detector = Detector(parse_ready(None), f"python -m http.server {port}", {})
    assert detector.port == port
    assert not detector.preflight()
    servers(port=port, wait=False)
    assert run(until_ready(detector)) == "port"


def test_detector_ready_by_given_port(servers):
    port = free_port()
    detector = Detector(parse_ready(None), "./serve", {}, port=port)
    assert not detector.preflight()
    servers(port=port, wait=False)
    assert run(until_ready(detector)) == "port"


def test_detector_ready_by_tcp_and_http_specs(http_server):
    tcp = Detector(parse_ready(f"tcp:{http_server.port}"), "x")
    assert run(until_ready(tcp)) == "tcp"
    http = Detector(parse_ready({"http": f"http://127.0.0.1:{http_server.port}/", "status": 200}), "x")
    assert run(until_ready(http)) == "http"
    assert http.url == f"http://127.0.0.1:{http_server.port}/"
    wrong = Detector(parse_ready({"http": f"http://127.0.0.1:{http_server.port}/nope", "status": 200}), "x")
    assert run(wrong.probe()) is None


def test_detector_ready_by_exec(http_server):
    check = f"{sys.executable} -c \"import socket; socket.create_connection(('127.0.0.1', {http_server.port}), 2)\""
    detector = Detector(parse_ready({"exec": check, "timeout": 20}), "x")
    assert run(until_ready(detector)) == "exec"


def test_detector_ready_by_log_line():
    detector = Detector(parse_ready("log:ready in \\d+ ?ms"), "x")
    assert detector.on_line("compiling...") is None
    assert run(detector.probe()) is None
    assert detector.on_line("\x1b[32mready\x1b[0m in 412ms") == "log"
    assert detector.on_line("ready in 1ms") is None  # reported once


SLOW_PHRASE_SERVER = textwrap.dedent(
    """
    import socket, sys, time
    port = int(sys.argv[1])
    print("Example app listening on port %d" % port, flush=True)  # said before it is true
    time.sleep(0.5)
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen(5)
    while True:
        s.accept()[0].close()
    """
)


def test_detector_phrase_confirmed_once_the_port_answers(servers):
    port = free_port()
    server = servers([sys.executable, "-c", SLOW_PHRASE_SERVER, str(port)], port=port, wait=False)
    detector = Detector(ReadySpec(interval=0.1), "node app.js", {})
    assert detector.port is None
    assert run(until_ready(detector, server.tree)) == "phrase"
    assert detector.port == port
    assert detector.url is None  # a phrase says a port, not a protocol: no URL is made up


def test_detector_url_in_output_is_confirmed_before_it_counts():
    port = free_port()
    detector = Detector(ReadySpec(), "x")
    assert detector.on_line(f"will listen on http://localhost:{port}/ soon") is None
    assert detector.ready_by is None and run(detector.probe()) is None
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen(5)
        assert run(detector.probe()) == "url"


def test_detector_url_proven_is_the_one_that_answered():
    """Two URLs printed before anything listens: the one that answers first is the service's."""
    first, second = free_port(), free_port()
    detector = Detector(ReadySpec(), "x")
    assert detector.on_line(f"docs at http://localhost:{first}/docs") is None
    assert detector.on_line(f"Local: http://127.0.0.1:{second}/") is None
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", second))
        listener.listen(5)
        assert run(detector.probe()) == "url"
    assert (detector.url, detector.port) == (f"http://127.0.0.1:{second}/", second)


@pytest.mark.parametrize(
    "line",
    [
        "[vite] proxying /api to http://localhost:{port}/",
        "[HPM] Proxy created: /  -> http://127.0.0.1:{port}",
        "connecting to database at http://localhost:{port}/",
        "upstream http://127.0.0.1:{port} is up",
        "forwarding to http://localhost:{port}/",
        "proxy target: http://0.0.0.0:{port}",
    ],
)
def test_detector_ignores_lines_about_other_servers(http_server, line):
    """A proxy target or a database that answers is not the service being ready."""
    detector = Detector(ReadySpec(), "vite", {})
    assert detector.on_line(line.format(port=http_server.port)) is None
    assert run(detector.probe()) is None and detector.url is None


def test_detector_believes_a_self_described_backend(http_server):
    for line in (
        "Backend server listening on port {port}",
        "Connected to MongoDB, server listening on port {port}",
        "Local: http://localhost:{port}/ (proxying /api to the backend)",
        "Local: http://0.0.0.0:{port}/ (proxying /api to the backend)",
    ):
        detector = Detector(ReadySpec(), "x")
        assert detector.on_line(line.format(port=http_server.port)) is None  # a line only names a candidate
        assert run(detector.probe()) in ("phrase", "url")


def test_detector_keeps_few_candidates():
    detector = Detector(ReadySpec(), "x")
    for _ in range(30):
        detector.on_line(f"GET http://localhost:{free_port()}/x")
    assert len(detector._candidates) == 8


def test_detector_learns_the_url_whatever_the_kind(http_server):
    line = f"Serving HTTP on 127.0.0.1 port {http_server.port} (http://127.0.0.1:{http_server.port}/) ..."
    for ready in ("log:^never$", f"tcp:{free_port()}", "exec:false"):
        detector = Detector(parse_ready(ready), "x")
        assert detector.on_line(line) is None
        assert detector.url == f"http://127.0.0.1:{http_server.port}/" and detector.ready_by is None


def test_preflight_skips_a_remote_host(http_server):
    """tcp:HOST:PORT on another machine cannot be the service's own port: answering there is no pre-occupation."""
    detector = Detector(parse_ready(f"tcp:127.0.0.1:{http_server.port}"), "x")
    assert detector.preflight()
    remote = Detector(parse_ready({"tcp": http_server.port, "host": "db.example.invalid"}), "x")
    assert not remote.preflight()


def test_detector_ignores_non_loopback_urls():
    detector = Detector(ReadySpec(), "x")
    assert detector.on_line("Network: http://192.168.7.7:5173/") is None
    assert detector.url is None and detector._candidates == {}


def test_preoccupied_port_never_makes_a_service_look_ready(http_server):
    """Somebody else's server on our port: pre-flight says so, and neither probes nor its URL count."""
    port = http_server.port
    detector = Detector(parse_ready(None), f"python -m http.server {port}", {})
    assert detector.preflight() is True and detector.port_preoccupied
    line = f"Serving HTTP on 0.0.0.0 port {port} (http://0.0.0.0:{port}/) ..."
    assert detector.on_line(line) is None
    assert detector.url is None  # a stranger's URL is not ours
    assert detector.on_line(f"listening on port {port}") is None

    async def rounds():
        return [await detector.probe() for _ in range(3)]

    assert run(rounds()) == [None, None, None]
    tcp = Detector(parse_ready(f"tcp:{port}"), "x")
    assert tcp.preflight() and run(tcp.probe()) is None
    http = Detector(parse_ready(f"http://127.0.0.1:{port}/"), "x")
    assert http.preflight() and run(http.probe()) is None
    # a URL on another port still counts: the service picked a free one (vite does)
    with socket.socket() as own:
        own.bind(("127.0.0.1", 0))
        own.listen(5)
        assert detector.on_line(f"Local: http://localhost:{own.getsockname()[1]}/") is None
        assert run(detector.probe()) == "url"


@pytest.fixture
def ipv6_listener():
    """A TCP listener on [::1] only (skipped where this machine has no IPv6 loopback)."""
    try:
        sock = socket.socket(socket.AF_INET6)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(("::1", 0))
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    sock.listen(5)
    yield sock
    sock.close()


def test_a_server_on_ipv6_loopback_only(ipv6_listener):
    port = ipv6_listener.getsockname()[1]
    assert port_answers("localhost", port) and port_answers("::1", port) and port_answers("[::1]", port)
    assert not port_answers("127.0.0.1", port)
    detector = Detector(ReadySpec(), "x")
    assert detector.on_line(f"listening on http://[::]:{port}/") is None
    assert run(detector.probe()) == "url"
    assert detector.url == f"http://[::1]:{port}/"
    by_port = Detector(ReadySpec(), f"serve --port {port}")
    assert run(by_port.probe()) == "port"  # the auto probe tries ::1 after 127.0.0.1


def test_preflight_sees_a_stranger_on_ipv6_loopback(ipv6_listener):
    port = ipv6_listener.getsockname()[1]
    detector = Detector(ReadySpec(), f"serve --port {port}")
    assert detector.preflight() and run(detector.probe()) is None


def test_preoccupied_given_as_a_flag():
    detector = Detector(ReadySpec(), "x", port=free_port(), preoccupied=True)
    assert detector.port_preoccupied and run(detector.probe()) is None


def test_detector_none_is_never_ready(http_server):
    detector = Detector(parse_ready("none"), f"python -m http.server {http_server.port}", {})
    assert detector.on_line(f"http://127.0.0.1:{http_server.port}/") is None
    assert run(detector.probe()) is None


def test_detector_refuses_bad_arguments():
    with pytest.raises(ValueError, match="1-65535"):
        Detector(ReadySpec(), "x", port=0)
    with pytest.raises(TypeError, match="port"):
        Detector(ReadySpec(), "x", port="8000")
    with pytest.raises(TypeError, match="ReadySpec"):
        Detector("tcp:8000", "x")


@pytest.fixture
def other_loopback_listener():
    """A TCP listener on 127.0.0.2 (another loopback address), somebody else's."""
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.2", 0))
    except OSError as exc:
        sock.close()
        pytest.skip(f"127.0.0.2 cannot be bound here: {exc}")
    sock.listen(5)
    yield sock
    sock.close()


def test_preflight_sees_a_stranger_on_another_loopback_address(other_loopback_listener):
    port = other_loopback_listener.getsockname()[1]
    assert local_listener(port)
    detector = Detector(ReadySpec(), "sleep 30", {}, port=port)
    assert detector.preflight() and detector.port_preoccupied
    assert detector.on_line(f"Running on http://127.0.0.2:{port}/") is None
    assert run(detector.probe()) is None


@pytest.mark.parametrize(
    ("text", "local"),
    [
        ("0100007F", True),  # 127.0.0.1 as the kernel prints it (little-endian words)
        ("0200007F", True),  # 127.0.0.2
        ("00000000", True),  # 0.0.0.0
        ("0500000A", False),  # 10.0.0.5
        ("00000000000000000000000001000000", True),  # ::1
        ("00000000000000000000000000000000", True),  # ::
        ("0000000000000000FFFF00000100007F", True),  # ::ffff:127.0.0.1
        ("0000000000000000FFFF00000500000A", False),  # ::ffff:10.0.0.5
        ("zz", False),
    ],
)
def test_proc_net_addresses(text, local):
    if sys.byteorder != "little":
        pytest.skip("the table is written in little-endian words")
    assert _local_hex_address(text) is local


def test_a_port_another_service_holds_never_proves_readiness(http_server):
    port = http_server.port
    held = {port}
    detector = Detector(ReadySpec(interval=60), "worker", {}, foreign=lambda: held)
    assert detector.on_line(f"polling jobs from http://127.0.0.1:{port}/jobs") is None
    assert detector.on_line(f"listening on port {port}") is None
    assert run(detector.probe()) is None
    given = Detector(ReadySpec(), "worker", {}, port=port, foreign=lambda: held)
    assert run(given.probe()) is None
    held.clear()  # once the other service is gone, the port is anybody's again
    assert detector.on_line(f"listening on port {port}") is None
    assert run(detector.probe()) == "phrase"


def test_a_client_printing_its_servers_url_is_not_ready(servers):
    web_port = free_port()
    client = f"sleep 0.5; echo 'polling jobs from http://127.0.0.1:{web_port}/jobs'; sleep 60"

    async def main():
        from proctree import Supervisor

        async with Supervisor(ready_timeout=2.0, stop_grace=1.0) as sup:
            web = await sup.start(
                [sys.executable, "-u", "-m", "http.server", str(web_port), "--bind", "127.0.0.1"], name="web"
            )
            assert (await sup.wait(web.id, timeout=20)).status == "ready"
            worker = await sup.start(client, name="worker")
            done = await sup.wait(worker.id, timeout=20)
            assert done.status == "running" and done.ready_by is None, done

    run(asyncio.wait_for(main(), 60))


def test_two_services_given_one_port_are_refused():
    port = free_port()

    async def main():
        from proctree import ServiceSpec, Supervisor, SupervisorError

        async with Supervisor(stop_grace=1.0) as sup:
            with pytest.raises(ValueError, match=f"both given port {port}"):
                await sup.start_all([ServiceSpec("sleep 30", name="a", port=port), ServiceSpec("sleep 30", port=port)])
            assert sup.list() == []
            first = await sup.start("sleep 30", name="a", port=port)
            with pytest.raises(SupervisorError, match=f"port {port} is already live service {first.id}"):
                await sup.start("sleep 30", name="b", port=port)
            await sup.stop(first.id)
            assert (await sup.start("sleep 30", name="b", port=port)).status == "starting"  # free again

    run(asyncio.wait_for(main(), 60))
