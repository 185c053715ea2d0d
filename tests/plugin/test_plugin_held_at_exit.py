"""What a live object still holds at the session's end is checked after pytest exits, after every atexit handler.

A library that ends its processes in an atexit handler (execnet's default
group) is no leak: the plugin spares what is held at the session's end, and
the run's subreaper checks it once pytest's interpreter has exited. What
still runs then is reported on stderr and ended, and fails the run in fail
mode. Each case writes a small suite whose "library" (imported by the
conftest, so its atexit handler is registered before the plugin's configure,
as execnet's is) holds a server started at collection time.
"""

import os
import subprocess
import sys
import textwrap
import time

import pytest

from support.pluginrun import _entry_point_registered, clean_run, leak_section, pids_in, run_inner
from support.spawnkit import end_daemon, wait_gone
from support.treekit import _PROCTREE_HOME

LINUX = sys.platform.startswith("linux")
pytestmark = pytest.mark.skipif(not LINUX, reason="the late check is the run's subreaper's: Linux")

# A library with a default group that ends its processes only as the interpreter exits, as execnet's does.
LIBRARY = """
import atexit, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
GROUP = []

def start():
    p = subprocess.Popen(["sleep", "300"])
    with open(os.path.join(HERE, "server.pids"), "a") as f:
        f.write(f"{p.pid}\\n")
    GROUP.append(p)
    return p

def _at_exit():
    if os.environ.get("LIB_AT_EXIT") == "end":
        for p in GROUP:
            p.terminate()
            p.wait(10)
    elif os.environ.get("LIB_AT_EXIT") == "hang":  # a slow handler: pytest is killed meanwhile
        open(os.path.join(HERE, "at-exit"), "w").close()
        time.sleep(60)

atexit.register(_at_exit)
"""

SUITE = {
    "fakelib.py": LIBRARY,
    "conftest.py": "import fakelib\n",
    "test_held.py": """
        import fakelib

        SERVER = fakelib.start()  # a module global too, from collection on

        def test_uses_it():
            assert SERVER.poll() is None

        def test_other():
            pass
    """,
}

WAYS = [[], ["-n", "2"]]


@pytest.fixture
def servers(tmp_path):
    """The pids of the servers the inner run started (read after it); any still running is killed at the end."""
    yield lambda: pids_in(tmp_path, "server.pids")
    for pid in pids_in(tmp_path, "server.pids"):
        end_daemon(pid)


def _skip_without_xdist(way):
    if way:
        pytest.importorskip("xdist")


@pytest.mark.parametrize("way", WAYS, ids=lambda w: " ".join(w) or "no xdist")
@pytest.mark.parametrize("mode", ["fail", "warn", "kill"])
def test_a_server_its_library_ends_at_exit_is_no_leak(tmp_path, servers, mode, way):
    _skip_without_xdist(way)
    r = run_inner(tmp_path, SUITE, f"--proctree-leaks={mode}", *way, env={"LIB_AT_EXIT": "end"})
    out = clean_run(r)
    assert "2 passed" in out, out
    pids = servers()
    assert len(pids) == (2 if way else 1), out  # each xdist worker imports the test module
    assert wait_gone(pids, 5)


@pytest.mark.parametrize("way", WAYS, ids=lambda w: " ".join(w) or "no xdist")
@pytest.mark.parametrize(("mode", "rc"), [("fail", 1), ("warn", 0), ("kill", 0)])
def test_a_server_still_running_after_the_exit_is_reported_and_ended(tmp_path, servers, mode, rc, way):
    _skip_without_xdist(way)
    r = run_inner(tmp_path, SUITE, f"--proctree-leaks={mode}", *way, env={"LIB_AT_EXIT": "keep"})
    out = r.stdout + r.stderr
    pids = servers()
    assert pids, out
    assert r.returncode == rc, out
    assert "2 passed" in out and "ERROR" not in r.stdout, out  # no test is blamed: the session's end is
    # Said on stderr after pytest's own output (its terminal summary is over by then), each server once.
    assert "still held at the session's end were still running after pytest exited" in r.stderr, out
    for pid in pids:
        assert r.stderr.count(f"pid {pid} ") == 1, out
    if way:  # no heading says where: each line names its worker
        assert r.stderr.count("left by the run (still running at its end) on gw") == len(pids), out
    assert ("the run failed" in r.stderr) == (mode == "fail"), out
    assert wait_gone(pids, 1)  # ended before the run returned


