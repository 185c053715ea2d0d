"""A hostile review's findings on terminate_tree / terminate_tree_async, kept as regression tests.

Each test asserts what README.md / docs/teardown.md promise: orphans adopted
by a subreaper caller or by a caller that is pid 1 are still ended; a cancel
or Ctrl-C during the first scan ends the whole tree, not the root alone;
include_root=False still finds the orphans left in the root's session, and
max_procs counts members only; a grace too big for a float is a ValueError.
Everything that starts or signals processes runs as pid 1 of a fresh PID
namespace (treekit.run_ns_json): a wrong kill stays inside it, and everything
in it dies with it. Each script arms an alarm so a hang cannot leave the
namespace behind.
"""

import pytest

import proctree
from support.treekit import run_ns_json

# Every namespace script starts with this: the namespace's init exits by itself
# after 60 s (init ignores default-action signals, so it needs a handler).
ALARM = r"""
signal.signal(signal.SIGALRM, lambda *a: os._exit(3))
signal.alarm(60)
"""

# A root that leads its own session and leaves an orphan in it: `(sleep 1000 &)`
# forks a subshell that forks sleep and exits, so sleep reparents away (to init,
# or to the nearest subreaper) while keeping the root's session.
ROOT_WITH_ORPHAN = r"""
import subprocess
def root_with_orphan():
    root = subprocess.Popen(["sh", "-c", "(sleep 1000 &); echo started; exec sleep 1000"],
                            stdout=subprocess.PIPE, start_new_session=True)
    root.stdout.readline()
    for _ in range(200):
        orphans = [p for p in proctree.snapshot().values() if p.sid == root.pid and p.pid != root.pid]
        if orphans and orphans[0].name == "sleep":
            return root, orphans[0]
        time.sleep(0.01)
    raise AssertionError("no orphan")
"""


def test_subreaper_caller_still_ends_the_orphans_its_tree_left():
    # A supervisor that is a child subreaper (PR_SET_CHILD_SUBREAPER, the usual way
    # to catch double forks) adopts the tree's orphans. The orphan lives in the
    # root's session, which the caller is not in: the caller cannot have started it
    # (fork keeps the session), so by the membership rule it is the tree's.
    r = run_ns_json(
        ALARM
        + ROOT_WITH_ORPHAN
        + r"""
import ctypes
rr, ww = os.pipe()
caller = os.fork()
if caller == 0:
    assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0   # PR_SET_CHILD_SUBREAPER
    root, orphan = root_with_orphan()
    rep = proctree.terminate_tree(root.pid, grace=0.5)
    time.sleep(0.2)
    out = dict(adopted_by_caller=orphan.ppid == os.getpid(), orphan=state(orphan.pid), ok=rep.ok)
    os.write(ww, json.dumps(out).encode())
    os._exit(0)
os.close(ww)
os.waitpid(caller, 0)
done(**json.loads(os.read(rr, 65536)))
"""
    )
    assert r["adopted_by_caller"]
    assert r["orphan"] in ("gone", "Z"), r
    assert r["ok"] is True


def test_pid1_caller_still_ends_the_orphans_its_tree_left():
    # The same rule as above, through pid 1: a supervisor running as a container's
    # pid 1 adopts every orphan, and `q.ppid in owners` then rejects all of them.
    r = run_ns_json(
        ALARM
        + ROOT_WITH_ORPHAN
        + r"""
assert os.getpid() == 1
root, orphan = root_with_orphan()
rep = proctree.terminate_tree(root.pid, grace=0.5)
time.sleep(0.2)
done(orphan=state(orphan.pid), ok=rep.ok, found=[p.pid for p in rep.found])
"""
    )
    assert r["orphan"] in ("gone", "Z"), r
    assert r["ok"] is True


CANCEL_SETUP = r"""
import asyncio, subprocess
def tree():
    p = subprocess.Popen(["sh", "-c", "sleep 1000 & sleep 1000 & echo r; wait"],
                         stdout=subprocess.PIPE, start_new_session=True)
    p.stdout.readline()
    for _ in range(200):
        kids = [c.pid for c in proctree.children(p.pid)]
        if len(kids) == 2:
            return p, kids
        time.sleep(0.01)
    raise AssertionError("tree not up")
def alive(pids):
    return [k for k in pids if state(k) not in ("gone", "Z")]
rr, ww = os.pipe()
caller = os.fork()
if caller == 0:
    out = main()
    os.write(ww, json.dumps(out).encode())
    os._exit(0)
os.close(ww)
os.waitpid(caller, 0)
done(**json.loads(os.read(rr, 65536)))
"""


