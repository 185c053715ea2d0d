"""Trees spawned inside trees: the enclosing tree still ends what the inner tree started.

The caller inside a tree is common (a test run under `proctree run`, a
supervisor's service that uses proctree itself). An inner tree's members
carry the chain `<inner id>:<outer id>` in PROCTREE_TREE, so a session-mode
outer tree follows the inner tree's daemons even after the inner owner and
keeper were killed by the outer teardown before they could end them.
Every process started here is ended here, by pid and start time (the leak
check catches anything else).
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import proctree
from proctree._containment import cgroup as _cgroup
from proctree._containment.evidence import marker as _marker
from support.spawnkit import ALL_MODES, alive, end_daemon, wait_gone
from support.stubborn import ignore_polite_signals_sh

ID_A, ID_B, ID_C = "a" * 32, "b" * 32, "0123456789abcdef" * 2
OUTER8 = [f"{i:032x}" for i in range(1, 9)]


# ---------------------------------------------------------------------------
# The chain, as data


@pytest.mark.parametrize(
    "value, ids",
    [
        (ID_A, (ID_A,)),
        (f"{ID_A}:{ID_B}", (ID_A, ID_B)),
        (f"{ID_A}:{ID_B}:{ID_C}".encode(), (ID_A, ID_B, ID_C)),
        (":".join([ID_A] * 7), (ID_A,) * 7),
        (":".join([ID_A] * 8), None),  # longer than MAX_TREE_CHAIN
        ("", None),
        (f"{ID_A}:", None),
        (f":{ID_A}", None),
        (f"{ID_A}::{ID_B}", None),
        (ID_A.upper(), None),
        (ID_A[:-1], None),
        (ID_A + "0", None),
        (f"{ID_A} {ID_B}", None),
        (b"\xff" * 32, None),
        (None, None),
        (3, None),
    ],
)
def test_parse_tree_chain(value, ids):
    assert _marker.parse_tree_chain(value) == ids


@pytest.mark.parametrize(
    "enclosing, value",
    [
        (None, ID_A),
        (ID_B, f"{ID_A}:{ID_B}"),
        (f"{ID_B}:{ID_C}", f"{ID_A}:{ID_B}:{ID_C}"),
        ("not a tree id", ID_A),  # garbage in the caller's environment is not carried on
        # bounded: the middle ids are dropped, the enclosing and the outermost trees kept
        (":".join(OUTER8[:7]), ":".join([ID_A, *OUTER8[:5], OUTER8[6]])),
    ],
)
def test_tree_chain(enclosing, value):
    assert _marker.tree_chain(ID_A, enclosing) == value
    assert _marker.parse_tree_chain(value)[0] == ID_A


@pytest.mark.parametrize(
    "value, tree, carries",
    [
        (ID_A, ID_A, True),
        (f"{ID_A}:{ID_B}".encode(), ID_B, True),
        (f"{ID_A}:{ID_B}", ID_C, False),
        (f"{ID_A}x:{ID_B}", ID_B, False),  # a malformed chain names nothing
        ("absent", ID_A, False),  # env_scan's words for an unread value
        (None, ID_A, False),
    ],
)
def test_carries_tree(value, tree, carries):
    assert _marker.carries_tree(value, tree) is carries


# ---------------------------------------------------------------------------
# Real trees

# The inner owner (the outer tree's command): spawns an inner tree with a long
# grace whose command double-forks a setsid daemon that survives the polite signals
# (support/stubborn.py), reports the daemon's pid, and sleeps. argv: inner mode, report path.
INNER_OWNER = textwrap.dedent(rf"""
    import sys, time
    import proctree
    mode, path = sys.argv[1], sys.argv[2]
    daemon = "{ignore_polite_signals_sh()}; echo $$ > %s.tmp && mv %s.tmp %s; exec sleep 300" % (path, path, path)
    t = proctree.spawn(["sh", "-c", "{ignore_polite_signals_sh()}; (setsid sh -c \"$0\" &); exec sleep 300", daemon],
                       contain=mode, grace=60)
    with open(path + ".cgroup", "w") as f:
        f.write(t.cgroup or "")
    time.sleep(300)
""")


def _remove_inner_cgroup(path):
    """The inner tree's cgroup, left empty when the outer teardown killed its keeper: removed (it is ours)."""
    try:
        with open(path + ".cgroup") as f:
            cgroup = f.read().strip()
    except FileNotFoundError:
        return
    if cgroup and os.path.isdir(cgroup):
        _cgroup.remove(cgroup)


def _chain_of(pid, timeout=10.0):
    """pid's PROCTREE_TREE chain, read again while its environment is empty (a process in the middle of exec)."""
    deadline = time.monotonic() + timeout
    while True:
        with open(f"/proc/{pid}/environ", "rb") as f:
            entries = [e for e in f.read().split(b"\0") if e.startswith(b"PROCTREE_TREE=")]
        if entries or time.monotonic() > deadline:
            return _marker.parse_tree_chain(entries[0][14:]) if entries else None
        time.sleep(0.01)


def _wait_daemon(path, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return proctree.proc(int(text))
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    raise AssertionError("the inner tree's daemon never reported")


def _env():
    here = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
    return {**os.environ, "PYTHONPATH": here + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.mark.parametrize("inner", ALL_MODES)
def test_outer_session_terminate_ends_the_inner_trees_daemon(trees, tmp_path, inner):
    """The outer teardown kills the inner keeper (its grace is longer) and still ends the inner tree's daemon."""
    path = str(tmp_path / "daemon")
    outer = proctree.spawn([sys.executable, "-c", INNER_OWNER, inner, path], contain="session", grace=0.5, env=_env())
    trees.append(outer)
    daemon = _wait_daemon(path)
    try:
        chain = _chain_of(daemon.pid)
        assert chain is not None and chain[1] == outer.tree_id  # then the test run's own id, if any
        rep = outer.terminate()
        assert rep.ok, rep
        assert wait_gone([daemon.pid], 10), "the inner tree's daemon outlived the outer teardown"
    finally:
        if alive(daemon.pid, daemon.start_time):
            end_daemon(daemon.pid)
        _remove_inner_cgroup(path)


OUTER_OWNER = textwrap.dedent(r"""
    import sys, time
    import proctree
    inner, path = sys.argv[1], sys.argv[2]
    t = proctree.spawn([sys.executable, "-c", sys.argv[3], inner, path], contain="session", grace=0.5)
    print(t.keeper_pid, flush=True)
    time.sleep(300)
""")


@pytest.mark.parametrize("inner", ALL_MODES)
def test_outer_owner_death_ends_the_inner_trees_daemon(tmp_path, inner):
    """The outer keeper, ending its tree on its owner's SIGKILL, follows the chain to the inner tree's daemon."""
    path = str(tmp_path / "daemon")
    owner = subprocess.Popen(
        [sys.executable, "-c", OUTER_OWNER, inner, path, INNER_OWNER], env=_env(), stdout=subprocess.PIPE, text=True
    )
    daemon = None
    try:
        keeper = int(owner.stdout.readline())
        daemon = _wait_daemon(path)
        owner.send_signal(signal.SIGKILL)  # our own child
        owner.wait()
        assert wait_gone([keeper, daemon.pid], 15), "the inner tree's daemon outlived the outer owner's death"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        owner.stdout.close()
        if daemon is not None and alive(daemon.pid, daemon.start_time):
            end_daemon(daemon.pid)
        _remove_inner_cgroup(path)
