"""Every adversarial tree of treekit against every teardown path, from one parametrized suite.

Paths: terminate_tree (pidfds, and the PROCTREE_NO_PIDFD=1 start-time
fallback), terminate_tree_async, Tree.terminate for each containment mode
available here (the builder's body run by proctree.spawn), and the keeper
answering its owner's death (a separate owner process spawns the tree and is
SIGKILLed; every member must be gone within grace + 2 s).

Each case checks that every reported member (and whatever the tree started
unreported) is gone, and that nothing outside the tree was signalled: a
bystander the test started hears no signal, and every member a report names
was in the tree before the teardown or joined it through a member (a parent
link, or a group or session a member leads). A combination that is a known
limit is marked xfail(strict=True) with its reason, never skipped.
"""

import asyncio
import os
import select
import subprocess
import sys
import time

import pytest

import proctree
from proctree._teardown import signals as _signals
from support.spawnkit import ALL_MODES
from support.treekit import Kit, OwnerKit, SpawnedKit, alive

GRACE = 0.5
HANG = 30.0  # a generous bound that only catches a hang

# Builder name -> keyword arguments (kept small: the suite runs each many times).
BUILDERS = {
    "sleeper": {},
    "hup_ignorer_behind_shell": {},
    "term_ignorer": {},
    "stopped": {},
    "setsid_descendant": {},
    "forker": {"limit": 40},
    "zombie_keeper": {},
    "orphan_in_session": {},
    "thread_forker": {},
    "double_forked_daemon": {},
}

# (builder, path) -> why it is a known limit. Matched with xfail(strict=True),
# so a limit that goes away fails the suite until its line is removed here.
_PLAIN = (
    "plain teardown follows parent links, groups and sessions: a daemon whose parent is gone and that "
    "left every group and session of the tree is already init's (docs/teardown.md, Limits)"
)
KNOWN_LIMITS = {
    ("double_forked_daemon", "sync-pidfd"): _PLAIN,
    ("double_forked_daemon", "sync-no-pidfd"): _PLAIN,
    ("double_forked_daemon", "async"): _PLAIN,
}

SYNC_PATHS = ["sync-pidfd", "sync-no-pidfd", "async"]
MODES = [m.values[0] if hasattr(m, "values") else m for m in ALL_MODES]
MODE_MARKS = {(m.values[0] if hasattr(m, "values") else m): getattr(m, "marks", ()) for m in ALL_MODES}
PATHS = SYNC_PATHS + [f"spawn-{m}" for m in MODES] + [f"owner-{m}" for m in MODES]


def _cases():
    for path in PATHS:
        marks = list(MODE_MARKS.get(path.split("-", 1)[1], ())) if path.startswith(("spawn-", "owner-")) else []
        for builder in BUILDERS:
            why = KNOWN_LIMITS.get((builder, path))
            case_marks = marks + ([pytest.mark.xfail(reason=why, strict=True)] if why else [])
            yield pytest.param(builder, path, marks=case_marks, id=f"{path}-{builder}")


# -- a bystander: a process outside every tree that records each signal it gets ----

_CANARY = r"""
import os, signal, sys, time
w = int(sys.argv[1])
for s in range(1, signal.NSIG):
    if s in (signal.SIGKILL, signal.SIGSTOP, 32, 33):
        continue
    try:
        signal.signal(s, lambda n, f: os.write(w, b"%d " % n))
    except (OSError, ValueError, RuntimeError):
        pass
os.write(w, b"ready ")
while True:
    time.sleep(1000)
"""


class Bystander:
    def __init__(self):
        r, w = os.pipe()
        self.popen = subprocess.Popen([sys.executable, "-c", _CANARY, str(w)], pass_fds=(w,))
        os.close(w)
        self.r = r
        got = b""
        deadline = time.monotonic() + HANG
        while b"ready " not in got and time.monotonic() < deadline:
            if select.select([r], [], [], 1.0)[0]:
                got += os.read(r, 100)
        assert b"ready " in got, "the bystander did not start"
        self.start_time = proctree.proc(self.popen.pid).start_time
        os.set_blocking(r, False)

    def heard(self):
        try:
            return [int(x) for x in os.read(self.r, 65536).split()]
        except BlockingIOError:
            return []

    def close(self):
        if alive(self.popen.pid, self.start_time):
            self.popen.kill()
        self.popen.wait()
        os.close(self.r)


@pytest.fixture
def bystander():
    b = Bystander()
    try:
        yield b
    finally:
        b.close()


# -- the checks -----------------------------------------------------------------


