"""terminate_tree on real adversarial trees: nothing of the tree survives, the report is right.

Trees come from treekit (pids reported through a pipe); the kit fixture ends
whatever a failing test leaves, and conftest's fixture fails a test that
leaves any process behind. Time bounds here only catch hangs; speed lives in
benchmarks/bench_teardown.py.
"""

import asyncio
import json
import os
import signal
import time

import pytest

import proctree
from proctree._teardown import signals as _signals
from support.treekit import alive, run_as_nobody

HANG = 20.0  # a generous bound that only catches a hang


def pids(procs):
    return sorted(p.pid for p in procs)


def assert_all_gone(tree, report):
    left = [p for p in tree.pids if alive(p)]
    assert not left, f"survived: {left}"
    assert report.ok and not report.survivors
    assert set(tree.pids) <= {p.pid for p in report.found}
    ended = {p.identity for p in report.exited} | {p.identity for p in report.killed}
    assert ended == {p.identity for p in report.found}, "every member is exited or killed, once"
    assert not {p.identity for p in report.exited} & {p.identity for p in report.killed}


@pytest.fixture(params=["pidfd", "start-time"])
def identity_mode(request, monkeypatch):
    """Run a test with pidfds, and again with the start-time fallback (macOS's path)."""
    if request.param == "pidfd" and not _signals.pidfds_available():
        pytest.skip("pidfds are not available here")
    monkeypatch.setattr(_signals, "_pidfd_ok", request.param == "pidfd")
    return request.param


def test_cooperative_tree_ends_at_once(kit, identity_mode):
    tree = kit.sleeper()
    report = proctree.terminate_tree(tree.root, grace=60)
    assert_all_gone(tree, report)
    assert report.elapsed < HANG, "returned as soon as the tree was gone, not after the grace"
    assert not report.killed and not report.late and not report.truncated
    assert report.root.pid == tree.root
    assert report.extra["pidfds"] is (identity_mode == "pidfd")


def test_seed_reproduction_hup_ignorer_in_its_own_group_behind_a_shell(kit):
    tree = kit.hup_ignorer_behind_shell()
    job = proctree.proc(tree.role("job"))
    assert job.pgid == job.pid != proctree.proc(tree.root).pgid
    report = proctree.terminate_tree(tree.root, grace=60)
    assert_all_gone(tree, report)
    assert job.identity in {p.identity for p in report.exited}, "SIGTERM by pid reached it"
    assert report.extra["group"].endswith("not hung up"), "no hang-up unless asked"
    assert set(report.signals.values()) == {"SIGTERM"}


def test_hangup_true_hangs_up_the_roots_group_first(kit):
    tree = kit.hup_ignorer_behind_shell()
    report = proctree.terminate_tree(tree.root, grace=60, hangup=True)
    assert_all_gone(tree, report)
    assert report.extra["group"].startswith("SIGHUP to group")


def test_term_ignorer_needs_the_escalation(kit, identity_mode):
    tree = kit.term_ignorer()
    report = proctree.terminate_tree(tree.root, grace=0.3)
    assert_all_gone(tree, report)
    assert pids(report.killed) == [tree.role("ignorer")]
    assert pids(report.exited) == [tree.root]
    assert 0.3 <= report.elapsed < HANG


def test_stopped_process_acts_on_sigterm(kit):
    tree = kit.stopped()
    assert proctree.proc(tree.role("stopped")).state in ("T", "t")
    report = proctree.terminate_tree(tree.root, grace=60)
    assert_all_gone(tree, report)
    assert not report.killed, "SIGCONT after SIGTERM let it end politely"
    assert report.elapsed < HANG


def test_setsid_descendant_still_parented_is_found(kit):
    tree = kit.setsid_descendant()
    leader = proctree.proc(tree.role("session_leader"))
    assert leader.sid == leader.pid
    report = proctree.terminate_tree(tree.root, grace=60)
    assert_all_gone(tree, report)


def test_forking_during_teardown_adds_late_members(kit, identity_mode):
    tree = kit.forker(limit=300)  # starts forking when it gets SIGTERM
    report = proctree.terminate_tree(tree.root, grace=0.2)
    assert_all_gone(tree, report)
    assert report.late, "children forked during the teardown were taken in"
    assert {p.identity for p in report.late} <= {p.identity for p in report.found}
    assert all(p.ppid == tree.root for p in report.late)
    assert len(report.found) <= 301 and not report.truncated
    # conftest's leak check proves none of the (unreported) children survived.


def test_zombie_counts_as_gone(kit):
    tree = kit.zombie_keeper()
    zombie = proctree.proc(tree.role("zombie"))
    assert zombie.is_zombie
    report = proctree.terminate_tree(tree.root, grace=60)
    assert_all_gone(tree, report)
    assert zombie.identity in {p.identity for p in report.exited}
    assert not report.killed and report.elapsed < HANG


