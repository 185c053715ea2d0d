"""One polite stop signal through the Supervisor, `proctree up`, `proctree run` and `proctree kill`.

The "second stop signal forces" server of support/stopkit.py runs behind a
shell: a Supervisor string command (a shell line) and an argv command (sh
-c), a Procfile line (every one is a shell line), `proctree run -- sh -c`.
Whatever path stops it, it hears one stop signal and completes its drain;
the stop signal is the caller's choice at every level.
"""

import json
import os
import signal
import subprocess
import sys

import pytest

import proctree
from proctree import ServiceSpec, SyncSupervisor
from support.ports import free_base
from support.spawnkit import ALL_MODES, alive
from support.stopkit import events, shell_line, wait_ready, write_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))


def env():
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.fixture
def server(tmp_path):
    return write_server(tmp_path)


@pytest.fixture
def procs():
    """CLI processes a test starts: killed and reaped afterwards (their keepers then end their trees)."""
    made = []
    yield made
    for p in made:
        if p.poll() is None:
            p.kill()
        p.wait()
        for f in (p.stdout, p.stderr):
            if f:
                f.close()


# -- Supervisor --------------------------------------------------------------------


@pytest.mark.parametrize("form", ["string", "argv"])
@pytest.mark.parametrize("mode", ALL_MODES)
def test_supervisor_stop_lets_a_shell_wrapped_server_drain(tmp_path, server, mode, form):
    log = str(tmp_path / "log")
    line = shell_line(server, log)
    command = line if form == "string" else ["sh", "-c", line]
    with SyncSupervisor(contain=mode, stop_grace=10, ready_timeout=0.1) as sup:
        sup.start(command, name="web")
        pid = wait_ready(log)
        [stopped] = sup.stop("web")
        assert stopped.status == "stopped"
        assert events(log) == ["SIGTERM", "drained"], "the drain was cut (or the stop signal came twice)"
        assert not alive(pid)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_supervisor_service_stop_signal(tmp_path, server, mode):
    log = str(tmp_path / "log")
    with SyncSupervisor(contain=mode, stop_grace=10, ready_timeout=0.1) as sup:
        [snap] = sup.start_all([ServiceSpec(shell_line(server, log, "SIGINT"), name="web", stop_signal="INT")])
        wait_ready(log)
        sup.stop("web")
        assert events(log) == ["SIGINT", "drained"]


def test_supervisor_close_lets_it_drain_too(tmp_path, server):
    log = str(tmp_path / "log")
    with SyncSupervisor(stop_grace=10, ready_timeout=0.1) as sup:
        sup.start(shell_line(server, log), name="web")
        wait_ready(log)
    assert events(log) == ["SIGTERM", "drained"]


@pytest.mark.parametrize(
    "bad, exc", [("SIGKILL", ValueError), ("STOP", ValueError), ("NOPE", ValueError), (2.0, TypeError)]
)
def test_service_spec_refuses_a_bad_stop_signal(bad, exc):
    with pytest.raises(exc):
        ServiceSpec("true", stop_signal=bad)
    assert ServiceSpec("true", stop_signal="sigint").stop_signal == signal.SIGINT
    assert ServiceSpec("true", stop_signal=10).stop_signal == signal.SIGUSR1


# -- settings files ----------------------------------------------------------------


def test_stop_signal_setting_in_proctree_toml(tmp_path):
    (tmp_path / "Procfile").write_text("web: sleep 1\nworker: sleep 2\nother: sleep 3\n")
    (tmp_path / "proctree.toml").write_text(
        '[services.web]\nstop_signal = "SIGINT"\n[services.worker]\nstop_signal = 10\n'
    )
    plan = proctree.load_procfile(str(tmp_path / "Procfile"), env_files=[])
    got = {s.entry: s.stop_signal for s in plan.services}
    assert got == {"web": signal.SIGINT, "worker": signal.SIGUSR1, "other": None}


@pytest.mark.parametrize("value", ['"SIGKILL"', '"FOO"', "true", "9", '"SIG_IGN"'])
def test_a_bad_stop_signal_setting_names_the_file_and_entry(tmp_path, value):
    (tmp_path / "Procfile").write_text("web: sleep 1\n")
    (tmp_path / "pyproject.toml").write_text(f"[tool.proctree.services.web]\nstop_signal = {value}\n")
    with pytest.raises(ValueError, match=r"pyproject.toml.*web.*stop_signal"):
        proctree.load_procfile(str(tmp_path / "Procfile"), env_files=[])


# -- proctree up -------------------------------------------------------------------


