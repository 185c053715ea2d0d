"""Running pytest with proctree's plugin on a small suite written to a directory, in a subprocess.

The plugin makes that process a subreaper and marks its environment: never
the outer run's. Leaked processes report their pids through files, never
guessed (pids_in).
"""

import importlib.metadata
import os
import re
import subprocess
import sys
import textwrap
import time

from support.treekit import _PROCTREE_HOME


def _entry_point_registered():
    return any(ep.value == "proctree.pytest_plugin" for ep in importlib.metadata.entry_points(group="pytest11"))


def run_inner(tmp_path, files, *args, timeout=90, env=None):
    """Write files into tmp_path and run pytest there with the plugin; the CompletedProcess."""
    for name, body in files.items():
        (tmp_path / name).write_text(textwrap.dedent(body))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    if not _entry_point_registered():
        argv[3:3] = ["-p", "proctree.pytest_plugin"]
    full_env = dict(os.environ, PYTHONPATH=_PROCTREE_HOME, PYTHONDONTWRITEBYTECODE="1")
    full_env.update(env or {})
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=timeout, env=full_env)


def start_inner_until_ready(tmp_path, suite):
    """pytest --proctree-leaks=fail on suite (test_k.py) in the background, once its test wrote 'ready'; the Popen."""
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--proctree-leaks=fail"]
    if not _entry_point_registered():
        argv[3:3] = ["-p", "proctree.pytest_plugin"]
    (tmp_path / "test_k.py").write_text(suite)
    env = dict(os.environ, PYTHONPATH=_PROCTREE_HOME)
    inner = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "ready").exists(), "the inner run's test never started"
    return inner


def leak_section(out):
    """The plugin's "leaked processes" section of a run's output, without pytest's short summary after it.

    pytest's short summary repeats each error's whole message where it believes it runs on CI (CI or
    BUILD_NUMBER set) and only its first line elsewhere, so a count over the rest of the output would
    depend on the machine.
    """
    section = out.split("proctree: leaked processes")[-1]
    return _without_earlier_runs(re.split(r"=+ short test summary info =+", section)[0])


def own_report(text):
    """A run's output less what it says of earlier, killed runs (their lines, and the heading they may stand under)."""
    return _without_earlier_runs(text).replace("proctree: leaked processes", "")


def _without_earlier_runs(text):
    """text without the lines about processes an earlier, killed run left (the plugin ends those as a run starts):
    under xdist another test's inner run may have been killed a moment ago on purpose, and what it left is
    ended by whichever inner run starts next, which is no leak of that run's own."""
    return "\n".join(line for line in text.splitlines() if "left by an earlier run (" not in line)


def pids_in(tmp_path, name):
    path = tmp_path / name
    if not path.exists():
        return []
    return [int(x) for x in path.read_text().split()]


LEAKS = r"""
import multiprocessing, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))

def record(name, pid):
    with open(os.path.join(HERE, name), "a") as f:
        f.write(f"{pid}\n")

def test_popen_server_not_waited():
    p = subprocess.Popen(["sleep", "300"])
    record("popen.pids", p.pid)

def test_clean():
    subprocess.run(["true"], check=True)

def test_setsid_double_fork_daemon():
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, b"%d" % os.getpid())
            os.execvp("sleep", ["sleep", "300"])
        os._exit(0)
    os.close(w)
    record("daemon.pids", int(os.read(r, 32)))
    os.wait()

def test_scrubbed_environment():
    p = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!"], env={"PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE)
    record("scrubbed.pids", int(p.stdout.readline()))
    p.wait()

def _sleep():
    time.sleep(300)

def test_multiprocessing_child():
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=_sleep)
    proc.start()
    record("mp.pids", proc.pid)
"""


def clean_run(r):
    """The inner run passed, and reported no process."""
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    own = own_report(out)
    assert "leaked" not in own and "left running" not in own and "left by" not in own, out
    return out
