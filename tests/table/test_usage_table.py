"""proctree.Usage and its sums, on synthetic Facts: no process is read here.

The same rows feed the CLI's views of usage (`proctree tree --stats`, `proctree up --stats`): sizes and CPU
seconds as text, and a walk's per-subtree sums, where a process without facts counts nowhere but its children do.
"""

import pickle

import pytest

import proctree
from proctree.cli import _usageview

MIB = 1 << 20


def fact(pid, rss=0, vms=0, user=0.0, system=0.0, status="sleeping", threads=1, start=100):
    """A Facts row with only what the sums read set; the rest plausible."""
    return proctree.Facts(
        pid, 1, f"p{pid}", status, 1.7e9, start, None, None, None, None, None,
        threads, rss, vms, user, system, None, False, frozenset(),
    )  # fmt: skip


@pytest.mark.parametrize(
    "rows,want",
    [
        ([], (0, 0, 0, 0.0, 0.0)),
        ([fact(10, MIB, 4 * MIB, 0.5, 0.25)], (1, MIB, 4 * MIB, 0.5, 0.25)),
        (
            [fact(10, MIB, 2 * MIB, 1.0, 0.5), fact(11, 3 * MIB, 5 * MIB, 0.25, 0.25)],
            (2, 4 * MIB, 7 * MIB, 1.25, 0.75),
        ),
        # the same process twice (a list with duplicates) counts once
        ([fact(10, MIB, MIB, 1.0, 1.0), fact(10, MIB, MIB, 1.0, 1.0)], (1, MIB, MIB, 1.0, 1.0)),
        # the same pid, another start time: another process (the pid was reused), counted
        ([fact(10, MIB, MIB, 1.0, 0.0), fact(10, MIB, MIB, 1.0, 0.0, start=200)], (2, 2 * MIB, 2 * MIB, 2.0, 0.0)),
        # a whole zombie counts as gone
        ([fact(10, MIB, MIB, 1.0, 0.0), fact(11, 0, 0, 0.5, 0.5, status="zombie")], (1, MIB, MIB, 1.0, 0.0)),
        # a leader that exited while two threads run reads "zombie" but is alive: counted
        ([fact(11, 0, 0, 0.5, 0.5, status="zombie", threads=2)], (1, 0, 0, 0.5, 0.5)),
    ],
)
def test_usage_of_facts_sums_each_process_once(rows, want):
    u = proctree.Usage.of_facts(rows)
    assert tuple(u) == pytest.approx(want)
    assert u.processes == want[0] and isinstance(u.processes, int) and isinstance(u.rss, int)


def test_usage_is_an_immutable_named_record_with_a_json_form():
    u = proctree.Usage(3, 10 * MIB, 30 * MIB, 1.5, 0.5)
    assert (u.processes, u.rss, u.vms, u.cpu_user, u.cpu_system) == (3, 10 * MIB, 30 * MIB, 1.5, 0.5)
    assert u.cpu_total == 2.0
    assert u.to_dict() == {
        "processes": 3, "rss": 10 * MIB, "vms": 30 * MIB, "cpu_user": 1.5, "cpu_system": 0.5, "cpu_total": 2.0,
    }  # fmt: skip
    with pytest.raises(AttributeError):
        u.rss = 0  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(u)) == u and hash(u) == hash(tuple(u))


@pytest.mark.parametrize(
    "n,text",
    [
        (0, "0B"),
        (1023, "1023B"),
        (1024, "1.0K"),
        (1536, "1.5K"),
        (10 * 1024, "10K"),
        (1023 * 1024, "1023K"),
        (MIB, "1.0M"),
        (45 * MIB + 300 * 1024, "45M"),
        (3 << 30, "3.0G"),
        (5 << 50, "5.0P"),
        (5000 << 50, "5000P"),  # the largest unit keeps growing rather than failing
    ],
)
def test_size_reads_like_ps(n, text):
    assert _usageview.size(n) == text


@pytest.mark.parametrize(
    "seconds,text",
    [(0.0, "0.00s"), (0.004, "0.00s"), (1.5, "1.50s"), (59.99, "59.99s"), (60, "1:00"), (154.7, "2:34"),
     (3599, "59:59"), (3600, "1:00:00"), (90061, "25:01:01")],
)  # fmt: skip
def test_cpu_seconds_read_like_ps_time(seconds, text):
    assert _usageview.cpu(seconds) == text


def test_summary_and_columns_in_words():
    u = proctree.Usage(1, 2 * MIB, 8 * MIB, 0.5, 0.25)
    assert _usageview.summary(u) == "1 proc, rss 2.0M, vms 8.0M, cpu 0.75s (user 0.50s, sys 0.25s)"
    assert _usageview.summary(u._replace(processes=4)).startswith("4 procs, ")
    assert _usageview.proc_columns(fact(7, 3 * MIB, 0, 1.0, 0.5)) == "rss 3.0M cpu 1.50s"


# A drawing-order walk as `proctree tree` makes it: (pid, depth, last, kids).
#   1
#   ├─ 2 (gone before the read: no facts)
#   │  └─ 4
#   └─ 3
#      └─ 5 (a zombie)
STEPS = [(1, 0, True, [2, 3]), (2, 1, False, [4]), (4, 2, True, []), (3, 1, True, [5]), (5, 2, True, [])]
FACTS = {
    1: fact(1, 1 * MIB, 10 * MIB, 1.0, 0.5),
    4: fact(4, 4 * MIB, 40 * MIB, 0.25, 0.25),
    3: fact(3, 3 * MIB, 30 * MIB, 2.0, 0.0),
    5: fact(5, 0, 0, 0.75, 0.25, status="zombie"),
}


