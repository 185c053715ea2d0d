"""snapshot(), proc(), children() and descendants() on the live system, cross-checked.

The references are `ps -eo pid,ppid,pgid,sid,uid,stat,comm` and the pure-Python
parser in test_parse.py. Processes come and go between reads, so each check
reads the reference before and after proctree and compares only the pids whose
reference rows were identical both times (the stable set); on that set every
field must agree. Processes this file starts report their pids through a pipe
and are killed (pid + start time checked) by the fixture, even on failure.
"""

import os
import platform
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import proctree
from proctree._table import binding as _binding
from support.procfs import parse_stat, read_all, read_proc
from support.spawner import PRELUDE, Spawner  # noqa: F401  (used by the fixture's helpers)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc cross-checks")


def wait_state(pid, states, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = read_proc(pid)
        if row is not None and row[5] in states:
            return row
        time.sleep(0.01)
    raise AssertionError(f"{pid} never reached state {states}: {read_proc(pid)}")


def fields(p):
    return (p.pid, p.ppid, p.pgid, p.sid, p.uid, p.state, p.start_time, p.name)


def read_ps():
    out = subprocess.run(
        ["ps", "-eo", "pid,ppid,pgid,sid,uid,stat,comm"], capture_output=True, check=True, timeout=30
    ).stdout
    rows = {}
    for line in out.decode("utf-8", "replace").split("\n")[1:]:
        if not line.strip():
            continue
        parts = line.split(None, 6)
        name = parts[6] if len(parts) == 7 else ""  # an empty comm prints nothing
        rows[int(parts[0])] = (
            int(parts[0]),
            int(parts[1]),
            int(parts[2]),
            int(parts[3]),
            int(parts[4]),
            parts[5][0],
            name,
        )
    return rows


def ps_name_pattern(name):
    """ps prints a control or non-ASCII byte as '?' (or '.'), so match those loosely."""
    pat = []
    for b in os.fsencode(name):
        pat.append(re.escape(chr(b)) if 0x20 <= b < 0x7F else ".?")
    return re.compile("".join(pat) + r"\Z", re.S)


def cross_check(compare, attempts=5):
    """Sandwich `compare` between two reference reads; return the stable set it checked.

    compare(stable) returns {pid: (field, ours, theirs)} mismatches. A state
    can change twice between the reads (S -> R -> S), and so can a kernel
    worker's name (kworker/1:0-events -> -mm_percpu_wq -> -events: it names the
    work queue it serves), so pids whose only mismatches are those are
    re-checked; any other mismatch fails at once.
    """
    suspects = None
    for _ in range(attempts):
        before = read_all()
        result = compare.read()
        after = read_all()
        stable = {pid: row for pid, row in before.items() if after.get(pid) == row}
        # Other work on a shared machine can make most rows unstable; the check is
        # exact on whatever stayed, and callers require their own processes in it.
        assert 1 in stable, "init changed between two reads?"
        bad = compare(stable, result)
        hard = {pid: m for pid, m in bad.items() if any(not volatile(f, stable[pid]) for f, _, _ in m)}
        assert not hard, f"mismatches on stable processes: {hard}"
        states = {pid for pid in bad}
        suspects = states if suspects is None else suspects & states
        if not suspects:
            return stable
    raise AssertionError(f"state (or kworker name) keeps disagreeing for {sorted(suspects)}: {bad}")


def volatile(field, ref):
    """Fields that may legitimately change and change back between two reads."""
    return field == "state" or (field == "name" and ref[1] == 2)  # a kernel thread's name


def leader_exited(pid):
    """True if stat shows 'Z' for a process that still has live threads: proctree
    reports a live thread's state for it (it is not gone), ps and stat say 'Z'."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            st = parse_stat(f.read())
    except (OSError, ValueError):
        return False
    return st["state"] == "Z" and st["num_threads"] > 1


def differs(field, pid, ours, ref):
    return ours != ref and not (field == "state" and ref == "Z" and ours != "Z" and leader_exited(pid))


class AgainstParser:
    def read(self):
        return proctree.snapshot()

    def __call__(self, stable, snap):
        bad = {}
        for pid, ref in stable.items():
            assert pid in snap, f"stable process {pid} {ref} missing from snapshot()"
            ours = fields(snap[pid])
            m = [(f, a, b) for f, a, b in zip(proctree.Proc._fields, ours, ref) if differs(f, pid, a, b)]
            if m:
                bad[pid] = m
        return bad


class AgainstPs:
    def read(self):
        return proctree.snapshot(), read_ps()

    def __call__(self, stable, result):
        snap, ps = result
        bad = {}
        me = os.getpid()
        for pid in stable:
            if pid not in ps:
                continue  # ps's own scan may miss nothing, but it lists itself too late to matter
            p = snap[pid]
            row = ps[pid]
            m = []
            for f, a, b in zip(("pid", "ppid", "pgid", "sid", "uid"), fields(p), row):
                if a != b:
                    m.append((f, a, b))
            if differs("state", pid, p.state, row[5]) and pid != me:  # we are R while reading, S while ps runs
                m.append(("state", p.state, row[5]))
            if not ps_name_pattern(p.name).match(row[6]):
                m.append(("name", p.name, row[6]))
            if m:
                bad[pid] = m
        missing = [pid for pid in stable if pid not in ps]
        assert not missing, f"stable processes missing from ps: {missing}"
        return bad


NAMES = [
    (b":-) 1 2 3", ":-) 1 2 3"),
    (b"a) b) c", "a) b) c"),
    (b") Z 9 9 9 (", ") Z 9 9 9 ("),
    (b"new\nline", "new\nline"),
    (b"", ""),
    (b"\xff\xfe(", os.fsdecode(b"\xff\xfe(")),
    (b"fifteen-chars-x", "fifteen-chars-x"),
    (b"sixteen-chars-xx-and-more", "sixteen-chars-x"),  # the kernel keeps 15 bytes
]


@pytest.fixture
def named(spawn):
    """One parked helper per name in NAMES, renamed with PR_SET_NAME (and one via /proc/self/comm)."""
    out = {}
    for raw, shown in NAMES:
        pid, _ = spawn.start(f"set_name({raw!r}); report(os.getpid()); park()")
        out[pid] = shown
    pid, _ = spawn.start("open('/proc/self/comm', 'wb').write(b'via comm file, long'); report(os.getpid()); park()")
    out[pid] = "via comm file, "
    for pid in out:
        wait_state(pid, "S")  # parked, so the cross-checks' before/after reads agree
    return out


def test_names_as_the_kernel_shows_them(named):
    snap = proctree.snapshot()
    for pid, shown in named.items():
        with open(f"/proc/{pid}/comm", "rb") as f:
            kernel = os.fsdecode(f.read()[:-1])  # comm ends with one "\n"
        assert kernel == shown
        assert proctree.proc(pid).name == shown
        assert snap[pid].name == shown
        assert snap[pid].ppid == os.getpid()
        assert read_proc(pid)[7] == shown
    kids = {p.pid: p.name for p in proctree.children(os.getpid())}
    assert kids == named
    assert {p.pid: p.name for p in proctree.descendants(os.getpid())} == named
    assert {p.pid: p.name for p in snap.children(os.getpid())} == named


def test_snapshot_matches_the_python_parser(named):
    stable = cross_check(AgainstParser())
    assert set(named) <= set(stable)
    assert 1 in stable and os.getpid() in stable


def test_snapshot_matches_ps(named):
    stable = cross_check(AgainstPs())
    assert set(named) <= set(stable)


def test_proc_matches_the_python_parser(named):
    def compare_each():
        bad = {}
        for pid, ref in read_all().items():
            try:
                ours = fields(proctree.proc(pid))
            except proctree.NoSuchProcess:
                continue
            m = [(f, a, b) for f, a, b in zip(proctree.Proc._fields, ours, ref) if differs(f, pid, a, b)]
            if m:
                bad[pid] = m
        return bad

    class Each:
        def read(self):
            return compare_each()

        def __call__(self, stable, bad):
            return {pid: m for pid, m in bad.items() if pid in stable}

    cross_check(Each())


def test_own_process():
    me = proctree.proc(os.getpid())
    assert (me.pid, me.ppid, me.pgid, me.sid, me.uid) == (
        os.getpid(),
        os.getppid(),
        os.getpgrp(),
        os.getsid(0),
        os.geteuid(),
    )
    assert me.state == "R"
    assert not me.is_zombie
    assert proctree.snapshot()[os.getpid()].start_time == me.start_time


def test_roots_and_pid_zero():
    snap = proctree.snapshot()
    roots = snap.child_pids(0)
    assert 1 in roots
    assert all(snap[r].ppid == 0 for r in roots)
    assert set(snap.descendant_pids(0)) == set(snap)  # every process hangs below a root
    assert 0 not in snap
    chain = [p.pid for p in snap.ancestors(os.getpid())]
    assert chain[0] == os.getppid() and chain[-1] in roots


def test_zombie_shows_z(spawn):
    helper, [[z]] = spawn.start("""
        pid = os.fork()
        if pid == 0:
            os._exit(3)
        report(pid)
        park()
    """)
    wait_state(z, "Z")
    p = proctree.proc(z)
    assert p.state == "Z" and p.is_zombie and p.ppid == helper
    assert proctree.snapshot()[z].state == "Z"
    assert [k.pid for k in proctree.children(helper)] == [z]
    assert [k.state for k in proctree.descendants(helper)] == ["Z"]
    assert read_ps()[z][5] == "Z"


def test_stopped_shows_t(spawn):
    helper, [[kid]] = spawn.start("""
        pid = os.fork()
        if pid == 0:
            park()
        report(pid)
        park()
    """)
    spawn.signal(kid, signal.SIGSTOP)
    wait_state(kid, "T")
    assert proctree.proc(kid).state == "T"
    assert proctree.snapshot()[kid].state == "T"
    assert [(k.pid, k.state) for k in proctree.children(helper)] == [(kid, "T")]
    assert read_ps()[kid][5] == "T"
    spawn.signal(kid, signal.SIGCONT)
    wait_state(kid, "SR")
    assert proctree.proc(kid).state in "SR"


def _children_files(pid):
    """{tid: [child pids]} straight from /proc/<pid>/task/<tid>/children."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out[int(tid)] = [int(x) for x in f.read().split()]
        except FileNotFoundError:
            pass
    return out


THREAD_FORK = """
    kids = []
    release = threading.Event()
    def fork_here():
        pid = os.fork()
        if pid == 0:
            park()
        kids.append(pid)
        if KEEP_THREAD:
            release.wait(120)
    t = threading.Thread(target=fork_here, daemon=True)
    t.start()
    if not KEEP_THREAD:
        t.join()
    while not kids:
        time.sleep(0.001)
    main_kid = os.fork()
    if main_kid == 0:
        park()
    report(kids[0], main_kid)
    report(t.native_id)
    park()
"""


@pytest.mark.parametrize("keep_thread", [True, False], ids=["thread-alive", "thread-exited"])
def test_children_forked_by_another_thread(spawn, keep_thread):
    helper, [[tkid, mkid], [tid]] = spawn.start(
        f"KEEP_THREAD = {keep_thread}\n" + textwrap.dedent(THREAD_FORK), lines=2, not_pids=(1,)
    )
    files = _children_files(helper)
    if keep_thread:
        # The kernel lists the child under the forking thread only: a reader of
        # task/<pid>/children alone would miss it.
        assert tkid in files[tid] and tkid not in files[helper]
    want = {tkid, mkid}
    assert {p.pid for p in proctree.children(helper)} == want
    assert {p.pid for p in proctree.descendants(helper)} == want
    snap = proctree.snapshot()
    assert set(snap.child_pids(helper)) == want
    assert snap[tkid].ppid == helper  # ppid is the process, not the thread


SYS_EXIT = {"x86_64": 60, "aarch64": 93}.get(platform.machine())

ZOMBIE_LEADER = """
    a = os.fork()
    if a == 0:
        park()
    kids = []
    def worker():
        b = os.fork()
        if b == 0:
            park()
        kids.append(b)
        while not done:
            time.sleep(0.001)
        report(a, b)
        park()
    done = False
    threading.Thread(target=worker).start()
    while not kids:
        time.sleep(0.001)
    done = True
    # exit the main thread only (SYS_exit, not exit_group): the leader becomes
    # a zombie while the worker thread keeps the process alive
    libc.syscall(SYS_EXIT, 0)
"""


@pytest.mark.skipif(SYS_EXIT is None, reason="SYS_exit number unknown on this machine")
def test_children_of_a_process_whose_main_thread_exited(spawn):
    helper, [[a, b]] = spawn.start(f"SYS_EXIT = {SYS_EXIT}\n" + textwrap.dedent(ZOMBIE_LEADER))
    wait_state(helper, "Z")
    with open(f"/proc/{helper}/task/{helper}/stat") as f:
        assert f.read().split(") ")[1][0] == "Z"
    want = {a, b}
    assert {p.pid for p in proctree.children(helper)} == want
    assert {p.pid for p in proctree.descendants(helper)} == want
    assert set(proctree.snapshot().child_pids(helper)) == want
    for kid in want:
        assert proctree.proc(kid).ppid == helper


@pytest.mark.skipif(SYS_EXIT is None, reason="SYS_exit number unknown on this machine")
def test_process_with_exited_main_thread_is_not_a_zombie(spawn):
    helper, _ = spawn.start(f"SYS_EXIT = {SYS_EXIT}\n" + textwrap.dedent(ZOMBIE_LEADER))
    wait_state(helper, "Z")
    assert leader_exited(helper)
    p = proctree.proc(helper)
    assert not p.is_zombie and p.state in "SR"  # the live worker thread's state
    assert not proctree.snapshot()[helper].is_zombie
    assert read_ps()[helper][5] == "Z"  # ps shows the leader's state
    # and the cross-check accepts exactly that difference
    assert not AgainstParser()({helper: read_proc(helper)}, proctree.snapshot())


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another uid")
def test_uid_of_a_process_that_dropped_privileges(spawn):
    _, [[pid]] = spawn.start("os.setuid(65534); report(os.getpid()); park()")
    assert os.stat(f"/proc/{pid}").st_uid == 65534
    assert read_ps()[pid][4] == 65534
    assert proctree.proc(pid).uid == 65534
    assert proctree.snapshot()[pid].uid == 65534


def test_uid_of_a_non_dumpable_process(spawn):
    # Not dumpable but same uid: the files are root's, and root is what we run as
    # unless not root; this pins the case that does work for an unprivileged user.
    _, [[pid]] = spawn.start("libc.prctl(4, 0, 0, 0, 0); report(os.getpid()); park()")  # PR_SET_DUMPABLE 0
    assert os.stat(f"/proc/{pid}").st_uid == os.geteuid()
    if os.geteuid() == 0:
        assert proctree.proc(pid).uid == 0


def test_now_brackets_a_new_child_start_time(spawn):
    before = _binding.now()
    _, [[pid]] = spawn.start("report(os.getpid()); park()")
    after = _binding.now()
    start = proctree.proc(pid).start_time
    assert before <= start <= after
    assert start == read_proc(pid)[6]
    hz = os.sysconf("SC_CLK_TCK")
    assert after - before < 60 * hz


def test_start_time_tells_processes_apart(spawn):
    _, [[a]] = spawn.start("report(os.getpid()); park()")
    _, [[b]] = spawn.start("report(os.getpid()); park()")
    pa, pb = proctree.proc(a), proctree.proc(b)
    assert pa.identity != pb.identity and pa.start_time <= pb.start_time


@pytest.mark.skipif(os.geteuid() != 0, reason="unshare --pid needs root")
def test_snapshot_in_a_fresh_pid_namespace():
    code = (
        "import proctree, json; s = proctree.snapshot(); "
        "print(json.dumps([list(s), s[1].ppid, s.child_pids(0), proctree.proc(1).pid]))"
    )
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(proctree.__file__)))
    r = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd="/",
    )
    if r.returncode != 0 and "unshare" in r.stderr:
        pytest.skip(f"unshare failed: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[[1], 0, [1], 1]"