def test_a_server_nothing_holds_at_the_sessions_end_is_reported_there_as_before(tmp_path, servers):
    files = dict(SUITE)
    files["test_zz_drop.py"] = """
        import fakelib, test_held
        def test_drops_it():
            fakelib.GROUP.clear()
            test_held.SERVER = None  # the dropped Popen goes to subprocess's list to reap: nothing holds it
    """
    r = run_inner(tmp_path, files, "--proctree-leaks=fail", env={"LIB_AT_EXIT": "keep"})
    out = r.stdout + r.stderr
    (pid,) = servers()
    assert r.returncode == 1, out
    assert f"pid {pid} " in leak_section(r.stdout) and "left by the run (still running at its end)" in r.stdout, out
    assert "after pytest exited" not in r.stderr, out
    assert wait_gone([pid], 1)


def test_without_the_subreaper_above_pytest_a_held_server_is_reported_at_the_sessions_end(tmp_path, servers):
    # Nothing outlives pytest to check it after its atexit handlers (docs/pytest.md): reported there, as before.
    r = run_inner(
        tmp_path, SUITE, "--proctree-leaks=fail", "-o", "proctree_subreaper=false", env={"LIB_AT_EXIT": "keep"}
    )
    out = r.stdout + r.stderr
    (pid,) = servers()
    assert r.returncode == 1, out
    assert f"pid {pid} " in leak_section(r.stdout) and "after pytest exited" not in r.stderr, out
    assert wait_gone([pid], 1)


def _start_inner(tmp_path, files):
    for name, body in files.items():
        (tmp_path / name).write_text(textwrap.dedent(body))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--proctree-leaks=fail"]
    if not _entry_point_registered():
        argv[3:3] = ["-p", "proctree.pytest_plugin"]
    env = dict(os.environ, PYTHONPATH=_PROCTREE_HOME, LIB_AT_EXIT="hang")
    return subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("who", ["the pytest started", "the pytest below the subreaper"])
def test_a_pytest_killed_while_its_atexit_handlers_run_leaves_nothing(tmp_path, servers, who):
    inner = _start_inner(tmp_path, SUITE)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "at-exit").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "at-exit").exists(), "the inner run never reached its atexit handler"
        (pid,) = servers()
        if who == "the pytest started":
            inner.kill()  # SIGKILL: the subreaper dies with it, and the pytest below; the watchdog is left
        else:
            below = _pytest_below(inner.pid)
            os.kill(below, 9)  # checked: the child of the subreaper, the child of the pytest we started
        inner.wait(30)
        assert wait_gone([pid], 15)
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait()


def _pytest_below(outer):
    """The pid of the pytest the subreaper runs: the only child of the only child of outer."""
    import proctree

    (helper,) = proctree.children(outer)
    kids = [p for p in proctree.children(helper.pid) if "pytest" in " ".join(proctree.cmdline(p.pid))]
    assert len(kids) == 1, kids
    return kids[0].pid


def _python(script):
    """script run by a fresh interpreter with this proctree; its CompletedProcess, which exited 0."""
    env = dict(os.environ, PYTHONPATH=_PROCTREE_HOME)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    return r


