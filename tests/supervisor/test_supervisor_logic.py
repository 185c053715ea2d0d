"""The supervisor's pure rules on tables: dependency graphs, restart decisions, names, commands, snapshots."""

import json

import pytest

from proctree._errors import SupervisorError, UnknownServiceError
from proctree._supervisor import deps, restart
from proctree._supervisor.snapshot import LIVE, STATUSES, TERMINAL, ServiceSnapshot, is_terminal

# --- depends_on ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, ()),
        ({}, ()),
        ({"db": "ready"}, (("db", "ready"),)),
        ({"web": "started", "db": "completed"}, (("db", "completed"), ("web", "started"))),
        (["db", "cache"], (("cache", "started"), ("db", "started"))),
        (("db",), (("db", "started"),)),
    ],
)
def test_depends_on_is_normalised(value, expected):
    assert deps.check_depends_on(value) == expected


@pytest.mark.parametrize(
    "value, error, words",
    [
        ("db", TypeError, "not a string"),
        (b"db", TypeError, "not a string"),
        (5, TypeError, "int"),
        ({"db": "healthy"}, ValueError, "started, ready, completed"),
        ({"db": None}, ValueError, "condition"),
        ({1: "ready"}, TypeError, "must be a str"),
        ({"": "ready"}, ValueError, "empty"),
        (["db", "db"], ValueError, "named twice"),
    ],
)
def test_bad_depends_on_is_refused(value, error, words):
    with pytest.raises(error, match=words):
        deps.check_depends_on(value)


@pytest.mark.parametrize(
    "graph, cycle",
    [
        ({}, None),
        ({"a": []}, None),
        ({"a": ["b"], "b": []}, None),
        ({"a": ["a"]}, ["a", "a"]),
        ({"a": ["b"], "b": ["a"]}, ["a", "b", "a"]),
        ({"a": ["b"], "b": ["c"], "c": ["b"]}, ["b", "c", "b"]),
        ({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}, None),  # a diamond is no cycle
        ({"a": ["outside"]}, None),  # names outside the graph are not followed
    ],
)
def test_find_cycle(graph, cycle):
    assert deps.find_cycle(graph) == cycle


def test_a_long_chain_is_walked_without_recursion():
    n = 20000
    graph = {f"n{i}": [f"n{i + 1}"] for i in range(n)} | {f"n{n}": []}
    assert deps.find_cycle(graph) is None
    graph[f"n{n}"] = ["n0"]
    cycle = deps.find_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1] and len(cycle) == n + 2


@pytest.mark.parametrize(
    "graph, known, words",
    [
        ({"web": ["db"]}, (), "'web' depends on unknown 'db'"),
        ({"web": ["db"], "db": ["web"]}, (), "dependency cycle: db -> web -> db"),
        ({"web": ["web"]}, (), "dependency cycle: web -> web"),
    ],
)
def test_check_graph_refuses(graph, known, words):
    with pytest.raises(ValueError, match=words):
        deps.check_graph(graph, known)


def test_check_graph_accepts_known_names_outside_the_batch():
    deps.check_graph({"web": ["db"]}, known={"db"})


@pytest.mark.parametrize(
    "graph, expected",
    [
        ({}, []),
        ({"a": [], "b": []}, [["a", "b"]]),
        ({"web": ["db", "migrate"], "migrate": ["db"], "db": []}, [["db"], ["migrate"], ["web"]]),
        ({"a": ["x"], "b": []}, [["a", "b"]]),  # x is outside: already there
        ({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}, [["d"], ["b", "c"], ["a"]]),
    ],
)
def test_levels_and_stop_levels(graph, expected):
    assert deps.levels(graph) == expected
    assert deps.stop_levels(graph) == list(reversed(expected))


def test_levels_refuse_a_cycle():
    with pytest.raises(ValueError, match="cycle"):
        deps.levels({"a": ["b"], "b": ["a"], "c": []})


# --- restarts ---------------------------------------------------------------------------------

B = restart.Backoff(initial=1.0, factor=2.0, maximum=10.0, jitter=0.2, reset_after=5.0)


@pytest.mark.parametrize(
    "policy, failed, expected",
    [
        ("no", True, False),
        ("no", False, False),
        ("on-failure", True, True),
        ("on-failure", False, False),
        ("always", True, True),
        ("always", False, True),
    ],
)
def test_wants_restart(policy, failed, expected):
    assert restart.wants_restart(policy, failed) is expected


@pytest.mark.parametrize(
    "attempt, draw, expected",
    [
        (0, 0.5, 1.0),
        (1, 0.5, 2.0),
        (2, 0.5, 4.0),
        (3, 0.5, 8.0),
        (4, 0.5, 10.0),  # capped
        (10_000, 0.5, 10.0),  # no overflow
        (0, 0.0, 0.8),  # -20 %
        (0, 0.999999, 1.2),  # +20 %
        (4, 0.999999, 10.0),  # the cap holds with jitter too
    ],
)
def test_backoff_delay(attempt, draw, expected):
    assert B.delay(attempt, draw) == pytest.approx(expected, rel=1e-4)


def test_delays_grow_whatever_the_jitter_until_the_cap():
    # factor 2 with +-20 %: the largest draw of one step stays below the smallest of the next.
    for n in range(3):
        assert B.delay(n, 0.999999) < B.delay(n + 1, 0.0)


