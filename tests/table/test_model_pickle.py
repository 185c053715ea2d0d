"""A Snapshot pickles and copies like the immutable Mapping it is.

Both kinds: one built from Proc records, and a live one read by the C core
(whose rows sit in C memory behind a memoryview until asked for). After a
round trip it is equal, of the same type, and every tree query answers the
same; every pickle protocol; copy.copy and copy.deepcopy too.
"""

import copy
import os
import pickle

import pytest

import proctree
from proctree import NoSuchProcess, Proc, Snapshot

PROTOCOLS = list(range(pickle.HIGHEST_PROTOCOL + 1))


def P(pid, ppid, name=None):
    return Proc(pid, ppid, pid, pid, 1000, "S", pid * 10, name or f"p{pid}")


def synthetic():
    """A table with a cycle, a gap, a self-parent and odd names."""
    edges = [
        (1, 0),
        (2, 0),
        (3, 2),
        (10, 1),
        (11, 10),
        (12, 10),
        (13, 11),
        (50, 52),
        (51, 50),
        (52, 51),
        (60, 60),
        (61, 60),
        (70, 99),
        (71, 70),
    ]
    names = {11: "a (b) c", 12: "new\nline", 13: "\udcff undecodable"}
    return Snapshot([P(pid, ppid, names.get(pid)) for pid, ppid in edges])


def live():
    return proctree.snapshot()


def answers(snap):
    """Every tree query's answer for every pid (and 0, and a missing pid)."""
    out = {}
    for pid in [0, *snap, 999999]:
        for query in ("child_pids", "children", "descendant_pids", "descendants", "ancestors"):
            try:
                out[(query, pid)] = getattr(snap, query)(pid)
            except NoSuchProcess as exc:
                out[(query, pid)] = ("NoSuchProcess", exc.pid)
    return out


def roundtrips():
    yield from (("pickle", p) for p in PROTOCOLS)
    yield ("copy", None)
    yield ("deepcopy", None)


def roundtrip(snap, how, protocol):
    if how == "pickle":
        return pickle.loads(pickle.dumps(snap, protocol=protocol))
    return getattr(copy, how)(snap)


CASES = [(how, protocol) for how, protocol in roundtrips()]
IDS = [f"{how}{'' if p is None else p}" for how, p in CASES]


@pytest.mark.parametrize("make", [synthetic, live], ids=["synthetic", "live"])
@pytest.mark.parametrize("how,protocol", CASES, ids=IDS)
def test_roundtrip_is_equal_and_answers_the_same(make, how, protocol):
    snap = make()
    back = roundtrip(snap, how, protocol)
    assert type(back) is Snapshot
    assert back == snap and dict(back) == dict(snap)
    assert list(back) == list(snap) and len(back) == len(snap)
    assert answers(back) == answers(snap)
    assert all(type(p) is Proc for p in back.values())


def test_live_snapshot_roundtrip_keeps_this_process():
    snap = live()
    back = pickle.loads(pickle.dumps(snap))
    me = back[os.getpid()]
    assert me == snap[os.getpid()] and me.identity == snap[os.getpid()].identity


def test_roundtrip_of_a_queried_snapshot():
    # The children index a query builds is a cache, not state: it does not travel.
    snap = synthetic()
    snap.descendants(1)
    back = pickle.loads(pickle.dumps(snap))
    assert back.descendant_pids(1) == snap.descendant_pids(1)


def test_empty_snapshot_roundtrip():
    for how, protocol in CASES:
        back = roundtrip(Snapshot(), how, protocol)
        assert back == Snapshot() and len(back) == 0 and back.descendants(0) == []


class Mine(Snapshot):
    __slots__ = ()


def test_subclass_roundtrip_keeps_its_type():
    snap = Mine([P(1, 0), P(2, 1)])
    back = pickle.loads(pickle.dumps(snap))
    assert type(back) is Mine and back == snap and back.child_pids(1) == [2]
