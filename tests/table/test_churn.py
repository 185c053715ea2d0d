"""snapshot(), children() and descendants() while processes start and exit around them.

The kernel's /proc/<pid>/task/<tid>/children lists are documented as
unreliable while children exit (the walk resumes by position and can skip a
sibling). These tests build subtrees of long-lived processes whose members
each keep short-lived children coming and going, and check on every call:

* snapshot() never raises and never returns a half-parsed row;
* children()/descendants() never omit a process that was below the pid, through
  unchanged parent links, for the whole call.

"For the whole call" is decided independently: the tree is read with the pure
Python parser just before and just after each call, and a pid counts only if
both reads show it below the pid with the same parent and start time.
Churn is bounded (a few dozen short-lived processes at a time) and stops by
itself; everything is ended by the `spawn` fixture (tests/support/plugin.py).
"""

import os
import sys
import textwrap
import time
from collections import deque

import pytest

import proctree
from proctree._table.model import STATES
from support.procfs import read_all, read_proc

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc churn")

CHURN_LIB = r"""
import random
random.seed(os.getpid())
PAUSE = globals().get("PAUSE", 0.005)
DEADLINE = time.monotonic() + LIFETIME  # churn stops by itself even if nobody tells it

def stop_requested():
    return time.monotonic() > DEADLINE or bool(select.select([0], [], [], 0)[0])

def park_and_reap(kids):
    select.select([0], [], [], 120)
    for pid in kids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    os._exit(0)

def short_lived():
    # lives 0-3 ms; a third of them have a short-lived child of their own
    if random.random() < 0.3:
        g = os.fork()
        if g == 0:
            time.sleep(random.random() * 0.003)
            os._exit(0)
        time.sleep(random.random() * 0.003)
        os.waitpid(g, 0)
    else:
        time.sleep(random.random() * 0.003)
    os._exit(0)

def churn(width):
    live = set()
    while not stop_requested():
        while len(live) < width:
            pid = os.fork()
            if pid == 0:
                short_lived()
            live.add(pid)
        pid, _ = os.waitpid(-1, 0)
        live.discard(pid)
        time.sleep(random.random() * PAUSE)  # bounds the fork rate on a shared machine
    for pid in live:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
"""

# A node forks FANOUT stable child nodes (down to DEPTH), LEAVES parked leaves,
# reports itself, then churns WIDTH short-lived children until told to stop.
TREE = (
    CHURN_LIB
    + r"""
set_name(b"ptchurn")
def node(depth):
    stable = []
    for _ in range(FANOUT if depth > 0 else 0):
        pid = os.fork()
        if pid == 0:
            node(depth - 1)
        stable.append(pid)
    for _ in range(LEAVES):
        pid = os.fork()
        if pid == 0:
            park()
        stable.append(pid)
    report(os.getpid(), *stable[-LEAVES:] if LEAVES else ())
    churn(WIDTH)
    park_and_reap(stable)
node(DEPTH)
"""
)


def start_tree(spawn, depth=2, fanout=2, leaves=1, width=2, lifetime=30):
    nodes = sum(fanout**d for d in range(depth + 1))
    body = (
        f"DEPTH, FANOUT, LEAVES, WIDTH, LIFETIME = {depth}, {fanout}, {leaves}, {width}, {lifetime}\n"
        + textwrap.dedent(TREE)
    )
    root, lines = spawn.start(body, lines=nodes, timeout=60)
    return root, {pid for line in lines for pid in line} - {root}


def below(table, root):
    """{pid: row} of everything below root in a {pid: row} table (rows from read_proc)."""
    kids = {}
    for row in table.values():
        if row[0] != row[1]:
            kids.setdefault(row[1], []).append(row)
    out = {}
    queue = deque([root])
    while queue:
        for row in kids.get(queue.popleft(), ()):
            if row[0] not in out:
                out[row[0]] = row
                queue.append(row[0])
    return out


def stable_between(before, after):
    """Pids in both reads with the same parent and start time: alive and linked throughout."""
    return {pid for pid, row in before.items() if pid in after and after[pid][1] == row[1] and after[pid][6] == row[6]}