def test_orphan_whose_parent_died_is_found_through_the_session(kit):
    tree = kit.orphan_in_session()
    orphan = proctree.proc(tree.role("orphan"))
    assert orphan.ppid != tree.root and orphan.sid == tree.root
    report = proctree.terminate_tree(tree.root, grace=60)
    assert_all_gone(tree, report)
    assert orphan.identity in {p.identity for p in report.found}


def test_chain_300_deep(kit):
    tree = kit.chain(300)
    report = proctree.terminate_tree(tree.root, grace=60)
    assert_all_gone(tree, report)
    assert len(report.found) == 301


def test_tree_1000_wide(kit):
    tree = kit.wide(1000)
    report = proctree.terminate_tree(tree.root, grace=60)
    assert_all_gone(tree, report)
    assert len(report.found) == 1001


def test_children_forked_by_a_non_main_thread(kit):
    tree = kit.thread_forker()
    report = proctree.terminate_tree(tree.root, grace=60)
    assert_all_gone(tree, report)
    assert set(tree.roles("thread_child")) <= {p.pid for p in report.found}


def test_max_procs_bounds_the_work_and_says_truncated(kit):
    tree = kit.wide(40)
    report = proctree.terminate_tree(tree.root, grace=60, max_procs=10)
    assert report.truncated
    assert len(report.found) == 10
    assert not any(alive(p.pid, p.start_time) for p in report.found), "what it found, it ended"
    # The other 30 were orphaned (their parent is gone); the kit ends them.


def test_truncated_fork_bomb_is_still_ended_through_the_verified_group(kit):
    # A forker whose children inherit its TERM handler and the other polite signals ignored: the
    # members past max_procs cannot be held, so only the group SIGKILL reaches them.
    # The grace is the forker's time to fork past max_procs (one child per ms when
    # the machine is idle, far slower on a loaded one).
    tree = kit.forker(limit=120)
    report = proctree.terminate_tree(tree.root, grace=2.0, max_procs=20)
    assert report.truncated and len(report.found) == 20
    assert "SIGKILL to group" in report.extra["group"] and report.extra["group"].endswith("sent")
    assert not any(alive(p.pid, p.start_time) for p in report.found)
    # conftest's leak check proves the unheld children died too.


def test_include_root_false_spares_the_root(kit):
    tree = kit.sleeper()
    report = proctree.terminate_tree(tree.root, grace=60, include_root=False)
    assert alive(tree.root)
    assert not alive(tree.role("child"))
    assert pids(report.found) == [tree.role("child")]
    assert report.extra["group"] == "not signalled"


def test_signal_group_false_sends_no_hangup(kit):
    tree = kit.sleeper()
    report = proctree.terminate_tree(tree.root, grace=60, signal_group=False)
    assert_all_gone(tree, report)
    assert report.extra["group"] == "not signalled"


def test_group_hangup_skipped_when_the_root_shares_the_callers_group(kit):
    tree = kit.sleeper(new_session=False)
    assert proctree.proc(tree.root).pgid == os.getpgid(0)
    report = proctree.terminate_tree(tree.root, grace=60)
    assert_all_gone(tree, report)
    assert report.extra["group"].startswith("skipped")


def _first_signal(report):
    """What ended a cooperative root: the group SIGHUP when it was sent and the root does not
    ignore it, else the SIGTERM.

    The root inherits this process's dispositions: under nohup (SIGHUP ignored)
    the SIGHUP is sent and does nothing, and the SIGTERM ends it.
    """
    hup_counts = signal.getsignal(signal.SIGHUP) != signal.SIG_IGN
    return signal.SIGHUP if hup_counts and report.extra["group"].startswith("SIGHUP") else signal.SIGTERM


def test_own_child_root_is_left_to_its_popen_with_its_exit_status(kit):
    tree = kit.sleeper()
    report = proctree.terminate_tree(tree.root, grace=60)
    assert_all_gone(tree, report)
    assert "reaped" not in report.extra
    assert proctree.proc(tree.root).is_zombie  # the status waits for its owner
    assert tree.popen.wait(timeout=5) == -_first_signal(report)


def test_reap_true_reaps_own_children_and_records_their_status(kit):
    tree = kit.sleeper()
    report = proctree.terminate_tree(tree.root, grace=60, reap=True)
    assert_all_gone(tree, report)
    assert report.extra["reaped"][tree.root] == -_first_signal(report)
    with pytest.raises(proctree.NoSuchProcess):
        proctree.proc(tree.root)  # not even a zombie


def test_nonexistent_pid_raises_no_such_process():
    with pytest.raises(proctree.NoSuchProcess):
        proctree.terminate_tree(4_000_000)


def test_report_to_dict_is_json_ready(kit):
    tree = kit.term_ignorer()
    d = proctree.terminate_tree(tree.root, grace=0.1).to_dict()
    assert json.loads(json.dumps(d))["ok"] is True
    assert [p["pid"] for p in d["killed"]] == [tree.role("ignorer")]


