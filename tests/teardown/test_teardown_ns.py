"""Teardown tests whose failure mode is a wide kill, run as pid 1 of a fresh PID namespace.

Bad input (0, -1, 1, the caller, an ancestor, wrong types) and deterministic
pid reuse (via the namespace's own /proc/sys/kernel/ns_last_pid, which must
never be written outside a namespace). If the engine got it wrong, the damage
stays inside the namespace, which dies with its pid 1. Each script prints one
JSON line; the test asserts on it. Skipped where PID namespaces are unavailable.
"""

import os
import signal

import pytest

import proctree
from proctree._teardown import signals as _signals
from support.stubborn import ignore_polite_signals_py
from support.treekit import run_ns_json


def run(script, **env):
    return run_ns_json(script, **env)


BAD_INPUTS = r"""
canary_pid, canary_r = canary()          # in our process group: kill(0) or kill(-1) would hit it
loner_pid, loner_r = canary(True)        # in its own session: kill(-1) would hit it
results = {}
# The caller is not pid 1 (init is immune to most signals, which would hide a bug).
r, w = os.pipe()
caller = os.fork()
if caller == 0:
    os.close(r)
    out = {}
    cases = {
        "0": lambda: proctree.terminate_tree(0),
        "-1": lambda: proctree.terminate_tree(-1),
        "1": lambda: proctree.terminate_tree(1),
        "self": lambda: proctree.terminate_tree(os.getpid()),
        "parent": lambda: proctree.terminate_tree(os.getppid()),
        "'12'": lambda: proctree.terminate_tree("12"),
        "True": lambda: proctree.terminate_tree(True),
        "1.0": lambda: proctree.terminate_tree(float(canary_pid)),
        "grace=-1": lambda: proctree.terminate_tree(canary_pid, grace=-1),
        "grace=nan": lambda: proctree.terminate_tree(canary_pid, grace=float("nan")),
        "grace=inf": lambda: proctree.terminate_tree(canary_pid, grace=float("inf")),
        "grace='1'": lambda: proctree.terminate_tree(canary_pid, grace="1"),
        "max_procs=0": lambda: proctree.terminate_tree(canary_pid, max_procs=0),
        "max_procs=1.5": lambda: proctree.terminate_tree(canary_pid, max_procs=1.5),
        "include_root=1": lambda: proctree.terminate_tree(canary_pid, include_root=1),
        "2**40": lambda: proctree.terminate_tree(2**40),
        "no such pid": lambda: proctree.terminate_tree(30000),
    }
    # An ancestor that is not pid 1: a grandchild asks to tear down this caller.
    def ancestor_case():
        rr, ww = os.pipe()
        g = os.fork()
        if g == 0:
            try:
                proctree.terminate_tree(os.getppid())
                os.write(ww, b"no error")
            except Exception as exc:
                os.write(ww, type(exc).__name__.encode())
            os._exit(0)
        os.close(ww)
        got = os.read(rr, 100).decode()
        os.waitpid(g, 0)
        return got
    for name, call in cases.items():
        try:
            call()
            out[name] = "no error"
        except Exception as exc:
            out[name] = type(exc).__name__
    out["ancestor"] = ancestor_case()
    out["caller alive"] = True
    os.write(w, json.dumps(out).encode())
    os._exit(0)
os.close(w)
data = b""
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    data += chunk
os.waitpid(caller, 0)
time.sleep(0.05)  # let a stray signal (there should be none) be delivered
done(
    results=json.loads(data or b"{}"),
    canary=[state(canary_pid), heard(canary_r)],
    loner=[state(loner_pid), heard(loner_r)],
)
"""


