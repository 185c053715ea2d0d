"""Real daemons from Debian's packages, contained: nginx, redis-server --daemonize yes, tmux.

Each daemonizes (double-fork, new session), so a plain terminate_tree of the
command that started it cannot reach it. Spawned with keep_orphans=True (the
starting command exits at once, and the daemon is the point), found by
members(), and ended by terminate(): nothing of theirs is left and their
ports are free again. Skipped with a reason where the binary is missing
(.ci/apt-packages installs them in CI).
"""

import os
import shutil
import socket
import subprocess
import time

import pytest

from support.ports import answers as listening
from support.ports import free_port
from support.spawnkit import CGROUP_OK, LINUX, alive

MODES = [
    pytest.param("cgroup", marks=pytest.mark.skipif(not CGROUP_OK, reason="no writable cgroup v2 here")),
    pytest.param("subreaper", marks=pytest.mark.skipif(not LINUX, reason="Linux-only")),
]


def need(binary):
    path = shutil.which(binary) or next(
        (p for p in (f"/usr/sbin/{binary}", f"/usr/bin/{binary}") if os.access(p, os.X_OK)), None
    )
    if path is None:
        pytest.skip(f"{binary} is not installed (apt-get install it; CI does, from .ci/apt-packages)")
    return path


def port_is_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return not listening(port)


def pid_in(path):
    """The pid a daemon wrote to path, or None while the file is missing or not written whole yet (a daemon
    creates the file before it writes its pid)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return int(text) if text.strip().isdigit() and text.endswith("\n") else None


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def contained():
    """Trees a test spawns, torn down afterwards whatever happened."""
    made = []
    yield made
    for t in made:
        try:
            t.terminate(grace=2)
        except Exception:
            pass


def start(contained, argv, mode, **kw):
    from proctree._containment.spawn import spawn

    t = spawn(argv, contain=mode, keep_orphans=True, grace=3, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
    contained.append(t)
    rc = t.wait(timeout=30)
    err = t.stderr.read().decode(errors="replace")
    assert rc == 0, f"{argv[0]} failed to start ({rc}): {err}"
    return t


def end_and_check(t, names, port=None):
    members = t.members()
    assert {m.name for m in members} >= set(names), members
    assert all(m.ppid != t.pid for m in members), "the daemon should have left the command's tree"
    rep = t.terminate()
    assert rep.ok, rep
    assert {m.identity for m in members} <= {m.identity for m in rep.found}
    assert not any(alive(m.pid, m.start_time) for m in members)
    assert t.members() == []
    if port is not None:
        wait_for(lambda: port_is_free(port), 5, f"port {port} to be free")
    return rep


@pytest.mark.parametrize("mode", MODES)
def test_nginx(contained, tmp_path, mode):
    nginx = need("nginx")
    port = free_port()
    for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (tmp_path / d).mkdir()
    conf = tmp_path / "nginx.conf"
    conf.write_text(f"""
        daemon on;
        master_process on;
        worker_processes 2;
        pid {tmp_path}/nginx.pid;
        error_log {tmp_path}/error.log;
        events {{ worker_connections 64; }}
        http {{
            access_log off;
            client_body_temp_path {tmp_path}/body;
            proxy_temp_path {tmp_path}/proxy;
            fastcgi_temp_path {tmp_path}/fastcgi;
            uwsgi_temp_path {tmp_path}/uwsgi;
            scgi_temp_path {tmp_path}/scgi;
            server {{ listen 127.0.0.1:{port}; location / {{ return 200 "ok\\n"; }} }}
        }}
    """)
    t = start(contained, [nginx, "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "error.log")], mode)
    wait_for(lambda: listening(port), 10, "nginx to listen")
    wait_for(lambda: len(t.members()) >= 3, 10, "nginx's master and two workers")
    wait_for(lambda: pid_in(tmp_path / "nginx.pid"), 10, "nginx's pid file")
    master = pid_in(tmp_path / "nginx.pid")
    assert master in {m.pid for m in t.members()}
    end_and_check(t, ["nginx"], port)
    assert not alive(master)


@pytest.mark.parametrize("mode", MODES)
def test_redis_daemonize(contained, tmp_path, mode):
    redis = need("redis-server")
    port = free_port()
    t = start(
        contained,
        [
            redis,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--daemonize",
            "yes",
            "--dir",
            str(tmp_path),
            "--pidfile",
            str(tmp_path / "redis.pid"),
            "--logfile",
            str(tmp_path / "redis.log"),
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        mode,
    )
    wait_for(lambda: listening(port), 10, "redis to listen")
    wait_for(lambda: pid_in(tmp_path / "redis.pid"), 10, "redis's pid file")
    pid = pid_in(tmp_path / "redis.pid")
    assert pid != t.pid and pid in {m.pid for m in t.members()}
    end_and_check(t, ["redis-server"], port)
    assert not alive(pid)


@pytest.mark.parametrize("mode", MODES)
def test_tmux_new_session_detached(contained, tmp_path, mode):
    tmux = need("tmux")
    sock = str(tmp_path / "sock")
    t = start(
        contained,
        [tmux, "-S", sock, "new-session", "-d", "-s", "contained", "sleep 300"],
        mode,
        env={**os.environ, "TMUX": ""},
    )
    wait_for(lambda: any(m.name == "sleep" for m in t.members()), 10, "the tmux pane's command")
    names = {m.name for m in t.members()}
    assert any(n.startswith("tmux") for n in names), names
    end_and_check(t, ["sleep"])
    # A client (outside any tree, bounded) finds no server behind the socket any more.
    r = subprocess.run([tmux, "-S", sock, "has-session"], capture_output=True, timeout=10)
    assert r.returncode != 0
