"""Regression tests for the hostile review's teardown findings, on real processes.

Each test here failed before its fix. Those whose failure mode is a wrong kill
(a process outside the tree, a reused pid) run as pid 1 of a fresh PID
namespace, so a bug stays inside it; the others use the kit's trees, which
report their pids through pipes and are always cleaned up.
"""

import asyncio
import multiprocessing
import signal
import subprocess
import time

import pytest

import proctree
from support.stubborn import ignore_polite_signals_sh
from support.treekit import alive
from support.treekit import run_ns_json as run_in_ns

# -- 1. kinship never reaches what the tree did not start -----------------------

CALLER_INSIDE_THE_SESSION = r"""
import subprocess
out_r, out_w = os.pipe()
ready_r, ready_w = os.pipe()
L = os.fork()
if L == 0:
    os.setsid()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    k = os.fork()
    if k == 0:
        while True:
            time.sleep(1000)
    s = os.fork()
    if s == 0:  # a subshell that forks the caller and exits
        c = os.fork()
        if c == 0:
            while os.getppid() != 1:  # orphaned, still in L's session
                time.sleep(0.001)
            p = subprocess.Popen(["bash", "-c", "sleep 200 & echo $!; wait"], stdout=subprocess.PIPE)
            sleep_pid = int(p.stdout.readline())
            rep = proctree.terminate_tree(os.getsid(0), grace=1.0)
            res = dict(
                me=os.getpid(), bash=p.pid, sleep=sleep_pid, k=k,
                found=sorted(q.pid for q in rep.found), spared=rep.extra.get("spared", []),
                bash_state=state(p.pid), sleep_state=state(sleep_pid), k_state=state(k), ok=rep.ok,
            )
            os.write(out_w, json.dumps(res).encode())
            os._exit(0)
        os._exit(0)
    os.waitpid(s, 0)
    os.write(ready_w, b"x")
    while True:
        time.sleep(1000)
os.read(ready_r, 1)
os.close(out_w)
data = b""
while True:
    chunk = os.read(out_r, 65536)
    if not chunk:
        break
    data += chunk
res = json.loads(data)
res["L"] = L
done(**res)
"""


def test_what_the_caller_started_in_the_trees_session_is_never_killed():
    res = run_in_ns(CALLER_INSIDE_THE_SESSION)
    assert res["found"] == sorted([res["L"], res["k"]])
    assert res["spared"] == [res["me"]]
    assert res["bash_state"] in ("S", "R") and res["sleep_state"] in ("S", "R"), res
    assert res["k_state"] in ("gone", "Z") and res["ok"]


PIPELINE = r"""
# An interactive shell with job control runs `a | b`: a leads the job's group,
# b is in it; both are the shell's children. terminate_tree(a) ends a and what
# a started, never b.
results = {}
for signal_group in (False, True):
    r, w = os.pipe()
    shell = os.fork()
    if shell == 0:
        os.setsid()
        a = os.fork()
        if a == 0:
            os.setpgid(0, 0)
            a1 = os.fork()
            if a1 == 0:
                while True:
                    time.sleep(1000)
            os.write(w, b"%d\n" % a1)
            while True:
                time.sleep(1000)
        os.setpgid(a, a)
        b = os.fork()
        if b == 0:
            os.setpgid(0, a)
            while True:
                time.sleep(1000)
        os.setpgid(b, a)
        os.write(w, b"%d %d\n" % (a, b))
        while True:
            time.sleep(1000)
    lines = b""
    while lines.count(b"\n") < 2:
        lines += os.read(r, 100)
    nums = [int(x) for x in lines.split()]
    a1 = nums[0] if len(nums) == 3 and proctree.proc(nums[0]).ppid != shell else nums[2]
    a, b = (nums[1], nums[2]) if a1 == nums[0] else (nums[0], nums[1])
    rep = proctree.terminate_tree(a, grace=1.0, signal_group=signal_group)
    time.sleep(0.05)
    results[str(signal_group)] = dict(
        a=a, b=b, a1=a1, found=sorted(p.pid for p in rep.found), group=rep.extra["group"],
        b_state=state(b), a1_state=state(a1), ok=rep.ok,
    )
done(**results)
"""


def test_a_sibling_job_in_the_roots_group_is_never_killed():
    res = run_in_ns(PIPELINE)
    for signal_group, r in res.items():
        assert r["found"] == sorted([r["a"], r["a1"]]), (signal_group, r)
        assert r["b_state"] in ("S", "R"), (signal_group, r)
        assert r["a1_state"] in ("gone", "Z") and r["ok"], (signal_group, r)
    assert res["True"]["group"].startswith("skipped: group"), res["True"]


# -- 2. the caller's own children keep their exit status ------------------------


def test_multiprocessing_process_keeps_its_exit_status():
    p = multiprocessing.get_context("fork").Process(target=time.sleep, args=(100,))
    p.start()
    try:
        rep = proctree.terminate_tree(p.pid, grace=5.0)
        assert rep.ok and "reaped" not in rep.extra
        p.join(5)
        assert not p.is_alive()
        assert p.exitcode == -signal.SIGTERM
    finally:
        if p.is_alive():
            p.kill()
            p.join()


