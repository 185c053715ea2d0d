"""An empty cgroup made by the PID 1 of a pid namespace that was killed whole: its owner's numbers (pid 1) are
another namespace's, so only the namespace's death proves the owner gone. The reaper, in the initial pid
namespace where every process is listed, takes a namespace no process lives in as dead, and removes the empty
cgroup; never one that holds a process, nor where a process's namespace cannot be read.

The real cases read the process table and remove only the directory the test made: no reaper is run here, so
nothing is signalled."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import proctree
from proctree._containment import cgroup as _cgroup
from proctree._containment.evidence import leftovers as _leftovers
from proctree._containment.evidence.leftovers import LeftoverCgroup
from proctree._reaper import facts as _facts
from proctree._reaper.select import Facts, select
from proctree._table import namespaces as _namespaces
from proctree._table.model import Proc
from support.spawnkit import CGROUP_OK, LINUX

UNSHARE = shutil.which("unshare")
IN_INITIAL = LINUX and _namespaces.is_initial(_namespaces.of("self"))
needs_ns = pytest.mark.skipif(
    not (LINUX and UNSHARE and os.geteuid() == 0 and IN_INITIAL),
    reason="needs Linux, unshare(1), root and the initial pid namespace",
)

DEAD, LIVE, TIME = 4026532999, 4026532998, 4026531834
TABLE = {p.pid: p for p in [Proc(1, 0, 1, 1, 0, "S", 0, "init"), Proc(50, 1, 50, 50, 0, "S", 20, "reaper")]}


def _cg(path, ns, pids=(), hidden=0):
    return LeftoverCgroup(path, path if not pids else path.rsplit("/", 1)[0], (1, 700), None, pids, ns, 0, hidden)


@pytest.mark.parametrize(
    ("cg", "dead"),
    [
        (_cg(f"/cg/proctree-1-700-{DEAD}-{TIME}", (DEAD, TIME)), True),
        (_cg(f"/cg/proctree-1-700-{LIVE}-{TIME}", (LIVE, TIME)), False),  # its namespace has a process
        (_cg(f"/cg/proctree-1-700-{DEAD}-{TIME}/run", (DEAD, TIME), pids=(300,)), False),  # not empty
        (_cg(f"/cg/proctree-1-700-{DEAD}-{TIME}/run", (DEAD, TIME), hidden=1), False),  # not empty either
        (_cg("/cg/proctree-1-700", None), False),  # a legacy name says no namespace: owner 1 is no owner
    ],
)
def test_an_empty_cgroup_in_a_dead_namespace_is_dead_and_nothing_else(cg, dead):
    f = Facts(dict(TABLE), {}, cgroups=[cg], me=50, dead_namespaces=frozenset({DEAD}))
    sel = select(f)
    assert (sel.dead_cgroups == [cg]) is dead
    assert sel.orphans == []  # nothing to signal either way


@needs_ns
def test_a_namespace_is_dead_only_once_no_process_lives_in_it():
    p = subprocess.Popen([UNSHARE, "--pid", "--fork", "--kill-child", "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while not proctree.children(p.pid):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        (inner,) = [c.pid for c in proctree.children(p.pid)]
        ns = os.stat(f"/proc/{inner}/ns/pid").st_ino
        pids = list(proctree.snapshot().keys())
        assert _namespaces.dead_pid_namespaces({ns}, pids) == frozenset()
        os.kill(inner, 9)  # the namespace's init: unshare reaps it and exits
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    pids = list(proctree.snapshot().keys())
    assert _namespaces.dead_pid_namespaces({ns}, pids) == frozenset({ns})
    assert _namespaces.dead_pid_namespaces({_namespaces.of("self")[0]}, pids) == frozenset()


@needs_ns
def test_a_reader_that_cannot_see_every_namespace_proves_nothing():
    # An unprivileged reader cannot read root's processes' namespaces: no namespace is dead to it.
    code = (
        "print('RAN', flush=True)\n"
        "import proctree, sys; from proctree._table import namespaces as n\n"
        "sys.exit(0 if n.dead_pid_namespaces({4026532999}, list(proctree.snapshot().keys())) == frozenset() else 1)"
    )
    home = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
    r = subprocess.run(
        ["setpriv", "--reuid", "64321", "--regid", "64321", "--clear-groups", sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": home},
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "RAN" not in r.stdout or "No module named 'proctree'" in r.stderr:
        # A venv in a private directory, a libpython it cannot load: that user cannot run this installation.
        pytest.skip(f"the unprivileged user cannot run this interpreter with proctree: {r.stderr.strip()[-200:]}")
    assert r.returncode == 0, r.stderr


@needs_ns
@pytest.mark.skipif(not CGROUP_OK, reason="no writable cgroup v2 here")
def test_the_cgroup_of_a_pid1_killed_with_its_namespace_is_found_dead_and_removed():
    runner = os.path.join(os.path.dirname(os.path.abspath(proctree.__file__)), "proctree-init")
    if not os.access(runner, os.X_OK):
        pytest.skip("proctree-init was not built here")
    p = subprocess.Popen(
        [
            UNSHARE,
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
            runner,
            "--contain",
            "cgroup",
            "--",
            "sleep",
            "60",
        ],
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while len(proctree.descendants(p.pid)) < 3:  # unshare's child (PID 1), its keeper half, sleep
            assert time.monotonic() < deadline
            time.sleep(0.01)
        init = proctree.children(p.pid)[0].pid
        ns = os.stat(f"/proc/{init}/ns/pid").st_ino
        cmd = [d for d in proctree.descendants(p.pid) if d.name == "sleep"][0]
        with open(f"/proc/{cmd.pid}/cgroup") as f:
            mine = f.read().strip().split("::", 1)[1]
        parent_name = [part for part in mine.split("/") if part.startswith("proctree-1-")][0]
        os.kill(init, 9)  # the namespace dies whole: nothing in it can remove the directory
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    mount = _cgroup.find_mount()
    parent = os.path.join(mount, mine.lstrip("/").split(parent_name)[0], parent_name)
    deadline = time.monotonic() + 10
    while _leftovers._unpopulated(parent) is False and time.monotonic() < deadline:
        time.sleep(0.02)
    assert os.path.isdir(parent), "the kernel left the directory: the case the reaper must handle"
    try:
        f, _ = _facts.gather(marker="PROCTREE_OWNER", rules=(), warnings=[])
        ours = [cg for cg in f.cgroups if cg.parent == parent]
        assert ours and all(cg.ns is not None and cg.ns[0] == ns for cg in ours), f.skipped
        assert ns in f.dead_namespaces
        sel = select(Facts(f.procs, {}, cgroups=ours, me=f.me, dead_namespaces=f.dead_namespaces))
        assert sel.dead_cgroups == ours and sel.orphans == []
        assert all(_leftovers.remove(cg) for cg in ours)
        assert not os.path.exists(parent)
    finally:
        for top, dirs, _ in os.walk(parent, topdown=False):
            for d in dirs:
                os.rmdir(os.path.join(top, d))
        if os.path.isdir(parent):
            os.rmdir(parent)


DRY_RUN = r"""
import json, os, subprocess, sys
import proctree
from proctree._containment import cgroup as _cgroup
from proctree._table import binding as _binding

