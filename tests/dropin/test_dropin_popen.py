"""proctree.Popen: Popen's semantics, and the command's whole tree contained."""

import gc
import inspect
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

import proctree
from proctree._containment import popenhold

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0, reason="cgroup v2 containment (root, Linux)"
)


def alive(pid: int) -> bool:
    """pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_is_a_popen_with_popens_signature():
    assert issubclass(proctree.Popen, subprocess.Popen)
    params = list(inspect.signature(proctree.Popen).parameters)
    assert params[: len(params) - 2] == list(inspect.signature(subprocess.Popen).parameters)
    assert params[-2:] == ["keep_orphans", "detach"]
    assert proctree.Popen[bytes] is not None  # __class_getitem__

    class Mine(proctree.Popen):
        pass

    with Mine(["true"]) as p:
        pass
    assert p.returncode == 0


def test_command_is_the_callers_own_child():
    p = proctree.Popen(["sh", "-c", "exit 7"])
    assert os.getppid() != p.pid
    with open(f"/proc/{p.pid}/stat") as f:
        assert int(f.read().rsplit(")", 1)[1].split()[1]) == os.getpid()  # its parent is us
    pid, status = os.waitpid(p.pid, 0)  # our own child: waitpid sees it
    assert pid == p.pid and os.waitstatus_to_exitcode(status) == 7
    p._handle_exitstatus(status)  # what Popen does when it reaps it (and the cgroup goes)
    assert p.returncode == 7


def test_popen_attributes_and_errors():
    p = proctree.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
    assert p.text_mode and p.encoding == "utf-8" and p.universal_newlines
    assert p.communicate("hi") == ("hi", None)
    assert p.returncode == 0
    with pytest.raises(FileNotFoundError) as e:
        proctree.Popen(["/nonexistent/program"])
    assert e.value.filename == "/nonexistent/program"
    with pytest.raises(FileNotFoundError):
        proctree.Popen(["true"], cwd="/nonexistent/dir")
    with pytest.raises(ValueError, match="preexec_fn"):
        proctree.Popen(["true"], preexec_fn=lambda: None)
    with pytest.raises(TypeError):
        proctree.Popen(["true"], keep_orphans=1)


def test_in_a_cgroup_of_its_own():
    out = proctree.check_output(["cat", "/proc/self/cgroup"], text=True)
    line = [ln for ln in out.splitlines() if ln.startswith("0::")][0]
    assert os.path.basename(line).startswith("cmd-")
    assert "/popen-" in line


def test_terminate_sends_one_signal_and_returns():
    p = proctree.Popen(
        ["sh", "-c", "trap 'echo term; exit 3' TERM; echo up; while :; do sleep 0.05; done"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline() == "up\n"
    p.terminate()
    assert p.stdout.readline() == "term\n"
    assert p.wait(10) == 3
    p.stdout.close()


def test_leftovers_end_when_the_command_is_reaped():
    p = proctree.Popen(["sh", "-c", "setsid sleep 300 & echo $!"], stdout=subprocess.PIPE)
    orphan = int(p.stdout.readline())
    p.stdout.close()
    assert p.wait() == 0
    assert wait_gone(orphan), "the command's orphan outlived the command"


def test_keep_orphans_leaves_them():
    p = proctree.Popen(["sh", "-c", "setsid sleep 300 & echo $!"], stdout=subprocess.PIPE, keep_orphans=True)
    orphan = int(p.stdout.readline())
    p.stdout.close()
    assert p.wait() == 0
    try:
        time.sleep(0.2)
        assert alive(orphan)
    finally:
        os.kill(orphan, signal.SIGKILL)  # ours: it is in our Popen's cgroup (checked below)
    assert wait_gone(orphan)


def test_exit_closes_pipes_and_waits_without_terminating():
    with proctree.Popen(["sh", "-c", "sleep 0.2; exit 4"], stdout=subprocess.PIPE) as p:
        pass
    assert p.returncode == 4
    assert p.stdout.closed


def test_dropped_running_child_warns():
    p = proctree.Popen(["sleep", "0.2"])
    pid = p.pid
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del p
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning) for w in caught)
    os.waitpid(pid, 0)


# subprocess.Popen takes process_group from Python 3.11 on; proctree.Popen takes what it takes.
GROUP = {"process_group": 0} if sys.version_info >= (3, 11) else {}


def test_user_group_umask_process_group():
    out = proctree.check_output(
        ["sh", "-c", "id -u; id -g; umask; ps -o pgid= -p $$"],
        user=65534,
        group=65534,
        extra_groups=[],
        umask=0o027,
        text=True,
        **GROUP,
    )
    uid, gid, mask, pgid = out.split()
    assert (uid, gid, mask) == ("65534", "65534", "0027")
    if GROUP:
        assert int(pgid) != os.getpgid(0)


def test_subprocess_run_through_it():
    r = proctree.run(["sh", "-c", "echo out; exit 2"], capture_output=True)
    assert r.returncode == 2 and r.stdout == b"out\n"
    with pytest.raises(subprocess.CalledProcessError):
        proctree.check_call(["false"])
    assert proctree.call(["true"]) == 0


OWNER = """
import subprocess, sys, proctree
p = proctree.Popen(["sh", "-c", "setsid sleep 300 & echo $!; sleep 300"], stdout=subprocess.PIPE)
print(p.pid, int(p.stdout.readline()), flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("how", ["SIGKILL", "exit"])
def test_the_tree_dies_with_the_owner(how):
    owner = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(OWNER)],
        env=dict(os.environ, PYTHONPATH=ROOT),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        command, orphan = map(int, owner.stdout.readline().split())
        if how == "SIGKILL":
            owner.kill()
        else:
            owner.stdin.close()
        owner.wait(10)
        assert wait_gone(command, 10) and wait_gone(orphan, 10)
    finally:
        owner.kill()
        owner.wait()