def tree_before(kit, anchors):
    """Identities of the tree just before its teardown: what the kit knows, the
    descendants of the anchors, and what is in a group or session an anchor leads."""
    snap = proctree.snapshot()
    kit._adopt_unreported()
    ids = {(pid, st) for pid, st in kit.known.items() if pid in snap and snap[pid].start_time == st}
    for a in anchors:
        if a in snap:
            ids.update(q.identity for q in snap.descendants(a))
            ids.add(snap[a].identity)
    leaders = {pid for pid, _ in ids}
    ids.update(q.identity for q in snap.values() if q.sid in leaders or q.pgid in leaders)
    return ids


def assert_only_the_tree(report, before):
    """Every member the report names was in the tree, or joined it through a member."""
    found = {p.identity for p in report.found}
    pids = {pid for pid, _ in found | before}
    strangers = [
        p
        for p in report.found
        if p.identity not in before and p.ppid not in pids and p.sid not in pids and p.pgid not in pids
    ]
    assert not strangers, f"the teardown took processes outside the tree: {strangers}"


def assert_all_gone(kit, report=None, timeout=5.0):
    kit._adopt_unreported()  # what the tree started unreported (a forker's children)
    deadline = time.monotonic() + timeout
    left = [pid for pid, st in kit.known.items() if alive(pid, st) and pid != os.getpid()]
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = [pid for pid in left if alive(pid, kit.known[pid])]
    assert not left, f"survived: {left}"
    if report is not None:
        assert report.ok, f"not ok: survivors {report.survivors}, truncated {report.truncated}"
        assert not [p for p in report.found if alive(p.pid, p.start_time)]


def assert_bystander_untouched(bystander):
    assert alive(bystander.popen.pid, bystander.start_time), "the bystander was killed"
    assert bystander.heard() == [], "the bystander was signalled"


# -- the paths --------------------------------------------------------------------


def _kit_for(path):
    if path.startswith("spawn-"):
        return SpawnedKit(path.split("-", 1)[1], grace=GRACE)
    if path.startswith("owner-"):
        return OwnerKit(path.split("-", 1)[1], grace=GRACE)
    return Kit()


def _tear_down(path, kit, tree, monkeypatch):
    """Run the path's teardown on tree; return its report (None for the owner's death)."""
    if path == "sync-pidfd":
        if not _signals.pidfds_available():
            pytest.xfail("pidfds are not available on this kernel")  # the fallback case covers it
        return proctree.terminate_tree(tree.root, grace=GRACE)
    if path == "sync-no-pidfd":
        monkeypatch.setenv("PROCTREE_NO_PIDFD", "1")
        monkeypatch.setattr(_signals, "_pidfd_ok", None)  # probe again, with the variable set
        assert not _signals.pidfds_available()
        return proctree.terminate_tree(tree.root, grace=GRACE)
    if path == "async":
        return asyncio.run(asyncio.wait_for(proctree.terminate_tree_async(tree.root, grace=GRACE), HANG))
    if path.startswith("spawn-"):
        return tree.contained.terminate(grace=GRACE)
    tree.owner.kill()
    tree.owner.wait()
    return None


@pytest.mark.parametrize(("builder", "path"), list(_cases()))
def test_every_tree_against_every_teardown_path(builder, path, bystander, monkeypatch):
    kit = _kit_for(path)
    try:
        tree = getattr(kit, builder)(**BUILDERS[builder])
        anchors = [tree.root] + ([tree.keeper] if hasattr(tree, "keeper") else [])
        before = tree_before(kit, anchors)
        zombies = {pid for pid in tree.pids if not alive(pid)}  # already gone: a report need not name them
        t0 = time.monotonic()
        report = _tear_down(path, kit, tree, monkeypatch)
        if report is None:
            # The keeper answers its owner's death: TERM, then KILL after the grace.
            assert_all_gone(kit, timeout=GRACE + 2.0 - (time.monotonic() - t0))
        else:
            assert_all_gone(kit, report)
            assert_only_the_tree(report, before)
            members = {p.pid for p in report.found} | ({tree.root} if path.startswith("spawn-") else set())
            reported = set(tree.pids) - zombies - {getattr(tree, "keeper", None)}
            assert reported <= members | {tree.root}, f"reported but not found: {reported - members}"
        assert_bystander_untouched(bystander)
    finally:
        kit.cleanup()


def test_the_suite_covers_every_builder_of_the_kit():
    builders = {
        name
        for name, fn in vars(Kit).items()
        if callable(fn)
        and not name.startswith("_")
        and fn.__doc__
        and name
        not in (
            "start",
            "register",
            "still_alive",
            "python_env",
            "cleanup",
        )
    }
    # Sized trees are the load tests' business (test_teardown.py, the benchmarks);
    # member_of_nobody needs root and has its own tests.
    left_out = {"chain", "wide", "member_of_nobody"}
    assert builders - left_out == set(BUILDERS), builders ^ (set(BUILDERS) | left_out)


def test_a_known_limit_names_a_real_case():
    assert set(KNOWN_LIMITS) <= {(b, p) for p in PATHS for b in BUILDERS}