def test_contain_self_close_spares_what_it_is_told_with_what_that_started():
    script = r"""
import os, signal, subprocess, sys, proctree
box = proctree.contain_self(watchdog=False)
kept = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!; wait"], stdout=subprocess.PIPE)
below = int(kept.stdout.readline())
other = subprocess.Popen(["sleep", "300"])
me = proctree.proc(kept.pid)
try:
    box.close(spare=[(me.pid, me.start_time + 1)])  # not that process: nothing spared
except TypeError:
    sys.exit("refused a valid pair")
other.wait(10)
kept.wait(10)
try:
    print("left" if not proctree.proc(below).is_zombie else "ended")
except proctree.NoSuchProcess:
    print("ended")
"""
    r = _python(script)
    assert r.stdout.split()[-1] == "ended", r.stdout  # the identity did not match: ended with the rest

    script = r"""
import os, subprocess, sys, proctree
box = proctree.contain_self(watchdog=False)
kept = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!; wait"], stdout=subprocess.PIPE)
below = int(kept.stdout.readline())
other = subprocess.Popen(["sleep", "300"])
me = proctree.proc(kept.pid)
for bad in ([me.pid], [(me.pid, True)], [("1", 2)]):
    try:
        box.close(spare=bad)
        sys.exit(f"accepted {bad!r}")
    except TypeError:
        pass
box.close(spare=[(me.pid, me.start_time)])
other.wait(10)
alive = kept.poll() is None and proctree.proc(below).ppid == kept.pid
print("spared" if alive else "ended")
proctree.terminate_tree(kept.pid, grace=1)
kept.wait(10)
"""
    r = _python(script)
    assert r.stdout.split()[-1] == "spared", r.stdout


LATE_CHECK = r"""
import json, os, subprocess, sys
from proctree._plugin import reaper

mode, status, case = sys.argv[1], int(sys.argv[2]), sys.argv[3]
p = subprocess.Popen(["sleep", "300"])
start = reaper.started(p.pid)
listed = {"mode": mode, "settle": 0.2, "grace": 1.0, "procs": [[p.pid, start, "pid %d (sleep), left by a test" % p.pid]]}
if case == "reused":  # the listed pid now names another process: never signalled
    listed["procs"][0][1] = start - 1
path = os.path.join(sys.argv[4], "late.json")
shapes = {
    "empty": "",
    "malformed": "{",
    "a list": json.dumps(listed["procs"]),
    "no procs": json.dumps({k: v for k, v in listed.items() if k != "procs"}),
    "an odd mode": json.dumps(dict(listed, mode="explode")),
    "a text settle": json.dumps(dict(listed, settle="1")),
    "a pid as text": json.dumps(dict(listed, procs=[[str(p.pid), start, "x"]])),
    "pid 1": json.dumps(dict(listed, procs=[[1, start, "x"]])),
    "a short entry": json.dumps(dict(listed, procs=[[p.pid, start]])),
}
with open(path, "w") as f:
    f.write(shapes.get(case, json.dumps(listed)))
out = reaper.late_check(path, status)
print("status", out, "running", p.poll() is None, "file", os.path.exists(path))
p.kill(); p.wait()
"""


@pytest.mark.parametrize(
    ("mode", "status", "case", "expected"),
    [
        ("fail", 0, "listed", (256, False)),  # a leak fails a run that passed: exit 1
        ("fail", 1 << 8, "listed", (256, False)),  # a failed run keeps its status
        ("fail", 9, "listed", (9, False)),  # a pytest killed by SIGKILL: its status, and its leak ended
        ("warn", 0, "listed", (0, False)),
        ("kill", 0, "listed", (0, False)),
        ("fail", 0, "reused", (0, True)),  # another process now: not a leak, not signalled
        ("fail", 0, "empty", (0, True)),  # nothing was held at the session's end
        ("fail", 0, "malformed", (0, True)),
        # any other shape is read as nothing listed: nothing is signalled, the status is pytest's
        *(
            ("fail", 0, shape, (0, True))
            for shape in (
                "a list",
                "no procs",
                "an odd mode",
                "a text settle",
                "a pid as text",
                "pid 1",
                "a short entry",
            )
        ),
    ],
)
def test_the_subreapers_late_check(tmp_path, mode, status, case, expected):
    r = subprocess.run(
        [sys.executable, "-c", LATE_CHECK, mode, str(status), case, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=_PROCTREE_HOME),
    )
    assert r.returncode == 0, r.stderr
    words = r.stdout.split()
    assert (int(words[1]), words[3] == "True") == expected, r.stdout + r.stderr
    assert words[5] == "False", r.stdout  # read once and removed
    assert ("still running after pytest exited" in r.stderr) == (not expected[1]), r.stderr
    assert ("the run failed" in r.stderr) == (mode == "fail" and status == 0 and not expected[1]), r.stderr
