"""Table-driven tests of the teardown's pure decisions, on synthetic process tables.

No process is started or signalled here: membership selection (parent links,
kinship through groups and sessions, identity, protection, the cap) and the
Guard's refusals are decided on Proc records the tests write down.
"""

import os

import pytest

from proctree import Proc, Snapshot
from proctree._teardown.engine import _validated
from proctree._teardown.membership import select
from proctree._teardown.signals import Guard


def P(pid, ppid, pgid=None, sid=None, start=100, state="S"):
    return Proc(pid, ppid, pgid if pgid is not None else pid, sid if sid is not None else 1, 0, state, start, f"p{pid}")


# A small world: 1 init; 50 the caller's shell session (the caller is 60);
# 100 the root (session + group leader) with a subtree; 200 an outsider tree.
WORLD = [
    P(1, 0, 1, 1, start=1),
    P(50, 1, 50, 50, start=10),  # shell
    P(60, 50, 60, 50, start=20),  # the caller
    P(100, 60, 100, 100, start=30),  # root: its own session and group
    P(101, 100, 100, 100, start=31),  # child
    P(102, 101, 102, 100, start=32),  # grandchild in its own group (job control)
    P(103, 102, 103, 103, start=33),  # great-grandchild, own session (setsid)
    P(104, 1, 100, 100, start=34),  # orphan, still in root's session and group
    P(105, 1, 102, 100, start=35),  # orphan in the grandchild's group
    P(106, 1, 103, 103, start=36),  # orphan in the great-grandchild's session
    P(107, 101, 100, 100, start=37, state="Z"),  # zombie child
    P(200, 1, 200, 200, start=40),  # outsider
    P(201, 200, 200, 200, start=41),
    P(202, 1, 50, 50, start=42),  # orphan in the shell's session (not the tree's)
]
ROOT = {100: 30}
PROTECTED = frozenset({0, 1, 60, 50})
OWNERS = frozenset({60, 50})


def run(procs=WORLD, anchors=ROOT, protected=PROTECTED, cap=1000, owners=OWNERS):
    sel = select(Snapshot(procs), dict(anchors), protected, cap, owners)
    return [p.pid for p in sel.new], [p.pid for p in sel.spared], sel.truncated


@pytest.mark.parametrize(
    "case, kwargs, new, spared, truncated",
    [
        ("links first, breadth-first, then kinship", {}, [101, 102, 107, 103, 104, 105, 106], [], False),
        (
            "a known member is not new again",
            {"anchors": {100: 30, 101: 31}},
            [102, 107, 103, 104, 105, 106],
            [],
            False,
        ),
        (
            "an anchor seen with another start time is someone else: nothing below it",
            {"anchors": {100: 999}},
            [],
            [],
            False,
        ),
        ("an anchor that is gone finds nothing", {"anchors": {300: 5}}, [], [], False),
        ("the cap stops growth and says truncated", {"cap": 3}, [101, 102], [], True),
        ("cap equal to the tree is not truncated", {"cap": 8}, [101, 102, 107, 103, 104, 105, 106], [], False),
        (
            "protected members are spared and not walked",
            {"protected": PROTECTED | {102}},
            # 104 is an orphan in the root's group, which 102 does not share:
            # taken. 105 is an orphan in 102's own group, started after it:
            # 102 may have started it, so it is ambiguous and not taken.
            # 103 and 106 hang off 102.
            [101, 107, 104],
            [102],
            False,
        ),
    ],
)
def test_select(case, kwargs, new, spared, truncated):
    assert run(**kwargs) == (new, spared, truncated), case


def test_outsiders_and_the_shells_session_are_never_members():
    new, _, _ = run()
    assert not {1, 50, 60, 200, 201, 202} & set(new)


