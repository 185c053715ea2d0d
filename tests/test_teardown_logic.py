"""Table-driven tests of the teardown's pure decisions, on synthetic process tables.

No process is started or signalled here: membership selection (parent links,
kinship through groups and sessions, identity, protection, the cap) and the
Guard's refusals are decided on Proc records the tests write down.
"""
import pytest

from proctree import Proc, Snapshot
from proctree._membership import select
from proctree._signals import Guard
from proctree._teardown import _validated


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
            [101, 107, 104, 105],  # 105 still shares root's session; 103 and 106 hang off 102
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
    world = [P(1, 0, 1, 1), P(100, 1, 100, 100, start=30), P(101, 100, 100, 100, state="Z"), P(102, 1, 100, 100, state="Z")]
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
    assert _validated(12, 0, False, False, 1) == (12, 0.0, False, False, 1)
