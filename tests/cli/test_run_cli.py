"""`proctree run`: exit status, signal forwarding, nothing left behind (even when it is SIGKILLed)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import proctree
from support.spawnkit import CGROUP_OK, DAEMONIZER, LINUX, alive, read_lines, wait_gone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
MODES = [
    pytest.param("cgroup", marks=pytest.mark.skipif(not CGROUP_OK, reason="no writable cgroup v2 here")),
    pytest.param("subreaper", marks=pytest.mark.skipif(not LINUX, reason="Linux-only")),
]


def run_cmd(*argv):
    return [sys.executable, "-m", "proctree", "run", *argv]


def env():
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.fixture
def procs():
    """`proctree run` processes a test starts; killed and reaped afterwards (their keepers then end the trees)."""
    made = []
    yield made
    for p in made:
        if p.poll() is None:
            p.kill()
        p.wait()


def start(procs, *argv, **kw):
    p = subprocess.Popen(run_cmd(*argv), env=env(), cwd=ROOT, **kw)
    procs.append(p)
    return p


@pytest.mark.parametrize("code", [0, 1, 7, 255])
def test_exit_status_is_the_commands(code):
    r = subprocess.run(run_cmd("--", "sh", "-c", f"exit {code}"), env=env(), cwd=ROOT, timeout=30)
    assert r.returncode == code


def test_signal_death_is_128_plus_n():
    r = subprocess.run(run_cmd("--", "sh", "-c", "kill -TERM $$"), env=env(), cwd=ROOT, timeout=30)
    assert r.returncode == 128 + signal.SIGTERM


def test_stdio_passes_through():
    r = subprocess.run(
        run_cmd("--", "sh", "-c", "cat; echo err >&2"),
        input=b"piped in\n",
        capture_output=True,
        env=env(),
        cwd=ROOT,
        timeout=30,
    )
    assert (r.returncode, r.stdout, r.stderr) == (0, b"piped in\n", b"err\n")


def test_missing_command_and_bad_options():
    r = subprocess.run(run_cmd("--", "proctree-no-such-command"), capture_output=True, env=env(), cwd=ROOT, timeout=30)
    assert r.returncode == 127 and b"command not found" in r.stderr
    r = subprocess.run(run_cmd(), capture_output=True, env=env(), cwd=ROOT, timeout=30)
    assert r.returncode == 2 and b"no command given" in r.stderr
    r = subprocess.run(run_cmd("--grace", "nan", "--", "true"), capture_output=True, env=env(), cwd=ROOT, timeout=30)
    assert r.returncode == 2 and b"--grace" in r.stderr
    r = subprocess.run(run_cmd("--contain", "jail", "--", "true"), capture_output=True, env=env(), cwd=ROOT, timeout=30)
    assert r.returncode == 2


@pytest.mark.parametrize("mode", MODES)
def test_forwards_sigint(procs, mode):
    script = (
        "import signal, sys, time\n"
        "def h(*a): print('got-int', flush=True); sys.exit(42)\n"
        "signal.signal(signal.SIGINT, h)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    p = start(procs, "--contain", mode, "--", sys.executable, "-c", script, stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"ready\n"
    p.send_signal(signal.SIGINT)
    assert p.stdout.readline() == b"got-int\n"
    assert p.wait(timeout=30) == 42


@pytest.mark.parametrize("mode", MODES)
def test_leftovers_are_ended_and_reported(procs, mode):
    r, w = os.pipe()
    try:
        p = start(
            procs,
            "--contain",
            mode,
            "--grace",
            "1",
            "--json",
            "--",
            sys.executable,
            "-c",
            DAEMONIZER,
            str(w),
            "0",
            "exit",
            pass_fds=(w,),
            stderr=subprocess.PIPE,
        )
        os.close(w)
        w = None
        pids = read_lines(r, 2)
        _, err = p.communicate(timeout=30)
    finally:
        os.close(r)
        if w is not None:
            os.close(w)
    assert p.returncode == 3
    assert not alive(pids["daemon"])
    rep = json.loads(err.decode().strip().splitlines()[-1])
    assert rep["ok"] and rep["returncode"] == 3 and rep["mode"] == mode
    assert pids["daemon"] in {m["pid"] for m in rep["found"]}


@pytest.mark.parametrize("mode", MODES)
def test_sigkill_of_proctree_run_leaves_nothing(procs, mode):
    r, w = os.pipe()
    try:
        p = start(
            procs,
            "--contain",
            mode,
            "--grace",
            "0.5",
            "--",
            sys.executable,
            "-c",
            DAEMONIZER,
            str(w),
            "1",
            "sleep",
            pass_fds=(w,),
        )
        os.close(w)
        w = None
        pids = read_lines(r, 2)
    finally:
        os.close(r)
        if w is not None:
            os.close(w)
    keeper = proctree.proc(pids["cmd"]).ppid
    tree = [keeper, pids["cmd"], pids["daemon"]]
    assert all(alive(x) for x in tree)
    p.kill()
    p.wait()
    assert wait_gone(tree, 3 * 0.5 + 0.5), [x for x in tree if alive(x)]


def test_keep_orphans_waits_for_them():
    t0 = time.monotonic()
    r = subprocess.run(
        run_cmd("--keep-orphans", "--", "sh", "-c", "(sleep 0.5; echo late) & exit 4"),
        capture_output=True,
        env=env(),
        cwd=ROOT,
        timeout=30,
    )
    assert r.returncode == 4 and r.stdout == b"late\n"
    assert time.monotonic() - t0 >= 0.5


def _ignoring_hup():
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # what nohup does before it execs


def test_under_nohup_a_hangup_reaches_neither_the_runner_nor_the_command(procs, pipe):
    """`nohup proctree run -- CMD &`: SIGHUP stays ignored for both, as for CMD started on its own."""
    r, w = pipe
    script = f"import os, signal, time; os.write({w}, b'cmd %d\\n' % os.getpid()); time.sleep(100)"
    p = start(procs, "--", sys.executable, "-c", script, preexec_fn=_ignoring_hup, pass_fds=(w,))
    os.close(w)
    cmd = read_lines(r, 1)["cmd"]
    p.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert p.poll() is None and alive(cmd), "a hangup ended a nohup'ed run"
    with open(f"/proc/{cmd}/status") as f:
        ignored = int(next(x for x in f if x.startswith("SigIgn:")).split()[1], 16)
    assert ignored & (1 << (signal.SIGHUP - 1)), "the command does not ignore SIGHUP"
    p.send_signal(signal.SIGTERM)
    assert p.wait(30) == 128 + signal.SIGTERM
    assert wait_gone([cmd], 5)


def _run_env(tmp_path, *args):
    cmd = [sys.executable, "-m", "proctree", "run", *args, "--", "sh", "-c", 'echo "$GREETING|$TARGET"']
    return subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=60, stdin=subprocess.DEVNULL)


def test_env_file_runs_cmd_with_the_files_variables_as_honcho_run(tmp_path):
    (tmp_path / ".env").write_text("GREETING=hello\nTARGET=world\n")
    (tmp_path / "other.env").write_text("TARGET=${GREETING}-there\n")
    assert _run_env(tmp_path).stdout == "|\n"  # no file asked for: none read
    assert _run_env(tmp_path, "--env-file").stdout == "hello|world\n"  # alone: .env
    r = _run_env(tmp_path, "--env-file", ".env", "--env-file", "other.env")  # later files win, and expand
    assert (r.returncode, r.stdout) == (0, "hello|hello-there\n"), r.stderr
    r = _run_env(tmp_path, "--env-file", "missing.env")
    assert r.returncode == 2 and r.stderr.startswith("proctree run: --env-file: "), r.stderr