def test_bad_input_is_refused_before_any_signal_in_a_pid_namespace():
    res = run(BAD_INPUTS)
    expected = {
        "0": "ValueError",
        "-1": "ValueError",
        "1": "ValueError",
        "self": "ValueError",
        "parent": "ValueError",  # pid 1 here: refused as init and as an ancestor
        "'12'": "TypeError",
        "True": "TypeError",
        "1.0": "TypeError",
        "grace=-1": "ValueError",
        "grace=nan": "ValueError",
        "grace=inf": "ValueError",
        "grace='1'": "TypeError",
        "max_procs=0": "ValueError",
        "max_procs=1.5": "TypeError",
        "include_root=1": "TypeError",
        "2**40": "ValueError",
        "no such pid": "NoSuchProcess",
        "ancestor": "ValueError",
        "caller alive": True,
    }
    assert res["results"] == expected
    assert res["canary"][1] == [] and res["canary"][0] not in ("gone", "Z", "T")
    assert res["loner"][1] == [] and res["loner"][0] not in ("gone", "Z", "T")


@pytest.mark.parametrize(
    "call",
    [
        lambda: proctree.terminate_tree(0),
        lambda: proctree.terminate_tree(-1),
        lambda: proctree.terminate_tree(1),
        lambda: proctree.terminate_tree(os.getpid()),
        lambda: proctree.terminate_tree(os.getppid()),
        lambda: proctree.terminate_tree("12"),
        lambda: proctree.terminate_tree(True),
        lambda: proctree.terminate_tree(os.getpid() + 1, grace=-1),
        lambda: proctree.terminate_tree(os.getpid() + 1, grace=float("nan")),
        lambda: proctree.terminate_tree(os.getpid() + 1, max_procs=0),
    ],
)
def test_bad_input_never_reaches_a_signal_call(monkeypatch, call):
    # Outside a namespace, but with every way to send a signal replaced by a tripwire.
    def tripwire(*args):
        raise AssertionError(f"a signal was sent: {args}")

    monkeypatch.setattr(os, "kill", tripwire)
    monkeypatch.setattr(os, "killpg", tripwire)
    monkeypatch.setattr(_signals, "_killpg", tripwire)
    monkeypatch.setattr(signal, "pidfd_send_signal", tripwire)
    with pytest.raises((ValueError, TypeError)):
        call()


PID_REUSE = r"""
# root R (own session, survives the polite signals) -> member A (survives them too).
# When R gets SIGTERM (and A has had its TERM and CONT) it kills and reaps A, asks the factory F (not in the tree)
# for a bystander B at A's pid (ns_last_pid), waits for it, and carries on
# ignoring. After the grace the engine escalates: B must be left alone.
to_f_r, to_f_w = os.pipe()
to_r_r, to_r_w = os.pipe()

factory = os.fork()
if factory == 0:
    want = int(os.read(to_f_r, 100))
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(want - 1))
    br, bw = os.pipe()
    b = os.fork()
    if b == 0:
        for s in CATCHABLE:
            try:
                signal.signal(s, lambda n, fr: os.write(1, b"BYSTANDER GOT %d\n" % n))
            except (OSError, ValueError, RuntimeError):
                pass
        os.write(bw, b"x")
        while True:
            time.sleep(1000)
    os.read(br, 1)
    os.write(to_r_w, b"%d" % b)
    while True:
        time.sleep(1000)

ready_r, ready_w = os.pipe()
got_r, got_w = os.pipe()
root = os.fork()
if root == 0:
    os.setsid()
    IGNORE_POLITE_SIGNALS  # support/stubborn.py's line: TERM, INT and HUP ignored, as A inherits (each sets TERM after)
    a = os.fork()
    if a == 0:
        # A survives the polite round and says when it has had both of its
        # polite signals: only then is its pid reused, so the reuse cannot
        # race the engine's start-time check of those (that window is the
        # fallback's documented limit; docs/teardown.md).
        signal.signal(signal.SIGTERM, lambda n, f: os.write(got_w, b"T"))
        signal.signal(signal.SIGCONT, lambda n, f: os.write(got_w, b"C"))
        while True:
            time.sleep(1000)
    def on_term(n, f):
        got = b""
        while os.environ.get("REUSE_AT_ONCE") != "1" and not (b"T" in got and b"C" in got):
            got += os.read(got_r, 10)
        os.kill(a, signal.SIGKILL)
        os.waitpid(a, 0)
        os.write(to_f_w, b"%d" % a)
        os.read(to_r_r, 100)
    signal.signal(signal.SIGTERM, on_term)
    os.write(ready_w, b"%d" % a)
    while True:
        time.sleep(1000)

a_pid = int(os.read(ready_r, 100))
a_before = proctree.proc(a_pid)
age_past_one_tick(a_before)
rep = proctree.terminate_tree(root, grace=1.0)
b_now = proctree.proc(a_pid)
assert "reaped" not in rep.extra  # the root's status is left to its owner (this script)
_, status = os.waitpid(root, os.WNOHANG)
assert os.waitstatus_to_exitcode(status) == -signal.SIGKILL, status
done(
    pidfds=rep.extra["pidfds"],
    a=a_pid,
    reused=b_now.start_time != a_before.start_time and b_now.ppid == factory,
    b_state=b_now.state,
    found=sorted(p.identity for p in rep.found),
    exited=[p.pid for p in rep.exited],
    killed=[p.pid for p in rep.killed],
    a_identity=list(a_before.identity),
    root=root,
    ok=rep.ok,
)
"""