def test_kinship_needs_the_leader_alive_with_its_start_time():
    # Root gone: its group and session may not be proved to be the tree's any more.
    world = [p for p in WORLD if p.pid != 100]
    new, _, _ = run(procs=world, anchors={100: 30, 101: 31})
    assert 104 not in new
    # Root's pid reused by a new leader: its group is not ours either.
    world = world + [P(100, 1, 100, 100, start=500)]
    new, _, _ = run(procs=world, anchors={100: 30})
    assert new == []


def test_caller_orphaned_in_the_trees_session_is_spared_and_its_children_are_its_own():
    world = [
        P(1, 0, 1, 1, start=1),
        P(100, 1, 100, 100, start=30),  # root, session leader
        P(101, 100, 100, 100, start=31),
        P(60, 1, 100, 100, start=32),  # the caller: orphaned, in root's session
        P(61, 60, 100, 100, start=33),  # the caller's own child
    ]
    new, spared, _ = run(procs=world, protected=frozenset({0, 1, 60}), owners=frozenset({60}))
    assert new == [101]
    assert spared == [60]


def test_cycles_in_parent_links_terminate():
    world = [P(1, 0, 1, 1), P(100, 101, 100, 100, start=30), P(101, 100, 100, 100, start=31)]
    new, _, _ = run(procs=world)
    assert new == [101]


def test_zombie_kin_is_not_taken_but_a_zombie_child_is():
    world = [
        P(1, 0, 1, 1),
        P(100, 1, 100, 100, start=30),
        P(101, 100, 100, 100, state="Z"),
        P(102, 1, 100, 100, state="Z"),
    ]
    new, _, _ = run(procs=world)
    assert new == [101]


@pytest.mark.parametrize(
    "pid, allowed",
    [(0, False), (1, False), (-1, False), (-100, False), (60, False), (50, False), (100, True), (2, True)],
)
def test_guard_allows(pid, allowed):
    g = Guard(me=60, ancestors=[50, 1])
    assert g.allows(pid) is allowed


@pytest.mark.parametrize(
    "args, exc",
    [
        ((0, 2.0, True, True, 10), ValueError),
        ((-1, 2.0, True, True, 10), ValueError),
        ((1, 2.0, True, True, 10), ValueError),
        (("12", 2.0, True, True, 10), TypeError),
        ((True, 2.0, True, True, 10), TypeError),
        ((12, -1, True, True, 10), ValueError),
        ((12, float("nan"), True, True, 10), ValueError),
        ((12, float("inf"), True, True, 10), ValueError),
        ((12, None, True, True, 10), TypeError),
        ((12, 2.0, 1, True, 10), TypeError),
        ((12, 2.0, True, None, 10), TypeError),
        ((12, 2.0, True, True, 0), ValueError),
        ((12, 2.0, True, True, True), TypeError),
        ((2**40, 2.0, True, True, 10), ValueError),
    ],
)
def test_validation_table(args, exc):
    with pytest.raises(exc):
        _validated(*args)


def test_validation_passes_good_values_through():
    assert _validated(12, 0, False, False, 1) == (12, 0.0, False, False, 1, False)
    assert _validated(12, 0, False, False, 1, True)[-1] is True


def test_reap_must_be_a_bool():
    with pytest.raises(TypeError):
        _validated(12, 2.0, True, True, 10, 1)


# -- the membership rule: kinship takes orphans only, never what a protected process started --

# A terminal session 300 (an interactive shell, not in any tree) runs `a | b`:
# a (310) leads the pipeline's group, b (311) is in it; both are the shell's children.
PIPELINE = [
    P(1, 0, 1, 1, start=1),
    P(300, 1, 300, 300, start=10),  # interactive shell, session leader
    P(310, 300, 310, 300, start=20),  # a: leads the job's group
    P(311, 300, 310, 300, start=21),  # b: same group, the shell's child
    P(312, 310, 310, 300, start=22),  # a's own child
]


def test_a_sibling_in_the_roots_group_is_not_taken():
    new, spared, _ = run(procs=PIPELINE, anchors={310: 20}, protected=frozenset({0, 1}), owners=frozenset())
    assert new == [312]
    assert spared == []


