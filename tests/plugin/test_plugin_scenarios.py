"""The plugin never fails a clean suite and never ends what is not a leak (issue 29's scenarios).

Each case writes a small suite, runs pytest on it in a subprocess with the
plugin, and checks the exit status and the report: xdist's own workers,
proctree.Popen's holder wherever it is started, a lazily started server a
session fixture's object holds, and a fixture's server that double-forks a
worker during a test are never blamed on a test nor ended; real leaks still
are, each named with its true owner, in every mode alike.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

from support.pluginrun import LEAKS, _entry_point_registered, clean_run, leak_section, pids_in, run_inner
from support.spawnkit import wait_gone
from support.treekit import _PROCTREE_HOME

LINUX = sys.platform.startswith("linux")
pytestmark = pytest.mark.skipif(not LINUX, reason="the subreaper and the tests' leaks are Linux's here")

CLEAN = {
    "test_a.py": """
        import subprocess, pytest
        @pytest.mark.xdist_group("g1")
        def test_one():
            subprocess.run(["true"], check=True)
        @pytest.mark.xdist_group("g1")
        def test_two():
            assert subprocess.check_output(["echo", "hi"]) == b"hi\\n"
    """,
    "test_b.py": """
        import multiprocessing, pytest
        def _f():
            pass
        @pytest.mark.xdist_group("g2")
        def test_three():
            p = multiprocessing.get_context("fork").Process(target=_f)
            p.start(); p.join()
        def test_four():
            pass
    """,
}

XDIST_WAYS = [["-n", "2"], ["-n", "auto"], ["-n", "2", "--dist", "loadfile"], ["-n", "2", "--dist", "loadgroup"]]


@pytest.mark.parametrize("subreaper", ["true", "false"])
@pytest.mark.parametrize("way", XDIST_WAYS, ids=lambda w: " ".join(w))
def test_a_clean_suite_passes_under_xdist(tmp_path, way, subreaper):
    pytest.importorskip("xdist")
    r = run_inner(tmp_path, CLEAN, "--proctree-leaks=fail", "-o", f"proctree_subreaper={subreaper}", *way)
    clean_run(r)


def test_a_clean_suite_passes_under_xdist_as_another_user(tmp_path):
    pytest.importorskip("xdist")
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run pytest as another uid")
    drop = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    probe = subprocess.run(
        [
            *drop,
            sys.executable,
            "-c",
            "import proctree, subprocess, sys, xdist; subprocess.run([sys.executable, '-c', ''], check=True)",
        ],
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=_PROCTREE_HOME),
        cwd="/",
    )
    if probe.returncode != 0:
        pytest.skip("that user cannot run this installation")
    where = tempfile.mkdtemp(prefix="proctree-plugin-")  # pytest's tmp_path is root's alone (0700)
    try:
        os.chmod(where, 0o777)
        for name, body in CLEAN.items():
            with open(os.path.join(where, name), "w") as f:
                f.write(textwrap.dedent(body))
        argv = [*drop, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--proctree-leaks=fail"]
        if not _entry_point_registered():
            argv += ["-p", "proctree.pytest_plugin"]
        env = dict(os.environ, PYTHONPATH=_PROCTREE_HOME, PYTHONDONTWRITEBYTECODE="1")
        for sub in ("true", "false"):
            r = subprocess.run(
                [*argv, "-n", "2", "-o", f"proctree_subreaper={sub}"],
                cwd=where,
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
            )
            clean_run(r)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def test_a_workers_leaks_are_named_with_their_test_and_listed_by_the_controller(tmp_path):
    pytest.importorskip("xdist")
    files = {
        "test_leaks.py": LEAKS,
        "test_at_collection.py": """
            import os, subprocess
            AT_IMPORT = subprocess.Popen(["sleep", "300"])
            open(os.path.join(os.path.dirname(__file__), "import.pids"), "a").write(f"{AT_IMPORT.pid}\\n")
            def test_fine():
                pass
        """,
    }
    r = run_inner(tmp_path, files, "--proctree-leaks=fail", "-n", "2")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    summary = leak_section(out)
    for test, name in [("test_popen_server_not_waited", "popen.pids"), ("test_multiprocessing_child", "mp.pids")]:
        (pid,) = pids_in(tmp_path, name)
        assert f"pid {pid} " in summary and f"left by test test_leaks.py::{test}" in summary, out
        assert wait_gone([pid], 5)
    # Collected on both workers, and still held by the module global at the session's end: checked after pytest
    # exits (its atexit handlers could end them), and reported then, on stderr.
    at_import = pids_in(tmp_path, "import.pids")
    late = r.stderr.split("after pytest exited")[-1]
    assert at_import and all(f"pid {p} " in late for p in at_import), out
    assert "test_clean" not in summary
    assert summary.count(", left by ") == 4, out  # every leak once, and nothing else
    assert late.count(", left by ") == len(at_import), out
    assert wait_gone(at_import, 5)


HOLDER = {
    "conftest.py": """
        import os, pytest, proctree
        HERE = os.path.dirname(os.path.abspath(__file__))
        @pytest.fixture(scope="session")
        def server():
            p = proctree.Popen(["sleep", "300"])  # this process's first proctree.Popen: the holder starts here
            open(os.path.join(HERE, "server"), "w").write(str(p.pid))
            yield p
            p.terminate()
            assert p.wait() == -15
    """,
    "test_h.py": """
        import proctree
        def test_first(server):
            assert server.poll() is None
        def test_runs_another_popen():
            assert proctree.run(["true"]).returncode == 0
        def test_second(server):
            assert server.poll() is None
    """,
}


@pytest.mark.parametrize("mode", ["fail", "kill"])
def test_the_popen_holder_started_in_a_fixture_is_nobodys_leak(tmp_path, mode):
    clean_run(run_inner(tmp_path, HOLDER, f"--proctree-leaks={mode}"))


def test_the_popen_holder_started_in_a_test_or_at_collection_is_nobodys_leak(tmp_path):
    files = {
        "test_c.py": """
            import proctree
            assert proctree.run(["true"]).returncode == 0  # at collection: the holder is started here
            def test_one():
                assert proctree.run(["true"]).returncode == 0
        """,
        "test_d.py": """
            import proctree
            def test_two():
                p = proctree.Popen(["true"]); p.wait()
        """,
    }
    clean_run(run_inner(tmp_path, files, "--proctree-leaks=fail", "-p", "no:randomly"))


LAZY = """
    import os, subprocess, pytest
    HERE = os.path.dirname(os.path.abspath(__file__))

    class LazyServer:
        def __init__(self):
            self.proc = None
        def url(self):
            if self.proc is None:  # started on first use, by whichever test asks first
                self.proc = subprocess.Popen(["sleep", "300"])
                open(os.path.join(HERE, "lazy"), "w").write(str(self.proc.pid))
            return self.proc.pid
        def stop(self):
            if self.proc is not None:
                self.proc.terminate(); self.proc.wait()

    @pytest.fixture(scope="session")
    def lazy():
        s = LazyServer()
        yield s
        if STOP:
            s.stop()

    def test_first(lazy):
        assert lazy.url()

    def test_second(lazy):
        assert lazy.proc.poll() is None  # still the same server

    def test_third():
        pass