@pytest.mark.parametrize(
    "policy, max_restarts, failed, uptime, streak, expected",
    [
        ("no", 5, True, 0.1, 0, restart.Decision(False, streak=0)),
        ("on-failure", 5, False, 0.1, 0, restart.Decision(False, streak=0)),
        ("on-failure", 5, True, 0.1, 0, restart.Decision(True, 1.0, streak=1)),
        ("on-failure", 5, True, 0.1, 2, restart.Decision(True, 4.0, streak=3)),
        ("on-failure", 3, True, 0.1, 3, restart.Decision(False, crash_loop=True, streak=3, spent=True)),
        ("on-failure", 1, True, 0.1, 1, restart.Decision(False, crash_loop=True, streak=1, spent=True)),
        # max_restarts=0: one failure, no restart, and no loop to speak of
        ("on-failure", 0, True, 0.1, 0, restart.Decision(False, crash_loop=False, streak=0, spent=True)),
        ("on-failure", 0, True, 60.0, 0, restart.Decision(False, crash_loop=False, streak=0, spent=True)),
        ("always", 0, False, 0.1, 0, restart.Decision(False, crash_loop=False, streak=0, spent=True)),
        ("on-failure", 0, False, 0.1, 0, restart.Decision(False, streak=0)),
        ("on-failure", 3, True, 6.0, 3, restart.Decision(True, 1.0, streak=1)),  # a long run resets the count
        ("always", 3, False, 0.1, 1, restart.Decision(True, 2.0, streak=2)),
        ("always", None, True, 0.1, 1000, restart.Decision(True, 10.0, streak=1001)),
    ],
)
def test_decide(policy, max_restarts, failed, uptime, streak, expected):
    got = restart.decide(policy, max_restarts, B, failed=failed, uptime=uptime, streak=streak, draw=lambda: 0.5)
    assert got == expected


@pytest.mark.parametrize(
    "value, error",
    [(None, TypeError), ("sometimes", ValueError), ("No", ValueError), (1, TypeError)],
)
def test_bad_policy(value, error):
    with pytest.raises(error):
        restart.check_policy(value)


@pytest.mark.parametrize("value, error", [(-1, ValueError), (True, TypeError), (1.5, TypeError), ("3", TypeError)])
def test_bad_max_restarts(value, error):
    with pytest.raises(error):
        restart.check_max_restarts(value)


@pytest.mark.parametrize(
    "kw",
    [
        {"initial": -1},
        {"initial": float("nan")},
        {"maximum": float("inf")},
        {"factor": 0.5},
        {"factor": float("inf")},
        {"jitter": 1.0},
        {"jitter": -0.1},
        {"reset_after": "10"},
    ],
)
def test_bad_backoff(kw):
    with pytest.raises((TypeError, ValueError)):
        restart.Backoff(**kw)


# --- snapshots and errors ---------------------------------------------------------------------


def test_statuses_split_into_live_and_terminal():
    assert LIVE | TERMINAL == set(STATUSES) and not LIVE & TERMINAL
    assert [s for s in STATUSES if is_terminal(s)] == ["exited", "failed", "stopped"]


def test_a_snapshot_is_immutable_and_serialises():
    snap = ServiceSnapshot(
        id="s1",
        name="web",
        command=("python", "-m", "http.server"),
        status="ready",
        pid=123,
        last_rows=("a", "b"),
        depends_on=(("db", "ready"),),
    )
    with pytest.raises(AttributeError):
        snap.status = "stopped"  # type: ignore[misc]
    out = json.loads(json.dumps(snap.to_dict()))
    assert out["command"] == ["python", "-m", "http.server"]
    assert out["depends_on"] == {"db": "ready"} and out["last_rows"] == ["a", "b"]
    assert snap.live and out["live"] is True
    assert ServiceSnapshot(id="s2", name="x", command="true", status="exited").to_dict()["live"] is False


def test_errors_name_what_to_do_and_pickle():
    import pickle

    err = UnknownServiceError("no service named 'x'", name="x")
    assert isinstance(err, SupervisorError) and isinstance(err, LookupError)
    assert "no service named 'x'" in str(err)
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is UnknownServiceError and str(again) == str(err)


# --- the stop grace's bound -------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, ok",
    [
        (0, True),
        (0.5, True),
        (86400, True),
        (86400.0, True),
        (86400.001, False),
        (1e26, False),
        (1e300, False),
        (10**30, False),
        (10**400, False),  # beyond float range: refused, never an OverflowError
    ],
)
def test_stop_grace_is_bounded_by_one_day(value, ok):
    from proctree import ServiceSpec, Supervisor
    from proctree._validate import MAX_STOP_GRACE

    assert MAX_STOP_GRACE == 86400
    makers = [lambda: Supervisor(stop_grace=value), lambda: ServiceSpec("true", stop_grace=value)]
    for make in makers:
        if ok:
            make()
        else:
            with pytest.raises(ValueError, match="stop_grace must be (at most 86400 seconds|a finite number)"):
                make()


def test_spawn_grace_is_not_bounded_by_the_supervisors():
    from proctree._validate import check_seconds

    assert check_seconds(1e10, "grace") == 1e10  # spawn()'s own check: what its callers rely on
