"""Table-driven tests of Proc and Snapshot on synthetic process tables (no system calls)."""

import copy
import pickle
from collections.abc import Mapping

import pytest

import proctree
from proctree import AccessDenied, Error, NoSuchProcess, Proc, Snapshot


def P(pid, ppid, state="S", name=None, start=None):
    return Proc(pid, ppid, pid, pid, 1000, state, start if start is not None else pid * 10, name or f"p{pid}")


def table(*edges):
    """Snapshot from (pid, ppid) pairs."""
    return Snapshot([P(pid, ppid) for pid, ppid in edges])


# A machine-like table:
#   0 -> 1 (init), 2 (kthreadd)
#   2 -> 3, 4
#   1 -> 10, 20, 30
#   10 -> 11, 12;  11 -> 13;  20 -> 21;  13 -> 14
#   50 -> 51 -> 52 -> 50      (a ppid cycle, unreachable from 0)
#   60 -> 60                  (its own parent)
#   70's parent 99 is missing (a gap); 71 is 70's child
#   60 -> 61                  (a child of the self-parent)
MACHINE = table(
    (1, 0),
    (2, 0),
    (3, 2),
    (4, 2),
    (10, 1),
    (20, 1),
    (30, 1),
    (11, 10),
    (12, 10),
    (13, 11),
    (21, 20),
    (14, 13),
    (50, 52),
    (51, 50),
    (52, 51),
    (60, 60),
    (61, 60),
    (70, 99),
    (71, 70),
)

CHILDREN = [
    (0, [1, 2]),
    (1, [10, 20, 30]),
    (2, [3, 4]),
    (10, [11, 12]),
    (11, [13]),
    (12, []),
    (30, []),
    (50, [51]),
    (52, [50]),
    (60, [61]),  # not itself
    (61, []),
    (70, [71]),
]

DESCENDANTS = [
    # breadth-first: a whole level before the next, each parent's children in pid order
    (1, [10, 20, 30, 11, 12, 21, 13, 14]),
    (10, [11, 12, 13, 14]),
    (13, [14]),
    (14, []),
    (2, [3, 4]),
    (0, [1, 2, 10, 20, 30, 3, 4, 11, 12, 21, 13, 14]),
    (50, [51, 52]),  # cycle: stops, and 50 itself is excluded
    (51, [52, 50]),
    (60, [61]),
    (70, [71]),
]

ANCESTORS = [
    (14, [13, 11, 10, 1]),  # stops at the root: 0 is not a process
    (1, []),
    (3, [2]),
    (0, []),
    (50, [52, 51]),  # cycle: stops before repeating
    (60, []),  # its own parent
    (61, [60]),
    (70, []),  # gap: 99 is not in the table
    (71, [70]),
]


@pytest.mark.parametrize("pid,expected", CHILDREN)
def test_children(pid, expected):
    assert MACHINE.child_pids(pid) == expected
    assert [p.pid for p in MACHINE.children(pid)] == expected
    assert all(MACHINE[c].ppid == pid for c in expected)


@pytest.mark.parametrize("pid,expected", DESCENDANTS)
def test_descendants(pid, expected):
    assert MACHINE.descendant_pids(pid) == expected
    assert MACHINE.descendants(pid) == [MACHINE[d] for d in expected]
    assert pid not in expected


@pytest.mark.parametrize("pid,expected", ANCESTORS)
def test_ancestors(pid, expected):
    assert [p.pid for p in MACHINE.ancestors(pid)] == expected


def test_breadth_first_order_is_not_pid_order():
    # 5's child 100 is one level above 3's child 4: breadth-first puts it first.
    s = table((1, 0), (3, 1), (5, 1), (4, 3), (100, 5), (2, 4))
    assert s.descendant_pids(1) == [3, 5, 4, 100, 2]


def test_deep_chain_has_no_recursion_limit():
    n = 20000
    s = table(*[(i, i - 1) for i in range(1, n + 1)])
    assert s.descendant_pids(1) == list(range(2, n + 1))
    assert [p.pid for p in s.ancestors(n)] == list(range(n - 1, 0, -1))


def test_long_cycle():
    n = 5000
    s = table(*[(i, i - 1 if i > 1 else n) for i in range(1, n + 1)])
    assert s.descendant_pids(1) == list(range(2, n + 1))
    assert len(s.ancestors(1)) == n - 1