"""


@pytest.mark.parametrize("mode", ["fail", "kill"])
def test_a_lazy_server_held_by_a_session_fixture_is_not_the_first_tests_leak(tmp_path, mode):
    r = run_inner(tmp_path, {"test_lazy.py": "STOP = True\n" + textwrap.dedent(LAZY)}, f"--proctree-leaks={mode}")
    clean_run(r)


def test_a_lazy_server_nobody_stops_is_reported_once_its_holder_is_gone(tmp_path):
    r = run_inner(tmp_path, {"test_lazy.py": "STOP = False\n" + textwrap.dedent(LAZY)}, "--proctree-leaks=fail")
    out = r.stdout + r.stderr
    (pid,) = pids_in(tmp_path, "lazy")
    assert r.returncode == 1, out
    assert "3 passed" in out, out  # test_second saw its server: not ended after test_first
    assert f"pid {pid} " in out and "test_lazy.py::test_first (kept by a live object after it)" in out, out
    assert wait_gone([pid], 5)


DETACHED = r'''
import os, subprocess, sys, time, pytest
HERE = os.path.dirname(os.path.abspath(__file__))
# A server that, on each request, double-forks a detached worker (setsid): no parent link leads back to it.
SERVER = """
import os, sys, time
req, out = sys.argv[1], sys.argv[2]
while True:
    if os.path.exists(req):
        os.unlink(req)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                with open(out + ".tmp", "w") as f:
                    f.write(str(os.getpid()))
                os.rename(out + ".tmp", out)
                os.execvp("sleep", ["sleep", "300"])
            os._exit(0)
        os.wait()
    time.sleep(0.02)