def check_answer(root, answer, stable, what):
    pids = [p.pid for p in answer]
    assert len(pids) == len(set(pids)), f"{what}: duplicates in the answer"
    missing = stable - set(pids)
    assert not missing, f"{what}({root}) omitted {sorted(missing)} that were there for the whole call"
    inside = set(pids) | {root}
    for p in answer:
        assert p.ppid in inside, f"{what}: {p} is not linked to the subtree"


def naive_descendants(root, chunk=16):
    """A walk over the raw children files with no verification, to show the churn bites.

    Each read() of a children file restarts the kernel's walk by position, so
    small reads make the documented skip (a sibling missed when an earlier one
    is reaped between reads) easy to hit; the core reads a page at a time."""
    out, queue = set(), deque([root])
    while queue:
        pid = queue.popleft()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except (FileNotFoundError, ProcessLookupError):  # gone (ESRCH while it is being reaped)
            continue
        for tid in tids:
            try:
                fd = os.open(f"/proc/{pid}/task/{tid}/children", os.O_RDONLY)
            except (FileNotFoundError, ProcessLookupError):
                continue
            data = b""
            try:
                while True:
                    got = os.read(fd, chunk)
                    if not got:
                        break
                    data += got
            except ProcessLookupError:
                pass
            finally:
                os.close(fd)
            for k in map(int, data.split()):
                if k not in out:
                    out.add(k)
                    queue.append(k)
    return out


def loop_until(seconds, min_rounds):
    """Yield round numbers for `seconds`, and on until min_rounds on a slow machine (bounded)."""
    start = time.monotonic()
    rounds = 0
    while True:
        elapsed = time.monotonic() - start
        if (elapsed >= seconds and rounds >= min_rounds) or elapsed >= seconds + 60:
            break
        yield rounds
        rounds += 1
    assert rounds >= min_rounds, f"only {rounds} rounds in {seconds + 60} s: something hangs"


def loop_calls(root, seconds, call, what, direct=False, naive=None, min_calls=5):
    """Call call(root) repeatedly for `seconds`; check each answer; return (calls, naive misses)."""
    calls = misses = 0
    for _ in loop_until(seconds, min_calls):
        before = below(read_all(), root)
        answer = call(root)
        after = below(read_all(), root)
        stable = stable_between(before, after)
        if direct:
            stable = {pid for pid in stable if before[pid][1] == root}
        check_answer(root, answer, stable, what)
        calls += 1
        if naive is not None and calls % 4 == 1:
            b = below(read_all(), root)
            got = naive(root)
            a = below(read_all(), root)
            s = stable_between(b, a)
            if direct:
                s = {pid for pid in s if b[pid][1] == root}
            misses += bool(s - got)
    return calls, misses


def test_snapshot_rows_are_whole_under_churn(spawn):
    root, stable = start_tree(spawn)
    me = proctree.proc(root)
    table = read_all()
    stable_rows = {pid: table[pid] for pid in stable}
    for _ in loop_until(5, 10):
        snap = proctree.snapshot()  # must never raise
        tree = set(snap.descendant_pids(root))
        for p in snap.values():
            assert p.pid > 0 and p.ppid >= 0 and p.pgid >= 0 and p.sid >= 0, p
            assert p.state in STATES, p
            assert "\0" not in p.name and len(os.fsencode(p.name)) <= 63, p
            if p.pid in tree:
                # everything below root was forked (never exec'd) from it
                assert (p.pgid, p.sid, p.uid, p.name) == (me.pgid, me.sid, me.uid, "ptchurn"), p
                assert p.start_time >= me.start_time, p
        for pid, row in stable_rows.items():
            p = snap[pid]
            assert (p.pid, p.ppid, p.pgid, p.sid, p.uid, p.start_time, p.name) == row[:5] + row[6:], p


def test_descendants_under_churn(spawn):
    root, _ = start_tree(spawn)
    calls, misses = loop_calls(root, 8, proctree.descendants, "descendants", naive=naive_descendants)
    print(f"descendants under churn: {calls} checked calls; a naive walk missed a stable pid in {misses}")


def test_children_under_churn(spawn):
    root, _ = start_tree(spawn, depth=1, fanout=4, leaves=4, width=4)
    # the root's own list changes most: its churn kids come and go among stable siblings
    loop_calls(root, 5, proctree.children, "children", direct=True)