def up(procs, folder, *args):
    p = subprocess.Popen(
        [sys.executable, "-m", "proctree", "up", "-f", str(folder / "Procfile"), "-p", str(free_base()), *args],
        cwd=str(folder),
        env=env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs.append(p)
    return p


def test_up_ctrl_c_lets_every_procfile_line_drain(tmp_path, server, procs):
    logs = [str(tmp_path / f"log{i}") for i in range(3)]
    (tmp_path / "Procfile").write_text("".join(f"web{i}: {shell_line(server, log)}\n" for i, log in enumerate(logs)))
    p = up(procs, tmp_path, "--grace", "10")
    for log in logs:
        wait_ready(log)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    for log in logs:
        assert events(log) == ["SIGTERM", "drained"], log


def test_up_stop_signal_option_and_setting(tmp_path, server, procs):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    (tmp_path / "Procfile").write_text(f"a: {shell_line(server, a, 'SIGINT')}\nb: {shell_line(server, b, 'SIGUSR1')}\n")
    (tmp_path / "proctree.toml").write_text('[services.b]\nstop_signal = "USR1"\n')
    p = up(procs, tmp_path, "--grace", "10", "--stop-signal", "INT")
    wait_ready(a)
    wait_ready(b)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)
    assert events(a) == ["SIGINT", "drained"]
    assert events(b) == ["SIGUSR1", "drained"]


def test_up_refuses_a_bad_stop_signal_option(tmp_path):
    (tmp_path / "Procfile").write_text("web: sleep 1\n")
    r = subprocess.run(
        [sys.executable, "-m", "proctree", "up", "-f", str(tmp_path / "Procfile"), "--stop-signal", "KILL"],
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "SIGKILL cannot be a stop signal" in r.stderr


# -- proctree run ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ALL_MODES)
def test_run_forwards_one_stop_and_the_leftover_drains(tmp_path, server, procs, mode):
    log = str(tmp_path / "log")
    p = subprocess.Popen(
        [sys.executable, "-m", "proctree", "run", "--contain", mode, "--grace", "10", "--json", "--"]
        + ["sh", "-c", shell_line(server, log)],
        env=env(),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs.append(p)
    pid = wait_ready(log)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)
    assert events(log) == ["SIGTERM", "drained"], "the forwarded TERM was followed by another"
    report = json.loads(p.stderr.read().strip().splitlines()[-1])
    assert report["ok"] and report["signals"].get(str(pid)) == "SIGTERM"


@pytest.mark.parametrize("mode", ALL_MODES)
def test_run_stop_signal_for_what_the_command_leaves(tmp_path, server, procs, mode):
    """The shell exits by itself and leaves the server: the teardown stops it with --stop-signal, once."""
    log = str(tmp_path / "log")
    line = f"{sys.executable} {server} {log} SIGINT & while ! test -s {log}; do sleep 0.01; done"
    r = subprocess.run(
        [sys.executable, "-m", "proctree", "run", "--contain", mode, "--grace", "10", "--stop-signal", "INT", "--"]
        + ["sh", "-c", line],
        env=env(),
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert r.returncode == 0
    assert events(log) == ["SIGINT", "drained"]


# -- proctree kill -----------------------------------------------------------------


def kill_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "proctree", "kill", *args], env=env(), capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("args, heard", [((), ["SIGTERM", "drained"]), (("--signal", "USR1"), ["SIGUSR1", "drained"])])
def test_kill_sends_one_stop_signal_and_no_hangup(tmp_path, server, args, heard):
    log = str(tmp_path / "log")
    name = heard[0]
    p = subprocess.Popen(["sh", "-c", shell_line(server, log, name)], start_new_session=True)
    try:
        pid = wait_ready(log)
        r = kill_cli(str(p.pid), "--grace", "10", "--json", *args)
        assert r.returncode == 0, r.stderr
        assert events(log) == heard
        rep = json.loads(r.stdout)
        assert rep["signals"][str(pid)] == name and "not hung up" in rep["extra"]["group"]
    finally:
        if p.poll() is None:
            proctree.terminate_tree(p.pid, grace=0)
        p.wait()


def test_kill_hangup_option(tmp_path, server):
    log = str(tmp_path / "log")
    p = subprocess.Popen(["sh", "-c", shell_line(server, log)], start_new_session=True)
    try:
        wait_ready(log)
        r = kill_cli(str(p.pid), "--grace", "10", "--json", "--hangup")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["extra"]["group"].startswith("SIGHUP to group")
    finally:
        if p.poll() is None:
            proctree.terminate_tree(p.pid, grace=0)
        p.wait()


@pytest.mark.parametrize("bad", ["KILL", "9", "STOP", "NOPE", "-1"])
def test_kill_refuses_a_bad_signal(bad):
    r = kill_cli(str(os.getpid()), "--signal", bad)
    assert r.returncode == 2 and "signal" in r.stderr