"""

@pytest.fixture(scope="module")
def server():
    p = subprocess.Popen([sys.executable, "-c", SERVER, os.path.join(HERE, "request"), os.path.join(HERE, "workers")])
    yield p
    p.kill(); p.wait()
    if TIDY:
        os.kill(int(open(os.path.join(HERE, "workers")).read()), 9)

def test_a(server):
    pass

def test_b(server):
    open(os.path.join(HERE, "request"), "w").close()
    deadline = time.monotonic() + 20
    while not os.path.exists(os.path.join(HERE, "workers")) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert os.path.exists(os.path.join(HERE, "workers"))

def test_c(server):
    pass
'''


@pytest.mark.parametrize("subreaper", ["true", "false"])
def test_a_fixtures_double_forked_worker_is_the_fixtures_not_the_tests(tmp_path, subreaper):
    r = run_inner(
        tmp_path,
        {"test_det.py": "TIDY = True\n" + DETACHED},
        "--proctree-leaks=fail",
        "-o",
        f"proctree_subreaper={subreaper}",
    )
    clean_run(r)


def test_a_fixtures_forgotten_worker_is_reported_at_the_fixtures_teardown(tmp_path):
    r = run_inner(tmp_path, {"test_det.py": "TIDY = False\n" + DETACHED}, "--proctree-leaks=fail")
    out = r.stdout + r.stderr
    (worker,) = pids_in(tmp_path, "workers")
    assert r.returncode == 1, out
    assert "ERROR at teardown of test_c" in out and "ERROR at teardown of test_b" not in out, out
    assert f"pid {worker} " in out and "left by fixture 'server' (scope module" in out, out
    assert "left by test" not in out
    assert re.search(r"^fixture 'server' \(scope module.*: 1 process", out, re.M), out
    assert wait_gone([worker], 5)


def test_fail_warn_and_kill_list_the_same_processes(tmp_path):
    listed = {}
    for mode in ("fail", "warn", "kill"):
        d = tmp_path / mode
        d.mkdir()
        r = run_inner(d, {"test_leaks.py": LEAKS}, f"--proctree-leaks={mode}")
        out = r.stdout + r.stderr
        pids = {p for name in ("popen.pids", "daemon.pids", "scrubbed.pids", "mp.pids") for p in pids_in(d, name)}
        summary = leak_section(out)
        listed[mode] = sorted(re.findall(r"left by (test \S+)", summary))
        assert all(f"pid {p} " in summary for p in pids), out
        assert wait_gone(list(pids), 5)
    assert listed["fail"] == listed["warn"] == listed["kill"], listed
    assert len(listed["fail"]) == 4, listed


def test_a_leaks_name_is_read_after_its_exec(tmp_path):
    body = """
        import os, subprocess
        def test_leak():
            p = subprocess.Popen(["setsid", "sleep", "301"])
            open(os.path.join(os.path.dirname(__file__), "pids"), "w").write(str(p.pid))
    """
    r = run_inner(tmp_path, {"test_n.py": body}, "--proctree-leaks=fail")
    out = r.stdout + r.stderr
    assert "(sleep)" in out and "'sleep 301'" in out, out
    assert "(setsid)" not in out
    assert wait_gone(pids_in(tmp_path, "pids"), 5)


def test_importing_proctree_before_pytest_main_is_no_warning_under_filterwarnings_error(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings =\n    error\n")
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    script = "import sys, proctree, pytest\nsys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', *sys.argv[1:]]))\n"
    extra = [] if _entry_point_registered() else ["-p", "proctree.pytest_plugin"]
    env = dict(os.environ, PYTHONPATH=_PROCTREE_HOME, PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run(
        [sys.executable, "-c", script, "--proctree-leaks=fail", *extra],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "INTERNALERROR" not in out and "Warning" not in out, out


def test_warn_mode_under_filterwarnings_error_reports_without_failing_once_its_warning_is_exempt(tmp_path):
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nfilterwarnings =\n    error\n    ignore::ResourceWarning\n    ignore::proctree.pytest_plugin.ProcessLeakWarning\n"
    )
    body = """
        import os, subprocess
        def test_leak():
            p = subprocess.Popen(["sleep", "300"])
            open(os.path.join(os.path.dirname(__file__), "pids"), "w").write(str(p.pid))
    """
    r = run_inner(tmp_path, {"test_w.py": body}, "--proctree-leaks=warn")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    (pid,) = pids_in(tmp_path, "pids")
    assert f"pid {pid} " in leak_section(out), out
    assert wait_gone([pid], 5)


def test_the_popen_holder_started_by_another_plugin_is_nobodys_leak(tmp_path):
    files = {
        "myplugin.py": """
            import proctree
            def pytest_configure(config):
                assert proctree.run(["true"]).returncode == 0  # the holder starts before the run's containment
            def pytest_sessionstart(session):
                assert proctree.run(["true"]).returncode == 0
        """,
        "test_p.py": """
            import proctree
            def test_one():
                assert proctree.run(["true"]).returncode == 0
        """,
    }
    clean_run(run_inner(tmp_path, files, "--proctree-leaks=fail", "-p", "myplugin"))


def test_a_server_a_module_global_holds_is_checked_at_the_sessions_end_not_at_its_test(tmp_path):
    body = """
        import os, subprocess
        SERVERS = []
        def test_starts_it():
            SERVERS.append(subprocess.Popen(["sleep", "300"]))
            open(os.path.join(os.path.dirname(__file__), "pids"), "w").write(str(SERVERS[0].pid))
        def test_uses_it():
            assert SERVERS[0].poll() is None
    """
    r = run_inner(tmp_path, {"test_g.py": body}, "--proctree-leaks=fail")
    out = r.stdout + r.stderr
    (pid,) = pids_in(tmp_path, "pids")
    assert "2 passed" in out and "ERROR at teardown" not in out, out
    assert r.returncode == 1 and "the session's end" in out and f"pid {pid} " in out, out  # never stopped
    assert "test_g.py::test_starts_it (kept by a live object after it)" in out, out
    assert wait_gone([pid], 5)


def test_a_fixture_that_restores_the_whole_environment_does_not_make_a_tests_leak_its_own(tmp_path):
    body = """
        import os, subprocess, pytest
        @pytest.fixture
        def saved_env():
            saved = dict(os.environ)  # taken during the setup
            yield
            os.environ.clear(); os.environ.update(saved)
        def test_env(saved_env):
            pass
        def test_leak():
            p = subprocess.Popen(["sleep", "300"])
            open(os.path.join(os.path.dirname(__file__), "pids"), "w").write(str(p.pid))
    """
    r = run_inner(tmp_path, {"test_e.py": body}, "--proctree-leaks=fail")
    out = r.stdout + r.stderr
    (pid,) = pids_in(tmp_path, "pids")
    assert "ERROR at teardown of test_leak" in out and "left by test test_e.py::test_leak" in out, out
    assert wait_gone([pid], 5)