def test_wide_fanout():
    s = table((1, 0), *[(i, 1) for i in range(2, 5002)])
    assert s.child_pids(1) == list(range(2, 5002))
    assert s.descendant_pids(1) == list(range(2, 5002))


def test_input_order_does_not_matter():
    edges = [(14, 13), (1, 0), (13, 11), (11, 10), (10, 1), (12, 10)]
    a = table(*edges)
    b = table(*reversed(edges))
    assert list(a) == list(b) == sorted(p for p, _ in edges)
    assert a.descendant_pids(1) == b.descendant_pids(1) == [10, 11, 12, 13, 14]


@pytest.mark.parametrize(
    "edges",
    [
        [(1, 0), (1, 0)],
        [(1, 0), (2, 1), (1, 2)],
        [(5, 1), (3, 1), (5, 3)],
    ],
)
def test_duplicate_pids_are_refused(edges):
    with pytest.raises(ValueError):
        table(*edges)


@pytest.mark.parametrize("pid", [99, 5, 100000, 2**40])
@pytest.mark.parametrize("method", ["children", "child_pids", "descendants", "descendant_pids", "ancestors"])
def test_missing_pid_is_no_such_process(method, pid):
    with pytest.raises(NoSuchProcess) as info:
        getattr(MACHINE, method)(pid)
    assert info.value.pid == pid


BAD_KEYS = [
    (True, TypeError),
    (False, TypeError),
    ("1", TypeError),
    (b"1", TypeError),
    (1.0, TypeError),
    (None, TypeError),
    ([1], TypeError),
    (-1, ValueError),
    (-(2**70), ValueError),
]


@pytest.mark.parametrize("key,exc", BAD_KEYS, ids=[repr(k) for k, _ in BAD_KEYS])
@pytest.mark.parametrize("method", ["children", "child_pids", "descendants", "descendant_pids", "ancestors"])
def test_bad_keys(method, key, exc):
    with pytest.raises(exc):
        getattr(MACHINE, method)(key)


@pytest.mark.parametrize("key", [True, False, "1", 1.0, None, -1, 0, 99, (1,)])
def test_mapping_lookup_of_non_members(key):
    assert key not in MACHINE
    with pytest.raises(KeyError):
        MACHINE[key]
    assert MACHINE.get(key) is None


def test_mapping_behaviour():
    procs = [P(3, 1), P(1, 0), P(2, 1)]
    s = Snapshot(procs)
    assert isinstance(s, Mapping)
    assert len(s) == 3
    assert list(s) == [1, 2, 3]  # ascending pids
    assert list(s.keys()) == [1, 2, 3]
    assert list(s.values()) == [P(1, 0), P(2, 1), P(3, 1)]
    assert list(s.items()) == [(1, P(1, 0)), (2, P(2, 1)), (3, P(3, 1))]
    assert s[2] == P(2, 1)
    assert s.get(2) == P(2, 1) and s.get(4, "x") == "x"
    assert 1 in s and 4 not in s
    assert s == {1: P(1, 0), 2: P(2, 1), 3: P(3, 1)}
    assert s == Snapshot(reversed(procs))
    assert s != Snapshot(procs[:2])
    assert dict(s) == {p.pid: p for p in procs}
    assert "3 processes" in repr(s)


def test_snapshot_is_immutable():
    s = Snapshot([P(1, 0)])
    with pytest.raises(TypeError):
        s[2] = P(2, 1)
    with pytest.raises(TypeError):
        del s[1]
    with pytest.raises(AttributeError):
        s.update({})
    with pytest.raises(AttributeError):
        s.extra = 1


def test_snapshot_does_not_follow_its_input():
    procs = [P(1, 0), P(2, 1)]
    s = Snapshot(procs)
    procs.append(P(3, 1))
    procs[0] = P(9, 0)
    assert list(s) == [1, 2]


def test_snapshot_from_a_generator_and_empty():
    s = Snapshot(P(i, 0) for i in (3, 1, 2))
    assert list(s) == [1, 2, 3]
    empty = Snapshot()
    assert len(empty) == 0 and list(empty) == []
    assert empty.child_pids(0) == [] and empty.descendant_pids(0) == [] and empty.ancestors(0) == []
    with pytest.raises(NoSuchProcess):
        empty.children(1)