def test_a_sibling_becomes_a_member_once_orphaned_into_the_roots_group():
    # The shell died and b was adopted by init: an orphan left in a's group.
    world = [p for p in PIPELINE if p.pid != 300] + []
    world = [p if p.pid != 311 else P(311, 1, 310, 300, start=21) for p in world]
    new, _, _ = run(procs=world, anchors={310: 20}, protected=frozenset({0, 1}), owners=frozenset())
    assert new == [312, 311]


# The hostile review's case: a session leader L (400); the caller C (410) was
# forked by a subshell that exited, so C is init's child but still in L's
# session; C runs bash (411) which runs sleep (412).
CALLER_INSIDE = [
    P(1, 0, 1, 1, start=1),
    P(400, 1, 400, 400, start=10),  # L
    P(401, 400, 400, 400, start=11),  # L's own child
    P(405, 1, 400, 400, start=12),  # L's orphan, started before the caller
    P(410, 1, 400, 400, start=20),  # C, the caller, in L's group and session
    P(411, 410, 400, 400, start=21),  # C's bash
    P(412, 411, 400, 400, start=22),  # its sleep
    P(413, 1, 400, 400, start=23),  # an orphan started after C: C may have started it
    P(414, 401, 414, 400, start=24),  # L's child's own job group
    P(415, 1, 414, 400, start=25),  # orphan in that group: no protected process there
]
CALLER = dict(anchors={400: 10}, protected=frozenset({0, 1, 410}), owners=frozenset({410}))


def select_full(procs, anchors, protected, owners, theirs=None):
    return select(Snapshot(procs), dict(anchors), protected, 1000, owners, theirs=theirs)


def test_what_the_caller_started_inside_the_trees_session_is_never_a_member():
    sel = select_full(CALLER_INSIDE, **CALLER)
    assert [p.pid for p in sel.new] == [401, 414, 405, 415]
    assert [p.pid for p in sel.spared] == [410]
    assert [p.pid for p in sel.ambiguous] == [413]
    assert sel.theirs == {411: 21, 412: 22}


def test_what_the_caller_started_stays_theirs_after_it_is_orphaned():
    first = select_full(CALLER_INSIDE, **CALLER)
    # bash exits; sleep is adopted by init, still in L's session.
    world = [p for p in CALLER_INSIDE if p.pid != 411]
    world = [p if p.pid != 412 else P(412, 1, 410, 400, start=22) for p in world]
    again = select_full(
        world,
        anchors={400: 10, 401: 11, 405: 12, 414: 24, 415: 25},
        protected=CALLER["protected"],
        owners=CALLER["owners"],
        theirs=first.theirs,
    )
    assert [p.pid for p in again.new] == []
    assert 412 not in [p.pid for p in again.ambiguous]


def test_an_orphan_adopted_by_a_subreaper_in_another_session_is_a_member():
    world = [
        P(1, 0, 1, 1, start=1),
        P(500, 1, 500, 500, start=5),  # a subreaper outside the tree (e.g. systemd --user)
        P(100, 500, 100, 100, start=30),  # root, session leader
        P(101, 500, 100, 100, start=31),  # adopted by the subreaper, still in root's session
        P(102, 500, 500, 500, start=32),  # the subreaper's own child: another session
    ]
    new, _, _ = run(procs=world, anchors={100: 30}, protected=frozenset({0, 1}), owners=frozenset())
    assert new == [101]


def test_a_process_whose_parent_is_alive_in_the_same_session_belongs_to_that_parent():
    world = [
        P(1, 0, 1, 1, start=1),
        P(100, 1, 100, 100, start=30),  # root, session leader
        P(200, 1, 200, 100, start=31),  # an orphan in root's session: member
        P(201, 200, 201, 100, start=32),  # its child: member by parent link
        P(300, 1, 300, 300, start=5),
        P(301, 300, 301, 300, start=6),
    ]
    new, _, _ = run(procs=world, anchors={100: 30}, protected=frozenset({0, 1}), owners=frozenset())
    assert new == [200, 201]


