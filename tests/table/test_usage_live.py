"""proctree.usage() and Tree.usage() on real trees, checked against /proc read by hand.

A helper forks children that each touch a known amount of memory and burn a known amount of CPU, then park;
their sums are read by proctree and, independently, from each /proc/<pid>/stat by plain file reads. Members
that die before or during the read are left out, never raised. Every process is ended by the fixtures.
"""

import os
import subprocess
import sys
import threading
import time

import pytest

import proctree
from support.procfs import parse_stat

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc facts")

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1 << 20
CHILDREN = 3
HOLD_MIB = 24  # each child's touched memory: well above an interpreter's own ~10 MiB
BURN = 0.3  # each child's CPU seconds, at least

FAMILY = f"""
for _ in range({CHILDREN}):
    if os.fork() == 0:
        hold = bytearray({HOLD_MIB} << 20)
        for i in range(0, len(hold), 4096):
            hold[i] = 1
        while time.process_time() < {BURN}:
            pass
        report(os.getpid())
        park()
report(os.getpid())
park()
"""


def by_hand(pids):
    """(count, rss, vms, user, system) summed from /proc/<pid>/stat, reading each file once; gone ones skipped."""
    n, rss, vms, user, system = 0, 0, 0, 0.0, 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            continue
        parse_stat(raw)  # the suite's reference parser checks the line's shape
        tail = raw[raw.rfind(b")") + 2 :].split()
        n += 1
        user += int(tail[14 - 3]) / TICKS
        system += int(tail[15 - 3]) / TICKS
        vms += int(tail[23 - 3])
        rss += int(tail[24 - 3]) * PAGE
    return n, rss, vms, user, system


@pytest.fixture
def family(spawn):
    """The helper and its CHILDREN children, each parked after burning and touching its share."""
    pid, lines = spawn.start(FAMILY, lines=CHILDREN + 1, timeout=60)
    kids = [line[0] for line in lines if line[0] != pid]
    assert len(kids) == CHILDREN
    return pid, kids, spawn


def test_usage_of_a_family_agrees_with_proc_read_by_hand(family):
    root, kids, _ = family
    procs = [proctree.proc(root), *proctree.descendants(root)]
    assert sorted(p.pid for p in procs) == sorted([root, *kids])
    u = proctree.usage(procs)
    n, rss, vms, user, system = by_hand([root, *kids])
    assert u.processes == n == CHILDREN + 1
    # Everyone is parked: memory and CPU hold still between the two reads, but allow a page or a tick.
    assert abs(u.rss - rss) <= 64 * PAGE
    assert abs(u.vms - vms) <= 4 * MIB
    assert u.cpu_user == pytest.approx(user, abs=2 / TICKS)
    assert u.cpu_system == pytest.approx(system, abs=2 / TICKS)
    # And within loose bounds of what the children were told to do.
    assert u.rss >= CHILDREN * HOLD_MIB * MIB
    assert u.cpu_total >= CHILDREN * BURN * 0.9
    assert tuple(u) == pytest.approx(tuple(proctree.Usage.of_facts(proctree.facts_of(procs))))  # facts_of's sum


def test_a_member_gone_before_the_read_is_counted_nowhere(family):
    root, kids, spawn = family
    procs = [proctree.proc(root), *proctree.descendants(root)]
    before = proctree.usage(procs)
    victim = kids[0]
    spawn.signal(victim, 9)
    deadline = time.monotonic() + 10
    while proctree.proc(victim).state != "Z":  # the helper never reaps: it stays a zombie, which counts as gone
        assert time.monotonic() < deadline
        time.sleep(0.01)
    after = proctree.usage(procs)
    assert after.processes == before.processes - 1
    assert after.rss <= before.rss - HOLD_MIB * MIB
    assert after.cpu_total <= before.cpu_total - BURN * 0.9


def test_a_reaped_and_a_reused_pid_are_left_out():
    p = subprocess.Popen(["sleep", "30"])
    try:
        record = proctree.proc(p.pid)
        assert proctree.usage([record]).processes == 1
    finally:
        p.kill()
        p.wait()
    assert proctree.usage([record]) == proctree.Usage(0, 0, 0, 0.0, 0.0)
    # a record whose start time is not the live process's (as after pid reuse) names nobody
    me = proctree.proc(os.getpid())
    assert proctree.usage([me._replace(start_time=me.start_time + 1)]).processes == 0
    assert proctree.usage([me, me]).processes == 1  # listed twice, counted once


def test_usage_never_raises_while_members_are_born_and_die():
    """Short-lived children come and go while usage() reads a list taken moments before."""
    stop = threading.Event()
    started = []

    def churn():
        while not stop.is_set():
            c = subprocess.Popen(["true"])
            started.append(c)
            c.wait()

    workers = [threading.Thread(target=churn) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        reads = 0
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline or reads < 50:
            procs = proctree.descendants(os.getpid())
            u = proctree.usage(procs)
            assert 0 <= u.processes <= len(procs) and u.rss >= 0
            reads += 1
    finally:
        stop.set()
        for w in workers:
            w.join()
    assert len(started) > 10  # the churn really ran


def test_tree_usage_is_its_members_sum(trees):
    body = f"hold = bytearray({HOLD_MIB} << 20)\nfor i in range(0, len(hold), 4096): hold[i] = 1\nimport time\ntime.sleep(60)\n"
    t = proctree.spawn(["sh", "-c", f'{sys.executable} -c "$0" & exec {sys.executable} -c "$0"', body])
    trees.append(t)
    deadline = time.monotonic() + 20
    while True:  # both interpreters up and holding their memory
        members = t.members()
        u = t.usage()
        if u.processes == 2 and u.rss >= 2 * HOLD_MIB * MIB:
            break
        assert time.monotonic() < deadline, (members, u)
        time.sleep(0.05)
    assert t.keeper_pid not in [p.pid for p in members]  # our helper process is not the tree's usage
    while True:  # their memory settled (the interpreters still import and allocate): one rss by hand around the read
        pids = [p.pid for p in t.members()]
        before = by_hand(pids)
        u = t.usage()
        after = by_hand(pids)
        if before[:2] == after[:2]:
            break
        assert time.monotonic() < deadline, (before, u, after)
        time.sleep(0.05)
    n, rss = after[:2]
    assert n == 2 and abs(u.rss - rss) <= 64 * PAGE
    t.terminate(grace=1)
    assert t.usage() == proctree.Usage(0, 0, 0, 0.0, 0.0)


@pytest.mark.parametrize(
    "bad,exc",
    [(5, TypeError), ("123", TypeError), ([1, 2], TypeError), ([None], TypeError), (None, TypeError)],
)
def test_usage_refuses_what_is_not_a_list_of_proc(bad, exc):
    with pytest.raises(exc):
        proctree.usage(bad)


def test_usage_refuses_a_single_proc_with_a_hint():
    with pytest.raises(TypeError, match=r"usage\(\[p\]\)"):
        proctree.usage(proctree.proc(os.getpid()))