# The same trap one level down: a Target recorded for A, A replaced by B.
TARGET_REUSE = r"""
guard = _signals.Guard()
def bystander_at(pid):
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))
    pid_b, r = canary()
    return pid_b, r
out = {}
# "pidfd-same-tick": reused within one clock tick, where start times are equal
# and only the pidfd tells the two apart.
for mode, age in (("pidfd", True), ("start-time", True), ("pidfd-same-tick", False)):
    a = os.fork()
    if a == 0:
        while True:
            time.sleep(1000)
    a_proc = proctree.proc(a)
    if age:
        age_past_one_tick(a_proc)
    use_pidfd = mode.startswith("pidfd")
    target = _signals.open_target(a_proc, guard, use_pidfd=use_pidfd)
    os.kill(a, signal.SIGKILL)
    os.waitpid(a, 0)
    b, r = bystander_at(a)
    results = {
        "reused": b == a,
        "send": _signals.send(target, signal.SIGTERM, guard),
        "same_tick": proctree.proc(b).start_time == a_proc.start_time,
        "open_again": _signals.open_target(a_proc, guard, use_pidfd=use_pidfd) is None,
    }
    time.sleep(0.05)
    results["b_heard"] = heard(r)
    results["b_state"] = state(b)
    out[mode] = results
    target.close()
    os.kill(b, signal.SIGKILL)
    os.waitpid(b, 0)
done(**out)
"""


@pytest.mark.parametrize("mode", ["pidfd", "start-time", "pidfd, reuse racing the polite signals"])
def test_pid_reuse_bystander_is_never_signalled(mode):
    # The third mode reuses the pid while the engine is still sending the polite
    # signals: only a pidfd closes that window (the start-time check would race it).
    env = {"PROCTREE_NO_PIDFD": "1"} if mode == "start-time" else {}
    if mode.startswith("pidfd, "):
        env["REUSE_AT_ONCE"] = "1"
    res = run(PID_REUSE.replace("IGNORE_POLITE_SIGNALS", ignore_polite_signals_py()), **env)
    assert res["reused"], "the bystander did not get the member's pid"
    assert res["pidfds"] is mode.startswith("pidfd")
    assert res["b_state"] in ("S", "R"), "bystander was stopped or killed"
    assert res["a_identity"] in res["found"]
    assert res["a"] in res["exited"] and res["root"] in res["killed"]
    assert res["ok"]


def test_recorded_target_does_not_follow_its_pid_to_a_new_process():
    res = run(TARGET_REUSE)
    for mode in ("pidfd", "start-time", "pidfd-same-tick"):
        r = res[mode]
        assert r["reused"], f"{mode}: the bystander did not get the pid"
        assert r["send"] == "gone", f"{mode}: {r}"
        if mode != "pidfd-same-tick":
            assert r["open_again"], f"{mode}: open_target took the new process for the old"
        assert r["b_heard"] == [] and r["b_state"] in ("S", "R"), f"{mode}: {r}"
