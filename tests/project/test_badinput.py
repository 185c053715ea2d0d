"""Bad input to the public functions gets a clear exception and nothing else.

TypeError for the wrong type (bool is not a pid), ValueError for a value no
pid can have, NoSuchProcess for a pid that is not there. Never a crash, an
OverflowError from the C boundary, or a partial answer (an empty list for a
pid that does not exist would be one).
"""

import os
import subprocess
import sys
import textwrap
import time

import pytest

import proctree
from proctree import NoSuchProcess

FUNCS = [proctree.proc, proctree.children, proctree.descendants, proctree.facts]
FUNC_IDS = ["proc", "children", "descendants", "facts"]


class IntLike:
    def __index__(self):
        return 5


def _stable_id(value):
    """repr(value), or its type's name where the repr carries an address: ids must agree across xdist workers."""
    return type(value).__name__ if " at 0x" in repr(value) else repr(value)


BAD_TYPE = [True, False, None, "12", b"12", 1.5, 1.0, float("nan"), [1], (1,), {1: 1}, IntLike(), 3 + 0j, object()]
BAD_VALUE = [0, -1, -2, -(2**31), -(2**63), 2**22 + 1, 2**31 - 1, 2**31, 2**32, 2**40, 2**63, 2**64, 10**100]


@pytest.mark.parametrize("func", FUNCS, ids=FUNC_IDS)
@pytest.mark.parametrize("arg", BAD_TYPE, ids=[_stable_id(a) for a in BAD_TYPE])
def test_wrong_type(func, arg):
    with pytest.raises(TypeError):
        func(arg)


@pytest.mark.parametrize("func", FUNCS, ids=FUNC_IDS)
@pytest.mark.parametrize("arg", BAD_VALUE, ids=[str(a) for a in BAD_VALUE])
def test_impossible_value(func, arg):
    with pytest.raises(ValueError):
        func(arg)


@pytest.mark.parametrize("func", FUNCS, ids=FUNC_IDS)
def test_no_arguments(func):
    with pytest.raises(TypeError):
        func()


def _free_pid():
    """A pid that no process has: pid_max itself is never assigned (pids are < pid_max)."""
    if sys.platform.startswith("linux"):
        with open("/proc/sys/kernel/pid_max") as f:
            pid_max = int(f.read())
        if pid_max <= 2**22:
            return pid_max
    pytest.skip("no pid that is certain to be free")


def _reaped_pid():
    """The pid of a child we started and reaped (reuse within the test is very unlikely)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.mark.parametrize("func", FUNCS, ids=FUNC_IDS)
def test_free_pid_is_no_such_process(func):
    pid = _free_pid()
    with pytest.raises(NoSuchProcess) as info:
        func(pid)
    assert info.value.pid == pid
    assert str(pid) in str(info.value)


@pytest.mark.parametrize("func", FUNCS, ids=FUNC_IDS)
def test_reaped_pid_is_no_such_process(func):
    pid = _reaped_pid()
    if pid in proctree.snapshot():
        pytest.skip("the pid was reused at once")
    with pytest.raises(NoSuchProcess) as info:
        func(pid)
    assert info.value.pid == pid


@pytest.mark.parametrize("func", FUNCS, ids=FUNC_IDS)
def test_largest_valid_pid_is_accepted(func):
    # 2**22 is Linux's PID_MAX_LIMIT: a valid pid value, though rarely assigned.
    pid = 2**22
    try:
        result = func(pid)
    except NoSuchProcess:
        return
    assert result is not None


def test_int_subclass_is_a_pid():
    class Pid(int):
        pass

    me = proctree.proc(Pid(os.getpid()))
    assert me.pid == os.getpid() and type(me.pid) is int
    assert proctree.children(Pid(os.getpid())) == []


def test_valid_calls_still_work():
    me = os.getpid()
    assert proctree.proc(me).pid == me
    assert proctree.children(me) == []
    assert proctree.descendants(me) == []
    assert proctree.proc(1).pid == 1
    assert me in [p.pid for p in proctree.descendants(1)]


SNAP_BAD = [(True, TypeError), (None, TypeError), ("1", TypeError), (1.5, TypeError), (-1, ValueError)]


@pytest.mark.parametrize("method", ["children", "descendants", "ancestors"])
@pytest.mark.parametrize("arg,exc", SNAP_BAD, ids=[_stable_id(a) for a, _ in SNAP_BAD])
def test_live_snapshot_bad_keys(method, arg, exc):
    with pytest.raises(exc):
        getattr(proctree.snapshot(), method)(arg)


def test_live_snapshot_missing_pid():
    pid = _free_pid()
    s = proctree.snapshot()
    assert pid not in s
    with pytest.raises(NoSuchProcess):
        s.descendants(pid)
    with pytest.raises(KeyError):
        s[pid]


def test_snapshot_takes_no_arguments():
    with pytest.raises(TypeError):
        proctree.snapshot(1)


# Everything above once more in a fresh interpreter: a crash in the C core
# (a signal, an abort) would kill pytest itself rather than fail one test.
BATTERY = textwrap.dedent(
    """
    import proctree, sys
    bad = [True, False, None, "12", 1.5, 0, -1, 2**40, 2**64, -(2**63), 2**31]
    for f in (proctree.proc, proctree.children, proctree.descendants):
        for arg in bad:
            try:
                f(arg)
            except (TypeError, ValueError):
                continue
            sys.exit(f"{f.__name__}({arg!r}) did not raise")
    for arg in (2**22, int(open("/proc/sys/kernel/pid_max").read()) if sys.platform.startswith("linux") else 99998):
        for f in (proctree.proc, proctree.children, proctree.descendants):
            try:
                f(arg)
            except proctree.NoSuchProcess as e:
                assert e.pid == arg
    print("ok")
    """
)


def test_no_crash_in_a_fresh_interpreter():
    # Import the very proctree this test process uses (checkout or installed).
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(proctree.__file__)))
    r = subprocess.run([sys.executable, "-c", BATTERY], capture_output=True, text=True, timeout=60, cwd="/", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


@pytest.fixture
def thread_id():
    """The kernel id of a live thread of this process that is not its main thread."""
    import threading

    release = threading.Event()
    ids = []
    t = threading.Thread(target=lambda: (ids.append(threading.get_native_id()), release.wait(60)))
    t.start()
    try:
        while not ids:
            time.sleep(0.001)
        yield ids[0]
    finally:
        release.set()
        t.join()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux thread ids share the pid space")
@pytest.mark.parametrize("func", FUNCS, ids=FUNC_IDS)
def test_thread_id_is_not_a_pid(func, thread_id):
    assert thread_id != os.getpid()
    assert thread_id not in proctree.snapshot()
    with pytest.raises(NoSuchProcess):
        func(thread_id)