def test_a_zombie_leader_still_proves_its_session_when_its_row_no_longer_says_so():
    # macOS reports a zombie's session (and may report its group) as 0: the
    # pid names a live session, so it cannot have been reused, and the anchor
    # holding it is the session's creator.
    world = [
        P(1, 0, 1, 1, start=1),
        P(100, 60, 0, 0, start=30, state="Z"),  # root, exited, group and session unreadable
        P(104, 1, 104, 100, start=34),  # its orphan, still in its session
    ]
    kw = dict(anchors={100: 30}, protected=frozenset({0, 1, 60}), owners=frozenset({60}))
    assert [p.pid for p in select_full(world, **kw).new] == [104]
    assert [p.pid for p in select_full(world, **{**kw, "anchors": {100: 31}}).new] == []


def test_a_pid_in_theirs_with_another_start_time_is_not_theirs():
    world = [P(1, 0, 1, 1), P(100, 1, 100, 100, start=30), P(101, 100, 100, 100, start=31)]
    sel = select_full(world, anchors={100: 30}, protected=frozenset({0, 1}), owners=frozenset(), theirs={101: 7})
    assert [p.pid for p in sel.new] == [101]
    sel = select_full(world, anchors={100: 30}, protected=frozenset({0, 1}), owners=frozenset(), theirs={101: 31})
    assert [p.pid for p in sel.new] == []


def test_an_orphan_in_the_roots_own_group_is_taken_when_the_caller_only_shares_the_session():
    # Popen(process_group=0): the root leads its group inside the caller's session.
    world = [
        P(1, 0, 1, 1, start=1),
        P(50, 1, 50, 50, start=5),  # the shell
        P(60, 50, 60, 50, start=10),  # the caller
        P(100, 60, 100, 50, start=20),  # root: own group, caller's session
        P(101, 1, 100, 50, start=21),  # `nohup cmd &` left in root's group
        P(102, 1, 60, 50, start=22),  # an orphan in the caller's group: not the tree's
    ]
    new, _, _ = run(procs=world, anchors={100: 20})
    assert new == [101]


@pytest.mark.parametrize(
    "world, anchors, owners, may_orphan",
    [
        (PIPELINE, {310: 20}, frozenset(), 1),  # b, held by the live shell
        (CALLER_INSIDE, {400: 10}, frozenset({410}), 0),  # the caller's subtree is theirs, never a member
        (WORLD, ROOT, OWNERS, 0),
    ],
)
def test_may_orphan_counts_what_could_join_without_a_fork(world, anchors, owners, may_orphan):
    protected = frozenset({0, 1}) | owners
    assert select_full(world, anchors, protected, owners).may_orphan == may_orphan


@pytest.mark.parametrize(
    "value, used",
    [(None, True), ("", True), ("0", True), ("1", False), ("yes", False), ("true", False)],
)
def test_one_pidfd_decision_for_every_reader_of_proctree_no_pidfd(monkeypatch, value, used):
    """PROCTREE_NO_PIDFD set to anything but "" or "0" turns pidfds off, for the teardown and every exit waiter alike."""
    from proctree._teardown import pidexit, signals

    if not (hasattr(os, "pidfd_open") and signals.pidfds_available()):
        pytest.skip("no pidfds here")
    if value is None:
        monkeypatch.delenv("PROCTREE_NO_PIDFD", raising=False)
    else:
        monkeypatch.setenv("PROCTREE_NO_PIDFD", value)
    monkeypatch.setattr(signals, "_pidfd_ok", None)  # probe again, with the variable as set
    assert signals.pidfds_available() is used
    for fd in (signals.open_pidfd(os.getpid()), pidexit.open_pidfd(os.getpid())):
        assert (fd is not None) is used
        if fd is not None:
            os.close(fd)