def test_subtree_usage_sums_what_is_drawn_below_each_process():
    sums = _usageview.subtree_usage(STEPS, FACTS)
    assert tuple(sums[4]) == (1, 4 * MIB, 40 * MIB, 0.25, 0.25)
    assert tuple(sums[2]) == (1, 4 * MIB, 40 * MIB, 0.25, 0.25)  # itself unread, its child counted
    assert tuple(sums[5]) == (0, 0, 0, 0.0, 0.0)  # a zombie counts as gone
    assert tuple(sums[3]) == (1, 3 * MIB, 30 * MIB, 2.0, 0.0)
    assert tuple(sums[1]) == (3, 8 * MIB, 80 * MIB, 3.25, 0.75)
    assert sums[1] == proctree.Usage.of_facts(FACTS.values())  # the root's sum is the whole set's


def test_stats_columns_put_subtree_sums_on_parents_only():
    from proctree.cli import tree

    cols = tree.stats_columns(STEPS, FACTS)
    assert cols[4] == "rss 4.0M cpu 0.50s"
    assert cols[2] == "rss - cpu - {1 proc, rss 4.0M, vms 40M, cpu 0.50s (user 0.25s, sys 0.25s)}"
    assert cols[1].startswith("rss 1.0M cpu 1.50s {3 procs, rss 8.0M, ")


def test_tree_json_records_carry_own_and_subtree_usage():
    from proctree.cli import tree

    snap = proctree.Snapshot(
        [
            proctree.Proc(pid, ppid, pid, pid, 0, "S", 100, f"p{pid}")
            for pid, ppid in ((1, 0), (2, 1), (3, 1), (4, 2), (5, 3))
        ]
    )
    doc = tree.document(snap, STEPS, {}, FACTS)
    by_pid = {p["pid"]: p for p in doc["procs"]}
    assert by_pid[2]["usage"] is None and by_pid[2]["subtree"]["processes"] == 1
    assert by_pid[1]["usage"] == {"rss": MIB, "vms": 10 * MIB, "cpu_user": 1.0, "cpu_system": 0.5}
    assert by_pid[1]["subtree"]["processes"] == 3 and by_pid[1]["subtree"]["cpu_total"] == pytest.approx(4.0)
    assert "usage" not in tree.document(snap, STEPS, {})["procs"][0]  # only with --stats


def test_walk_leaves_hidden_processes_and_what_is_below_them_out():
    from proctree.cli import tree

    snap = proctree.Snapshot(
        [proctree.Proc(pid, ppid, pid, pid, 0, "S", 100, f"p{pid}") for pid, ppid in ((1, 0), (2, 0), (3, 2), (4, 1))]
    )
    drawn = [pid for pid, *_ in tree.walk(snap, tree.table_roots(snap), everything=True, hidden={2, 3})]
    assert drawn == [1, 4]
    assert [pid for pid, *_ in tree.walk(snap, tree.table_roots(snap), everything=True)] == [1, 4, 2, 3]


def raw_row(pid, status=0, state=b"S", start=100, utime=0, stime=0, vsize=0, rss_pages=0, threads=1):
    """One core row as binding.facts_scan gives it (docs: binding.RawFacts), stat fields only."""
    return (status, pid, 1, 0, 1, 0, state, 0, 0, 0, 0,
            start, utime, stime, vsize, rss_pages, threads, None, None, None, b"p")  # fmt: skip


def test_usage_of_sums_the_core_rows_in_its_units(monkeypatch):
    """proctree.usage()'s own sum over synthetic rows: gone, refused, zombie and repeated rows left out,
    pages and clock ticks converted once."""
    import os

    from proctree._table import binding
    from proctree._table import usage as usage_mod

    ticks, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    rows = [
        raw_row(10, utime=ticks, stime=ticks // 2, vsize=4 * MIB, rss_pages=256),
        raw_row(11, status=binding.ROW_GONE, utime=99 * ticks, vsize=MIB, rss_pages=99),  # exited: nowhere
        raw_row(12, status=-13, utime=99 * ticks, rss_pages=99),  # refused (EACCES): nowhere
        raw_row(13, state=b"Z", utime=3 * ticks),  # a whole zombie: gone
        raw_row(14, state=b"Z", threads=3, utime=2 * ticks, vsize=0),  # leader exited, threads run: counted
        raw_row(10, utime=ticks, stime=ticks // 2, vsize=4 * MIB, rss_pages=256),  # the same process again
    ]
    asked = []

    def fake_scan(pids, starts, want):
        asked.append((list(pids), list(starts), want))
        return rows

    monkeypatch.setattr(binding, "facts_scan", fake_scan)
    procs = [proctree.Proc(pid, 1, pid, pid, 0, "S", 100, "p") for pid in (10, 11, 12, 13, 14, 10)]
    u = usage_mod.usage_of(procs)
    assert asked == [([10, 11, 12, 13, 14, 10], [100] * 6, binding.FACT_STAT)]  # one pass, pinned, stat only
    assert u.processes == 2
    assert u.rss == 256 * page and u.vms == 4 * MIB
    assert u.cpu_user == pytest.approx(3.0) and u.cpu_system == pytest.approx((ticks // 2) / ticks)
    assert usage_mod.usage_of([]) == proctree.Usage(0, 0, 0, 0.0, 0.0) and len(asked) == 1  # nothing read