# -- the caller inside the tree --------------------------------------------------

_CALLER = r"""
import json, os, sys
import proctree
root, out = int(sys.argv[1]), int(sys.argv[2])
try:
    r = proctree.terminate_tree(root, grace=0.5)
    res = {"ok": r.ok, "found": [p.pid for p in r.found], "spared": r.extra.get("spared", [])}
except ValueError as exc:
    res = {"refused": str(exc)}
os.write(out, json.dumps(res).encode())
"""


def test_caller_orphaned_inside_the_trees_session_survives(kit):
    # root (session leader) -> middle -> caller; the middle exits, so the caller
    # is an orphan in root's session: kin of the tree, and the one calling.
    rr, rw = os.pipe()
    try:
        tree = kit.start(
            """
            OUT = int(sys.argv[2])
            say("root")
            r, w = os.pipe()
            def middle():
                def caller():
                    os.close(w)
                    os.read(r, 1)  # EOF once the middle has exited: we are an orphan
                    os.execv(sys.executable, [sys.executable, "-c", CALLER, str(os.getsid(0)), str(OUT)])
                say("caller", child(caller))
            m = child(middle)
            os.close(w)
            os.waitpid(m, 0)
            say("worker", child(idle))
            ready()
            idle()
            """.replace("CALLER", repr(_CALLER)),
            extra_args=(rw,),
            pass_fds=(rw,),
            env=kit.python_env(),
        )
        os.close(rw)
        rw = None
        with os.fdopen(rr, "rb") as f:
            rr = None
            res = json.loads(f.read() or b"{}")  # EOF when the caller (last writer) exits
    finally:
        for fd in (rr, rw):
            if fd is not None:
                os.close(fd)
    caller = tree.role("caller")
    assert res.get("ok") is True, res
    assert res["spared"] == [caller]
    assert caller not in res["found"]
    assert {tree.root, tree.role("worker")} <= set(res["found"])
    assert not alive(tree.root) and not alive(tree.role("worker"))


def test_caller_below_the_root_is_refused_before_any_signal(kit):
    tree = kit.start(
        """
        say("root")
        def member():
            try:
                proctree.terminate_tree(os.getppid())
                say("not_refused")
            except ValueError:
                say("refused")
            ready()
            idle()
        import proctree
        child(member)
        idle()
        """,
        env=kit.python_env(),
    )
    assert tree.roles("refused") and not tree.roles("not_refused")
    assert all(alive(p) for p in tree.pids)


# -- a member the caller may not signal --------------------------------------------


def test_member_of_another_user_is_reported_denied(kit):
    tree = kit.member_of_nobody()

    def as_nobody():  # may signal the dropped child, not the root
        rep = proctree.terminate_tree(tree.root, grace=0.2)
        return json.dumps(rep.to_dict()).encode(), 0

    data, _ = run_as_nobody(as_nobody)
    rep = json.loads(data)
    assert [p["pid"] for p in rep["denied"]] == [tree.root]
    assert [p["pid"] for p in rep["survivors"]] == [tree.root]
    assert rep["ok"] is False
    assert not alive(tree.role("nobody"))
    assert alive(tree.root)


# -- the asyncio face --------------------------------------------------------------


def test_async_face_does_not_block_the_loop(kit):
    tree = kit.term_ignorer()

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        t = asyncio.create_task(ticker())
        report = await proctree.terminate_tree_async(tree.root, grace=0.5)
        t.cancel()
        return report, ticks

    report, ticks = asyncio.run(main())
    assert_all_gone(tree, report)
    assert pids(report.killed) == [tree.role("ignorer")]
    assert ticks >= 10, f"the loop ran only {ticks} ticks during a 0.5 s grace"


def test_async_cancel_kills_what_is_left_at_once(kit):
    tree = kit.term_ignorer()

    async def main():
        task = asyncio.create_task(proctree.terminate_tree_async(tree.root, grace=60))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    deadline = time.monotonic() + HANG
    while alive(tree.role("ignorer")) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not alive(tree.role("ignorer"))


def test_async_bad_input_raises_on_await():
    with pytest.raises(ValueError):
        asyncio.run(proctree.terminate_tree_async(1))


# -- the kit itself --------------------------------------------------------------


def test_kit_cleanup_takes_in_children_its_trees_did_not_report():
    from support.treekit import Kit

    k = Kit()
    try:
        tree = k.forker(limit=30)
        os.kill(tree.root, signal.SIGTERM)  # the forker's cue: 30 unreported children
        deadline = time.monotonic() + HANG
        while len(proctree.children(tree.root)) < 30 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        k.cleanup()
    left = [p for p in proctree.snapshot().values() if (p.ppid == tree.root or p.sid == tree.root) and not p.is_zombie]
    assert not left