def test_a_patched_popen_changes_nothing():
    from unittest import mock

    with mock.patch("subprocess.Popen") as fake:
        assert proctree.Popen(["true"]).wait() == 0
        assert not fake.called


def test_holder_is_one_per_process():
    proctree.Popen(["true"]).wait()
    first = popenhold.holder()
    proctree.Popen(["true"]).wait()
    assert popenhold.holder() is first
    assert popenhold.held_pids() == {first.keeper_pid, first.pid}


def test_session_and_group_are_the_commands_own():
    with proctree.Popen(["sleep", "5"], start_new_session=True) as p:
        assert os.getsid(p.pid) == p.pid
        p.kill()
    if GROUP:
        with proctree.Popen(["sleep", "5"], **GROUP) as p:
            assert os.getpgid(p.pid) == p.pid
            p.kill()


def test_born_in_its_cgroup_without_a_migration_wait():
    # The command is cloned into its cgroup (clone3 CLONE_INTO_CGROUP): a cold start costs no RCU grace
    # period (several ms, each time, for a process written into cgroup.procs). A generous bound, for hangs.
    times = []
    for _ in range(5):
        time.sleep(0.05)  # let the kernel's cgroup lock go cold between starts
        t0 = time.monotonic()
        proctree.Popen(["true"]).wait()
        times.append(time.monotonic() - t0)
    assert min(times) < 0.5


def test_leftovers_end_when_the_command_exits_even_unreaped():
    p = proctree.Popen(["sh", "-c", "setsid sleep 300 & echo $!"], stdout=subprocess.PIPE)
    orphan = int(p.stdout.readline())
    p.stdout.close()
    assert wait_gone(orphan), "the orphan outlived its command, which nobody reaped"
    with open(f"/proc/{p.pid}/stat") as f:
        assert f.read().rsplit(")", 1)[1].split()[0] == "Z"  # the command itself is left for Popen to reap
    assert p.wait() == 0


def test_a_stopped_command_stays_stopped():
    with proctree.Popen(["sleep", "30"]) as p:
        p.send_signal(signal.SIGSTOP)
        time.sleep(1.2)  # the watch looks for stopped keepers twice a second; a command is not one
        with open(f"/proc/{p.pid}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] == "T"
        p.kill()


def test_without_cgroups_it_says_why(monkeypatch):
    monkeypatch.setattr(popenhold, "_unavailable", (os.getpid(), "no writable cgroup v2 (for this test)"))
    monkeypatch.setattr(popenhold, "_holder", None)
    with pytest.raises(proctree.ContainmentUnavailable, match="no writable cgroup v2"):
        proctree.Popen(["true"])


def test_a_forked_child_gets_a_holding_tree_of_its_own():
    proctree.Popen(["true"]).wait()
    parent_holder = popenhold.holder()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its Popen's cgroup, end its own holding tree, and leave at once
        try:
            out = proctree.check_output(["cat", "/proc/self/cgroup"])
            os.write(w, out)
            tree = popenhold.holder()
            tree.terminate()
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out = f.read().decode()
    os.waitpid(pid, 0)
    assert "/cmd-" in out
    assert os.path.basename(parent_holder.cgroup) not in out