@pytest.mark.parametrize(
    "cmd, code",
    [
        (["sleep", "100"], -signal.SIGTERM),
        (["sh", "-c", f"{ignore_polite_signals_sh()}; exec sleep 100"], -signal.SIGKILL),
    ],
)
def test_popen_wait_returns_the_real_status(cmd, code):
    p = subprocess.Popen(cmd)
    try:
        if code == -signal.SIGKILL:  # let the trap be set before the signal
            deadline = time.monotonic() + 10
            while proctree.proc(p.pid).name != "sleep" and time.monotonic() < deadline:
                time.sleep(0.005)
        rep = proctree.terminate_tree(p.pid, grace=0.2)
        assert rep.ok
        assert p.wait(timeout=5) == code
    finally:
        p.kill()
        p.wait()


def test_asyncio_subprocess_wait_returns_the_real_status():
    async def main():
        proc = await asyncio.create_subprocess_exec("sleep", "100")
        try:
            rep = await proctree.terminate_tree_async(proc.pid, grace=5.0)
            assert rep.ok
            return await asyncio.wait_for(proc.wait(), 5)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    assert asyncio.run(main()) == -signal.SIGTERM


MP_PID_REUSE = r"""
import multiprocessing
p = multiprocessing.get_context("fork").Process(target=time.sleep, args=(100,))
p.start()
rep = proctree.terminate_tree(p.pid, grace=2.0)
# Try to hand the ended process's pid to a bystander: it must still be held
# by the unreaped zombie, so the bystander gets another pid.
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(p.pid - 1))
b, br = canary()
p.terminate()  # multiprocessing's own signal, by pid: must not reach the bystander
p.join(5)
time.sleep(0.05)
done(pid=p.pid, b=b, exitcode=p.exitcode, heard=heard(br), b_state=state(b), ok=rep.ok)
"""


def test_a_later_multiprocessing_terminate_cannot_reach_a_reused_pid():
    res = run_in_ns(MP_PID_REUSE)
    assert res["b"] != res["pid"], res
    assert res["heard"] == [] and res["b_state"] in ("S", "R"), res
    assert res["exitcode"] == -signal.SIGTERM and res["ok"], res


# -- 3. an orphan made during the grace is found ---------------------------------


def _read_pids(path, n, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            lines = path.read_text().split()
        except FileNotFoundError:
            lines = []
        if len(lines) >= n:
            return [int(x) for x in lines]
        time.sleep(0.01)
    raise AssertionError(f"only {lines} reported")


@pytest.mark.parametrize("attempt", range(2))
def test_orphan_left_by_a_subshell_during_the_grace_is_ended(kit, tmp_path, attempt):
    out = tmp_path / "pid"
    ready = tmp_path / "ready"
    # The grace leaves the subshell (0.3 s in) plenty of time on a loaded machine.
    p = subprocess.Popen(
        [
            "sh",
            "-c",
            f"{ignore_polite_signals_sh()}; : > {ready}; sleep 0.3; (sleep 300 & echo $! > {out}); exec sleep 1000",
        ],
        start_new_session=True,
    )
    kit.popens.append(p)
    kit.register(p.pid, proctree.proc(p.pid).start_time)
    deadline = time.monotonic() + 10
    while not ready.exists() and time.monotonic() < deadline:  # the trap is set
        time.sleep(0.005)
    rep = proctree.terminate_tree(p.pid, grace=3.0)
    orphan = _read_pids(out, 1)[0]
    assert not alive(orphan), f"the orphan {orphan} survived; report ok={rep.ok}"
    assert orphan in [q.pid for q in rep.found]
    assert rep.ok


# -- 4. a truncated teardown is never ok -----------------------------------------


@pytest.mark.parametrize("new_session", [True, False])
def test_truncated_teardown_is_not_ok(kit, tmp_path, new_session):
    out = tmp_path / "pids"
    p = subprocess.Popen(
        ["bash", "-c", f"for i in $(seq 40); do sleep 100 & echo $! >> {out}; done; wait"],
        start_new_session=new_session,
    )
    kit.popens.append(p)
    for pid in _read_pids(out, 40):
        try:
            kit.register(pid, proctree.proc(pid).start_time)
        except proctree.NoSuchProcess:
            pass
    rep = proctree.terminate_tree(p.pid, grace=0.5, max_procs=5)
    assert rep.truncated
    assert rep.ok is False and rep.to_dict()["ok"] is False


# ---------------------------------------------------------------------------
# signals.hold: a target for whatever holds a listed pid now, read once


@pytest.mark.parametrize("use_pidfd", [True, False])
def test_hold_targets_the_live_process_and_refuses_the_rest(use_pidfd):
    import os

    from proctree._teardown import signals

    guard = signals.Guard()
    p = subprocess.Popen(["sleep", "60"])
    try:
        t = signals.hold(p.pid, guard, use_pidfd)
        assert t is not None and t.proc.pid == p.pid
        assert t.proc.start_time == proctree.proc(p.pid).start_time
        assert (t.pidfd is not None) == (use_pidfd and hasattr(os, "pidfd_open"))
        assert signals.send(t, signal.SIGKILL, guard) == signals.SENT
        t.close()
        deadline = time.monotonic() + 5
        while not proctree.proc(p.pid).is_zombie and time.monotonic() < deadline:
            time.sleep(0.01)
        assert signals.hold(p.pid, guard, use_pidfd) is None  # a zombie is not held
    finally:
        p.kill()
        p.wait()
    assert signals.hold(p.pid, guard, use_pidfd) is None or proctree.proc(p.pid).start_time != t.proc.start_time
    for forbidden in (0, 1, os.getpid(), os.getppid()):
        with pytest.raises(ValueError):
            signals.hold(forbidden, guard, use_pidfd)
