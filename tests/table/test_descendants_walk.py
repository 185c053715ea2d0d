"""descendants()' walk on the live system: the lists it reads with each record, and the ones it reads at a turn.

The core reads a single-threaded member's children list together with its
record and queues it in the caller's buffer until the member's turn
(csrc/core/walk.c); a member with threads, an exited leader or a pid started
in the last clock tick or two has its list read at its turn instead. These
tests put members of each kind below the test process and below a helper,
in trees wider and deeper than the binding's first buffer, and compare the
answer with the pure-Python parser's tree (support.procfs), read before and
after. Every helper reports its pids through a pipe and is ended by the
`spawn` fixture, even on failure.
"""

import os
import sys
import textwrap

import pytest

import proctree
from support.procfs import read_all

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc walk")


def reference_descendants(root):
    """{pid: ppid} below root from one pure-Python read of /proc."""
    rows = read_all()
    kids = {}
    for pid, row in rows.items():
        kids.setdefault(row[1], []).append(pid)
    out, todo = {}, [root]
    while todo:
        for kid in kids.get(todo.pop(), ()):
            out[kid] = rows[kid][1]
            todo.append(kid)
    return out


def assert_breadth_first(root, procs):
    """Each process comes after its parent, and levels never go back up."""
    depth = {root: 0}
    last = 0
    for p in procs:
        assert p.ppid in depth, f"{p.pid} listed before its parent {p.ppid}"
        depth[p.pid] = depth[p.ppid] + 1
        assert depth[p.pid] >= last, f"{p.pid} breaks breadth-first order"
        last = depth[p.pid]


# A helper with WIDE children, each with KIDS children, and a chain of DEEP
# processes below its first child: more rows than the binding's first buffer.
SHAPES = """
    def fork_parked(body=None):
        pid = os.fork()
        if pid == 0:
            if body:
                body()
            park()
        return pid

    def chain(n):
        if n:
            report(fork_parked(lambda: chain(n - 1)))

    def with_kids():
        for _ in range(KIDS):
            report(fork_parked())

    report(fork_parked(lambda: chain(DEEP)))
    for _ in range(WIDE - 1):
        report(fork_parked(with_kids))
    report(os.getpid())
    park()
"""


@pytest.mark.parametrize(("wide", "kids", "deep"), [(1, 0, 0), (40, 3, 0), (3, 0, 90), (120, 1, 30)])
def test_shapes_match_the_reference(spawn, wide, kids, deep):
    body = f"WIDE, KIDS, DEEP = {wide}, {kids}, {deep}\n" + textwrap.dedent(SHAPES)
    lines = 1 + deep + (wide - 1) * (1 + kids) + 1
    helper, _ = spawn.start(body, lines=lines)
    before = reference_descendants(helper)
    got = proctree.descendants(helper)
    after = reference_descendants(helper)
    assert len(before) == lines - 1 and before == after
    assert {p.pid: p.ppid for p in got} == before
    assert_breadth_first(helper, got)
    for p in got:
        assert p.state in "SR" and p.start_time > 0 and p.uid == os.geteuid(), p


# A member with a second thread that forked, and one whose leader thread
# exited while a thread runs on: their lists are read at their turn, per thread.
THREADED_MEMBER = """
    kids = []
    def fork_in_thread():
        kids.append(os.fork() or park())
        if KEEP_THREAD:
            select.select([0], [], [], 120)
    t = threading.Thread(target=fork_in_thread, daemon=True)
    t.start()
    if not KEEP_THREAD:
        t.join()
    while not kids:
        time.sleep(0.001)
    report(kids[0], os.fork() or park())
    park()
"""


@pytest.mark.parametrize("keep_thread", [True, False], ids=["thread-alive", "thread-exited"])
def test_a_threaded_members_children(spawn, keep_thread):
    helper, [[tkid, mkid]] = spawn.start(f"KEEP_THREAD = {keep_thread}\n" + textwrap.dedent(THREADED_MEMBER))
    below_me = {p.pid: p.ppid for p in proctree.descendants(os.getpid())}
    assert below_me[helper] == os.getpid()
    assert below_me[tkid] == helper and below_me[mkid] == helper


def test_a_fresh_member_and_an_old_one(spawn):
    """Members started a tick or two before the walk take the read-at-their-turn path; the answer is the same."""
    old, [[a]] = spawn.start("report(os.fork() or park())\npark()\n")
    for _ in range(20):
        fresh, [[b]] = spawn.start("report(os.fork() or park())\npark()\n")
        below_me = {p.pid: p.ppid for p in proctree.descendants(os.getpid())}
        assert below_me[a] == old and below_me[b] == fresh


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_a_non_dumpable_member_of_another_user(spawn):
    """The uid comes from task/'s owner: procfs gives it the process's euid, as /proc/<pid>, while the files of a
    non-dumpable process go to root."""
    body = "os.setresgid(65534, 65534, 65534)\nos.setresuid(65534, 65534, 65534)\nlibc.prctl(4, 0, 0, 0, 0)\n"
    helper, _ = spawn.start(body + "report(os.getpid())\npark()\n")
    assert os.stat(f"/proc/{helper}/stat").st_uid == 0  # what the record must not take
    below_me = {p.pid: p for p in proctree.descendants(os.getpid())}
    assert below_me[helper].uid == os.stat(f"/proc/{helper}").st_uid == 65534