def test_async_cancel_during_the_first_scan_still_ends_the_whole_tree():
    # "Cancelling it skips the rest of the grace: what is left is SIGKILLed at
    # once". A cancel that lands while the first snapshot runs (the first await,
    # e.g. asyncio.wait_for with a short timeout) kills the root alone: its
    # children are orphaned and keep running.
    r = run_ns_json(
        ALARM
        + r"""
def main():
    async def go():
        p, kids = tree()
        t = asyncio.create_task(proctree.terminate_tree_async(p.pid, grace=1.0))
        await asyncio.sleep(0)          # the task runs up to its first await: the first snapshot
        t.cancel()
        try:
            await t
            how = "finished"
        except asyncio.CancelledError:
            how = "cancelled"
        await asyncio.sleep(0.3)
        return dict(how=how, root=p.poll(), kids_alive=alive(kids))
    return asyncio.run(go())
"""
        + CANCEL_SETUP
    )
    assert r["how"] == "cancelled"
    assert r["kids_alive"] == [], r


def test_keyboard_interrupt_during_the_first_scan_still_ends_the_whole_tree():
    # The sync face: "(Ctrl-C in the sync face does the same.)" The interrupt is
    # injected into the first snapshot, where a real Ctrl-C lands on a big table.
    r = run_ns_json(
        ALARM
        + r"""
from proctree._table import binding as _binding
def main():
    p, kids = tree()
    real = _binding.snapshot
    calls = []
    def interrupted():
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real()
    _binding.snapshot = interrupted
    try:
        proctree.terminate_tree(p.pid, grace=1.0)
        how = "finished"
    except KeyboardInterrupt:
        how = "interrupted"
    finally:
        _binding.snapshot = real
    time.sleep(0.3)
    return dict(how=how, root=p.poll(), kids_alive=alive(kids))
"""
        + CANCEL_SETUP
    )
    assert r["how"] == "interrupted"
    assert r["kids_alive"] == [], r


def test_include_root_false_still_ends_an_orphan_left_in_the_roots_session():
    # The root leads its session and stays (include_root=False); its child, on
    # SIGTERM, waits a little (so the backed-off parent-link rescans miss the
    # window), leaves an orphan in the root's session with `(cmd &)`, and exits.
    # With include_root=True the final kinship scan finds the orphan; with False,
    # _leader_present() looks at members only, the root is not one, and the
    # orphan is left running while the report says ok.
    r = run_ns_json(
        ALARM
        + r"""
rr, ww = os.pipe()
caller = os.fork()
if caller == 0:
    r, w = os.pipe()
    root = os.fork()
    if root == 0:
        os.setsid()
        c = os.fork()
        if c == 0:
            def on_term(*a):
                time.sleep(0.3)
                if os.fork() == 0:
                    if os.fork() == 0:
                        os.write(w, b"%d " % os.getpid())
                        signal.signal(signal.SIGTERM, signal.SIG_DFL)
                        while True:
                            time.sleep(1000)
                    os._exit(0)
                os._exit(0)
            signal.signal(signal.SIGTERM, on_term)
            os.write(w, b"ready ")
            while True:
                time.sleep(1000)
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                time.sleep(1000)
    os.close(w)
    assert os.read(r, 6) == b"ready "
    rep = proctree.terminate_tree(root, grace=2.0, include_root=False)
    time.sleep(0.2)
    os.set_blocking(r, False)
    orphan = int(os.read(r, 100).split()[0])
    out = dict(orphan=state(orphan), orphan_sid=proctree.proc(orphan).sid == root, ok=rep.ok,
               root=state(root))
    os.write(ww, json.dumps(out).encode())
    os._exit(0)
os.close(ww)
os.waitpid(caller, 0)
done(**json.loads(os.read(rr, 65536)))
"""
    )
    assert r["root"] not in ("gone", "Z"), "include_root=False must leave the root alone"
    assert r["orphan"] in ("gone", "Z"), r
    assert r["ok"] is True


def test_include_root_false_with_max_procs_1_still_ends_one_member():
    # "At most max_procs members are held": with include_root=False the root is
    # not a member, yet it uses the only slot, so nothing at all is signalled.
    r = run_ns_json(
        ALARM
        + r"""
rr, ww = os.pipe()
caller = os.fork()
if caller == 0:
    root = os.fork()
    if root == 0:
        os.setsid()
        for _ in range(2):
            if os.fork() == 0:
                while True:
                    time.sleep(1000)
        while True:
            time.sleep(1000)
    time.sleep(0.2)
    rep = proctree.terminate_tree(root, grace=0.5, include_root=False, max_procs=1)
    out = dict(found=len(rep.found), truncated=rep.truncated)
    os.write(ww, json.dumps(out).encode())
    os._exit(0)
os.close(ww)
os.waitpid(caller, 0)
done(**json.loads(os.read(rr, 65536)))
"""
    )
    assert r["truncated"] is True
    assert r["found"] == 1, r


def test_a_grace_too_big_for_a_float_is_a_value_error():
    # Validation fails before anything touches the system (2**22 is a valid pid value
    # that cannot exist), so this runs outside a namespace.
    with pytest.raises(ValueError):
        proctree.terminate_tree(2**22, grace=10**400)