def test_queries_are_repeatable():
    # The children index is built on the first tree query; later queries reuse it.
    s = table((1, 0), (2, 1), (3, 2))
    assert s.descendant_pids(1) == [2, 3]
    assert s.descendant_pids(1) == [2, 3]
    assert s.child_pids(2) == [3]
    assert [p.pid for p in s.ancestors(3)] == [2, 1]


def test_records_are_the_ones_given():
    procs = [P(1, 0), P(2, 1)]
    s = Snapshot(procs)
    assert s[2] is procs[1]
    assert s.children(1)[0] is procs[1]


# ---------------------------------------------------------------------------
# Proc

STATES = [("R", False), ("S", False), ("D", False), ("Z", True), ("X", True), ("T", False), ("t", False), ("I", False)]


@pytest.mark.parametrize("state,zombie", STATES)
def test_is_zombie(state, zombie):
    assert P(5, 1, state=state).is_zombie is zombie


def test_proc_fields_and_identity():
    p = Proc(pid=5, ppid=1, pgid=5, sid=4, uid=1000, state="S", start_time=777, name="x")
    assert p._fields == ("pid", "ppid", "pgid", "sid", "uid", "state", "start_time", "name")
    assert (p.pid, p.ppid, p.pgid, p.sid, p.uid, p.state, p.start_time, p.name) == (5, 1, 5, 4, 1000, "S", 777, "x")
    assert p.identity == (5, 777)
    # the same pid with another start time is another process
    assert p._replace(start_time=778).identity != p.identity
    assert p == Proc(5, 1, 5, 4, 1000, "S", 777, "x")
    assert hash(p) == hash(Proc(5, 1, 5, 4, 1000, "S", 777, "x"))


def test_proc_is_immutable():
    p = P(5, 1)
    with pytest.raises(AttributeError):
        p.pid = 6
    with pytest.raises(AttributeError):
        p.is_zombie = True


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_proc_pickles(protocol):
    p = Proc(5, 1, 5, 4, 1000, "Z", 2**40, "a) b\n(c")
    q = pickle.loads(pickle.dumps(p, protocol))
    assert q == p and type(q) is Proc and q.is_zombie and q.identity == (5, 2**40)
    assert copy.deepcopy(p) == p


# ---------------------------------------------------------------------------
# Exceptions


@pytest.mark.parametrize("cls", [Error, NoSuchProcess, AccessDenied])
def test_exception_hierarchy(cls):
    assert issubclass(cls, Error) and issubclass(cls, Exception)
    assert getattr(proctree, cls.__name__) is cls


EXC_ARGS = [
    ((42,), {}, dict(pid=42, name=None, msg=None)),
    ((42, "bash"), {}, dict(pid=42, name="bash", msg=None)),
    ((42, "bash", "gone"), {}, dict(pid=42, name="bash", msg="gone")),
    ((42,), dict(msg="gone"), dict(pid=42, name=None, msg="gone")),
    ((), dict(pid=42, name="x"), dict(pid=42, name="x", msg=None)),
]


@pytest.mark.parametrize("cls", [NoSuchProcess, AccessDenied, Error])
@pytest.mark.parametrize("args,kwargs,attrs", EXC_ARGS)
@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_exceptions_pickle(cls, args, kwargs, attrs, protocol):
    e = cls(*args, **kwargs)
    for k, v in attrs.items():
        assert getattr(e, k) == v
    f = pickle.loads(pickle.dumps(e, protocol))
    assert type(f) is cls
    for k, v in attrs.items():
        assert getattr(f, k) == v
    assert str(f) == str(e)
    assert "42" in str(e)


def test_exception_messages():
    assert "42" in str(NoSuchProcess(42))
    assert "bash" in str(NoSuchProcess(42, "bash"))
    assert str(AccessDenied(7, msg="no")).startswith("no")
    with pytest.raises(NoSuchProcess):
        raise NoSuchProcess(1)
    with pytest.raises(Error):
        raise AccessDenied(1)


def test_procs_lists_every_record_in_pid_order_like_values():
    s = table((5, 1), (3, 1), (9, 5))
    assert s.procs() == list(s.values()) == sorted(s.values(), key=lambda p: p.pid)
    assert Snapshot().procs() == []


def test_procs_of_a_live_snapshot_matches_values():
    import proctree

    live = proctree.snapshot()
    assert live.procs() == list(live.values())