def test_snapshot_tree_queries_under_churn(spawn):
    root, _ = start_tree(spawn)
    loop_calls(root, 3, lambda r: proctree.snapshot().descendants(r), "snapshot().descendants")


# Threads that come and go and fork: children move between the per-thread
# lists when their thread exits, and the thread count keeps changing.
THREADS = (
    CHURN_LIB
    + r"""
set_name(b"ptthreads")
kids = []
lock = threading.Lock()
def forker(linger):
    pid = os.fork()
    if pid == 0:
        select.select([0], [], [], 120)
        os._exit(0)
    with lock:
        kids.append(pid)
    time.sleep(linger)  # then exit: pid moves to another thread's list
for i in range(STABLE):
    threading.Thread(target=forker, args=(random.random() * 0.05,)).start()
report(os.getpid())
while not stop_requested():
    ts = [threading.Thread(target=forker, args=(random.random() * 0.02,)) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    with lock:
        if len(kids) > STABLE + 60:  # keep the number of processes bounded
            for pid in kids[STABLE:]:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            del kids[STABLE:]
park_and_reap(kids)
"""
)


def test_children_forked_by_threads_that_exit(spawn):
    body = "STABLE, LIFETIME = 40, 30\n" + textwrap.dedent(THREADS)
    root, _ = spawn.start(body, lines=1)
    for call, what in ((proctree.children, "children"), (proctree.descendants, "descendants")):
        loop_calls(root, 4, call, what, direct=(what == "children"))


# A parent with more children than fit in one page of its children file
# (each pid is 5-6 bytes, so 1,500 make two or three pages): the odd ones stay, the
# even ones exit one by one across the test (each exit shifts every later
# sibling's position), and a few short-lived ones churn at the tail.
BIG = (
    CHURN_LIB
    + r"""
set_name(b"ptbig")
stable = []
for i in range(N):
    pid = os.fork()
    if pid == 0:
        if i % 2 == 0:
            select.select([0], [], [], random.uniform(0.5, MORTAL))
            os._exit(0)
        park()
    if i % 2:
        stable.append(pid)
report(os.getpid())
report(*stable)
churn(WIDTH)
for _ in range(N):
    try:
        if os.waitpid(-1, os.WNOHANG)[0] == 0:
            break
    except ChildProcessError:
        break
park_and_reap(stable)
"""
)


def test_parent_with_more_than_a_thousand_children(spawn, monkeypatch):
    from proctree._table import binding as _binding

    reads = []
    real = _binding.child_pids
    monkeypatch.setattr(_binding, "child_pids", lambda pid: reads.append(pid) or real(pid))
    n = 1500
    body = f"N, MORTAL, WIDTH, LIFETIME = {n}, 6, 10, 30\n" + textwrap.dedent(BIG)
    root, [_, stable_line] = spawn.start(body, lines=2, timeout=60)
    stable = set(stable_line)
    assert len(stable) == n // 2
    with open(f"/proc/{root}/task/{root}/children", "rb") as f:
        assert len(f.read()) > 4096  # the list spans pages: read() returns it in chunks
    # The odd children never exit, so they are the stable set without any
    # reference read; that keeps the loop tight (more calls, more chances to
    # race an exit). That they really stayed is checked at the end.
    calls = naive_misses = 0
    for _ in loop_until(6, 10):
        got = {p.pid for p in proctree.children(root)}
        missing = stable - got
        assert not missing, f"children({root}) omitted {len(missing)} stable children: {sorted(missing)[:10]}"
        calls += 1
        if calls % 4 == 0:
            naive_misses += bool(stable - set(real(root)))  # the kernel list read without verification
    print(
        f"1,500 children: {calls} calls ({len(reads)} list reads: retries and scans happen); "
        f"the unverified list missed a stable child in {naive_misses} of {calls // 4}"
    )
    loop_calls(root, 3, proctree.descendants, "descendants")
    for pid, start in spawn.known:
        if pid in stable:
            row = read_proc(pid)
            assert row is not None and row[6] == start and row[1] == root, "a stable child did not stay"