mount = _cgroup.find_mount()
child = subprocess.Popen(["true"])
start = _binding.proc(child.pid).start_time
child.wait()  # reaped: its pid names nobody now
ns = os.stat("/proc/self/ns/pid").st_ino, os.stat("/proc/self/ns/time").st_ino
leftover = os.path.join(mount, f"proctree-{child.pid}-{start}-{ns[0]}-{ns[1]}")
os.mkdir(leftover)
env = dict(os.environ)
dry = subprocess.run([sys.executable, "-m", "proctree", "reap", "--dry-run"], capture_output=True, text=True, env=env)
kept = os.path.isdir(leftover)
real = subprocess.run([sys.executable, "-m", "proctree", "reap"], capture_output=True, text=True, env=env)
print(json.dumps({"path": leftover, "dry": dry.stdout, "kept": kept, "real": real.stdout,
                  "gone": not os.path.exists(leftover)}))
"""


def test_a_dry_run_names_the_cgroups_it_would_remove_and_removes_none():
    from support.sandbox import run_sandboxed

    r = run_sandboxed(DRY_RUN)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    if not got["path"]:
        pytest.skip("no cgroup v2 mount in the sandbox")
    assert f"would remove cgroup {got['path']}" in got["dry"], got
    assert got["kept"], "a dry run removed a cgroup"
    assert f"removed cgroup {got['path']}" in got["real"] and got["gone"], got


@pytest.mark.skipif(not LINUX, reason="pid namespaces are Linux's")
def test_one_namespace_that_cannot_be_read_proves_no_namespace_dead(monkeypatch):
    real = os.stat

    def denied_for_one(path, *args, **kwargs):
        if path == "/proc/2/ns/pid":
            raise PermissionError(13, "Permission denied", path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(_namespaces.os, "stat", denied_for_one)
    assert _namespaces.dead_pid_namespaces({DEAD}, [2, 3]) == frozenset()
    assert _namespaces.dead_pid_namespaces({DEAD}, [3]) == frozenset({DEAD})  # pid 3: gone, or in another one
