"""`proctree tree --stats` / `-k` and `proctree up --stats`, run as users run them, on real processes.

Kernel threads exist on this machine (kthreadd, pid 2, and its children): hidden by default, drawn with -k or
when asked for by pid. Every process a test starts is ended by it (up by SIGTERM, else SIGKILL in a finally).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import proctree

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc facts")

ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__))))
PY = sys.executable
MIB = 1 << 20


def cli(*args, timeout=60):
    return subprocess.run([PY, "-m", "proctree", *args], capture_output=True, text=True, timeout=timeout, env=ENV)


def kernel_threads():
    return [f.pid for f in proctree.all_facts([]) if f.kernel_thread]


needs_kthreads = pytest.mark.skipif(not kernel_threads(), reason="no kernel threads visible (a container?)")


@pytest.fixture
def holder():
    """A child holding 24 MiB, and its own child: a known little subtree below this test."""
    body = (
        "import os, sys, time\nhold = bytearray(24 << 20)\nfor i in range(0, len(hold), 4096): hold[i] = 1\n"
        "print(os.getpid(), flush=True); os.read(3, 1)\n"
    )
    p = subprocess.Popen(
        ["sh", "-c", f'exec 3<&0; {PY} -c "$0" & wait', body], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    started = [proctree.proc(p.pid)]
    try:
        inner = int(p.stdout.readline())
        started.append(proctree.proc(inner))
        yield p.pid, inner
    finally:
        p.stdin.close()  # the inner interpreter reads it (as fd 3): EOF ends it, then sh's wait returns
        try:
            p.wait(timeout=10)
        finally:
            for rec in started:  # whatever is still the very process we started
                try:
                    if proctree.proc(rec.pid).identity == rec.identity:
                        os.kill(rec.pid, signal.SIGKILL)
                except (proctree.NoSuchProcess, ProcessLookupError):
                    pass
            p.wait()
            p.stdout.close()


def test_tree_stats_shows_rss_cpu_and_subtree_sums(holder):
    sh, inner = holder
    r = cli("tree", "--stats", "-v", str(sh))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.match(rf"{sh} \[pgid \d+ sid \d+ \w\] rss [\d.]+[BKMG] cpu [\d.:]+s? \{{2 procs, rss ", lines[0]), lines
    [inner_line] = [line for line in lines if f" {inner} [" in line]
    rss = re.search(r"rss ([\d.]+)M cpu", inner_line)
    assert rss and 24 <= float(rss.group(1)) < 200, inner_line
    assert "{" not in inner_line  # a leaf has no subtree sum
    doc = json.loads(cli("tree", "--stats", "--json", str(sh)).stdout)
    root, kid = doc["procs"]
    assert root["subtree"]["processes"] == 2 and root["subtree"]["rss"] >= 24 * MIB
    assert kid["pid"] == inner and kid["usage"]["rss"] >= 24 * MIB
    assert root["subtree"]["rss"] == root["usage"]["rss"] + kid["usage"]["rss"]


@needs_kthreads
def test_kernel_threads_hidden_unless_asked():
    kthreads = set(kernel_threads())
    shown = {int(x) for x in cli("tree", "-q").stdout.split()}
    assert not shown & kthreads and 1 in shown and os.getpid() in shown
    everything = {int(x) for x in cli("tree", "-q", "--kernel").stdout.split()}
    still_there = {p.pid for p in proctree.snapshot().values()}
    assert kthreads & still_there <= everything  # those not gone meanwhile are all drawn with --kernel
    assert 2 in everything and shown <= everything | (shown - still_there)
    short = {int(x) for x in cli("tree", "-q", "-k").stdout.split()}
    assert 2 in short
    asked = cli("tree", "2", "--names")  # asked for by pid: drawn, with its kernel children
    assert asked.returncode == 0 and asked.stdout.startswith("2 [") and len(asked.stdout.splitlines()) > 1
    doc = json.loads(cli("tree", "--json").stdout)
    assert not {p["pid"] for p in doc["procs"]} & kthreads


def test_up_stats_prints_usage_lines_and_json_objects(tmp_path):
    hold = "import time; b = bytearray(24 << 20); b[::4096] = b'1' * len(b[::4096]); time.sleep(60)"
    (tmp_path / "Procfile").write_text(f'holder: {PY} -c "{hold}"\n')
    for args, pattern in (((), r"holder\.1: \d+ procs?, rss "), (("--json",), r'"kind": "usage"')):
        up = subprocess.Popen(
            [PY, "-m", "proctree", "up", "-f", str(tmp_path / "Procfile"), "--grace", "1", "--stats", "0.2", *args],
            cwd=str(tmp_path),
            env=ENV,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            found = []
            while time.monotonic() < deadline:
                line = up.stdout.readline()
                assert line, up.stderr.read()
                if re.search(pattern, line):
                    found.append(line)
                    if len(found) == 3 and (not args or json.loads(line)["service"]["usage"]["rss"] >= 24 * MIB):
                        break
            assert len(found) >= 3, found
            up.send_signal(signal.SIGTERM)
            rest, _ = up.communicate(timeout=30)
            assert up.returncode == 143
        finally:
            if up.poll() is None:
                up.kill()
                up.communicate()
        if args:
            doc = json.loads(found[-1])
            assert doc["service"]["name"] == "holder.1" and doc["service"]["live"] is True
            usage = doc["service"]["usage"]
            assert usage["processes"] >= 1 and set(usage) >= {"rss", "vms", "cpu_user", "cpu_system", "cpu_total"}
            events = [json.loads(x) for x in rest.splitlines()]
            assert all(e["service"]["usage"] is None for e in events if "service" in e and e["kind"] != "usage")


@pytest.mark.parametrize("value", ["0", "-1", "abc", "inf", "0.001", "0.09", "86401", "99999999"])
def test_up_stats_refuses_a_bad_interval(tmp_path, value):
    (tmp_path / "Procfile").write_text("a: true\n")
    r = cli("up", "-f", str(tmp_path / "Procfile"), "--stats", value)
    assert r.returncode == 2 and "--stats" in r.stderr and not r.stdout


def test_without_facts_stats_is_refused_in_one_line_and_tree_still_draws(monkeypatch, capsys, tmp_path):
    """Where the core has no facts (macOS today: ENOSYS), --stats says so; the tree is drawn, nothing hidden."""
    import errno

    from proctree.cli import main

    def no_facts(*args, **kwargs):
        raise OSError(errno.ENOSYS, "process facts are read on Linux only, for now")

    monkeypatch.setattr(proctree, "facts", no_facts)
    monkeypatch.setattr(proctree, "facts_of", no_facts)
    assert main(["tree", "--stats", str(os.getpid())]) == 2
    out, err = capsys.readouterr()
    assert not out and err.count("\n") == 1 and "--stats needs process facts" in err and "Traceback" not in err
    assert main(["tree", "-q", str(os.getpid())]) == 0
    assert capsys.readouterr().out.split() == [str(os.getpid())]
    if 2 in proctree.snapshot():  # nothing known to be a kernel thread: drawn as any process
        assert main(["tree", "-q"]) == 0 and "2" in capsys.readouterr().out.split()
    (tmp_path / "Procfile").write_text("a: true\n")
    assert main(["up", "-f", str(tmp_path / "Procfile"), "--stats", "1"]) == 2
    out, err = capsys.readouterr()
    assert "--stats needs process facts" in err and "Traceback" not in err
