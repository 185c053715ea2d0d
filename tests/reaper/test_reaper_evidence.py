"""The reaper against the hostile review's findings, on real processes.

- an owner in another pid namespace, or another time namespace, whose tree
  is alive: its numbers are not the host's, so its marker proves nothing;
- protect= holding a member of a leftover cgroup: the cgroup is not killed whole;
- an orphan that forks while it is being reaped: the late forks carry the
  marker and are found by the next pass, so nothing is left;
- an orphaned shell whose child dropped the marker: the child is still the
  orphan's (it descends from it), as docs/reaper.md says.
Every selection is scoped with within= to processes the test started.
"""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import proctree
from proctree._table import binding as _binding
from support.reapkit import orphaned_tree, start_detached
from support.spawnkit import CGROUP_OK, alive, wait_gone
from support.stubborn import ignore_polite_signals_sh

LINUX = sys.platform.startswith("linux")
ROOT = LINUX and os.geteuid() == 0
UNSHARE = shutil.which("unshare")

# An owner that spawns a session-mode tree and keeps it for a minute (the test ends it sooner).
OWNER = textwrap.dedent(r"""
    import time, proctree
    t = proctree.spawn(["sleep", "300"], contain="session", grace=0.5)
    time.sleep(60)
    t.terminate(grace=0.5)
""")
# Run the owner as a child (its pid is then not 1 in a new pid namespace), after
# setting the namespace's next pid to argv[2] when given.
INNER = textwrap.dedent(r"""
    import subprocess, sys
    if len(sys.argv) > 2:
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(int(sys.argv[2]) - 1))
    subprocess.run([sys.executable, "-c", sys.argv[1]])
""")


def _below(pid):
    return [pid] + [p.pid for p in proctree.descendants(pid)]


def _free_host_pid():
    """A pid nothing on this host holds now (kill(pid, 0) says ESRCH), below the system's pid_max."""
    with open("/proc/sys/kernel/pid_max") as f:
        top = int(f.read())
    for pid in range(min(top - 1, 30000), 300, -1):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except OSError:
            pass
    pytest.skip("no free pid found")


def _namespaced_owner(unshare_args, started, *extra):
    """The owner, under unshare(1), detached from this process (whose subtree the reaper always protects)."""
    top = start_detached([UNSHARE, *unshare_args, sys.executable, "-c", INNER, OWNER, *extra], started)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            below = _below(top)
        except proctree.NoSuchProcess:
            pytest.fail(f"unshare {' '.join(unshare_args)} exited before the owner's tree was up")
        if len(below) >= 5:  # unshare, inner, owner, keeper, sleep
            return below
        time.sleep(0.02)
    pytest.fail(f"unshare {' '.join(unshare_args)} did not start the owner's tree within 15 s")


@pytest.mark.skipif(not (ROOT and UNSHARE), reason="needs root and unshare(1) for a pid namespace")
def test_a_live_owner_in_another_pid_namespace_is_never_taken_for_gone(started):
    # The owner's pid inside its namespace is one that no host process holds:
    # read as a host pid, it would look gone.
    ours = _namespaced_owner(["--pid", "--fork", "--mount-proc"], started, str(_free_host_pid()))
    assert proctree.find_orphans(within=ours) == []
    report = proctree.reap_orphans(within=ours, grace=0.5)
    assert report.candidates == ()
    assert all(alive(q) for q in ours)


def _boottime_offsets():
    """Offsets for a child time namespace: later, and earlier where the machine has been up long enough.

    A boot-time offset may not take the namespace's clock below zero (unshare fails with ERANGE):
    on a machine up for less than the offset, an earlier clock must be a smaller one.
    """
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    out = [pytest.param(1000, id="later")]
    earlier = min(1000, int(up) - 60)
    if earlier >= 10:
        out.append(pytest.param(-earlier, id="earlier"))
    return out


@pytest.mark.skipif(not (ROOT and UNSHARE), reason="needs root and unshare(1) for a time namespace")
@pytest.mark.parametrize("offset", _boottime_offsets())
def test_a_live_owner_in_another_time_namespace_is_never_taken_for_reused(started, offset):
    if not os.path.exists("/proc/self/ns/time"):
        pytest.skip("this kernel has no time namespaces")
    # Inside, start times read offset seconds later (or earlier): the owner's marker names a start
    # the host never saw.
    ours = _namespaced_owner(["--time", "--boottime", str(offset), "--fork"], started)
    assert proctree.find_orphans(within=ours) == []
    assert all(alive(q) for q in ours)


@pytest.mark.skipif(not CGROUP_OK, reason="needs a writable cgroup v2")
def test_protect_keeps_a_leftover_cgroup_from_being_killed_whole(started, pipe):
    pids = orphaned_tree("cgroup", started, pipe)
    members = {pids["cmd"], pids["scrubbed"], pids["daemon"]}
    report = proctree.reap_orphans(within=members, protect=[r"^sleep 300$"], grace=0.5)
    assert pids["scrubbed"] in {s.pid for s in report.skipped}
    assert report.cgroups_removed == ()
    assert alive(pids["scrubbed"])
    assert wait_gone([pids["cmd"], pids["daemon"]], 5)
    # Unprotected, the rest goes, and the leftover cgroup with it.
    again = proctree.reap_orphans(within=members, grace=0)
    assert again.ok and len(again.cgroups_removed) == 1


@pytest.mark.parametrize("stubborn", [False, True])
def test_an_orphan_forking_while_it_is_reaped_leaves_nothing(started, stubborn):
    gone = subprocess.Popen(["true"])
    gone.wait()
    value = f"{gone.pid}:1:late-{os.getpid()}"
    env = dict(os.environ, PROCTREE_OWNER=value)
    loop = (f"{ignore_polite_signals_sh()}; " if stubborn else "") + "while :; do sleep 300 & sleep 0.005; done"
    root = start_detached(["sh", "-c", loop], started, env=env)
    time.sleep(0.3)

    def marked():
        found = _binding.env_scan("PROCTREE_OWNER", list(_binding.snapshot()))
        return [pid for pid, v in found.items() if v == value.encode() and alive(pid)]

    try:
        # Stopped, the loop cannot fork while the scope is read: within= is then exact. The
        # reap's SIGCONT lets it fork again; what it forks from then on is late.
        os.kill(root, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while proctree.proc(root).state != "T" and time.monotonic() < deadline:
            time.sleep(0.005)
        scope = set(_below(root))
        report = proctree.reap_orphans(within=scope, grace=0.3)
        left = marked()
        assert left == [], f"left running: {left}"
        assert report.ok
    finally:
        for pid in marked():
            try:
                proctree.terminate_tree(pid, grace=0)
            except (proctree.NoSuchProcess, ValueError):
                pass


def test_an_orphans_child_that_dropped_the_marker_still_comes_with_it(started):
    gone = subprocess.Popen(["true"])
    gone.wait()
    env = dict(os.environ, PROCTREE_OWNER=f"{gone.pid}:1")
    root = start_detached(["sh", "-c", "env -u PROCTREE_OWNER sleep 300 & wait"], started, env=env)
    deadline = time.monotonic() + 10

    def child_is_sleep():
        kids = proctree.children(root)
        return len(kids) == 1 and kids[0].name == "sleep"  # env(1) has run sleep without the marker

    while not child_is_sleep() and time.monotonic() < deadline:
        time.sleep(0.01)
    (child,) = [p for p in _below(root) if p != root]
    found = {o.proc.pid: o for o in proctree.find_orphans(within={root, child})}
    assert found[child].via == f"ancestor {root}"
