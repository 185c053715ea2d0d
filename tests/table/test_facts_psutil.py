"""The facts agree with psutil's for every process of this machine that both can read.

Steady facts (parent, name, create time, argv, exe, cwd, uids, user name, terminal) must be equal. Facts that
move while a process runs (CPU times, memory, threads) are read by proctree before and after psutil, and
psutil's answer must lie between the two reads. A process is compared only if it is the same one (pid and
create time) in all three reads; one that exits or is refused meanwhile is skipped, as the machine is busy.
"""

import os
import sys

import pytest

import proctree
from proctree._table.facts import STATUS_NAMES

psutil = pytest.importorskip("psutil")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc facts")

ATTRS = ["ppid", "name", "create_time", "status", "cmdline", "exe", "cwd", "uids", "username", "terminal"]
ATTRS += ["num_threads", "memory_info", "cpu_times"]


def _psutil_cmdline_differs(mine):
    """psutil splits a one-string argv with spaces on the spaces (a process that rewrote it, psutil #1179)."""
    return len(mine) == 1 and " " in mine[0]


def _between(low, got, high, slack=0.0):
    return min(low, high) - slack <= got <= max(low, high) + slack


def test_facts_agree_with_psutil_for_every_process():
    before = {f.pid: f for f in proctree.all_facts()}
    theirs = {p.pid: p.info for p in psutil.process_iter(ATTRS)}
    after = {f.pid: f for f in proctree.all_facts()}
    compared = 0
    for pid, info in theirs.items():
        a, b = before.get(pid), after.get(pid)
        if a is None or b is None or a.start_time != b.start_time:
            continue  # born or gone during the reads
        if info["create_time"] is None or abs(info["create_time"] - a.create_time) > 1e-6:
            continue  # another process under the pid for psutil, or refused
        compared += 1
        where = f"pid {pid} ({a.name})"
        assert info["ppid"] == a.ppid, where
        # a state moves at any moment (a kernel thread runs for microseconds): only the names are the same
        assert info["status"] in STATUS_NAMES.values(), where
        if a.status == b.status and a.status in ("zombie", "stopped"):
            assert info["status"] == a.status, where
        if len(a.name) < 15:  # psutil completes a 15-byte kernel name from argv
            assert info["name"] == a.name, where
        if info["cmdline"] is not None and a.cmdline == b.cmdline and not _psutil_cmdline_differs(a.cmdline):
            assert info["cmdline"] == a.cmdline, where
        for key in ("exe", "cwd"):
            mine = getattr(a, key)
            if info[key] is not None and mine is not None and mine == getattr(b, key):
                assert info[key] == mine, (where, key)
            if mine is None:
                assert key in a.denied, (where, key)
        if info["uids"] is not None and a.uids == b.uids:
            assert tuple(info["uids"]) == a.uids and info["username"] == a.username, where
        assert info["terminal"] in (a.terminal, b.terminal), where
        assert _between(a.num_threads, info["num_threads"], b.num_threads), where
        # memory moves in pages between reads; a running process may grow past both: a loose bound
        assert _between(a.rss, info["memory_info"].rss, b.rss, slack=max(a.rss, b.rss) * 0.5 + 4096 * 64), where
        assert _between(a.vms, info["memory_info"].vms, b.vms, slack=max(a.vms, b.vms) * 0.5 + 4096 * 64), where
        assert _between(a.cpu_user, info["cpu_times"].user, b.cpu_user, slack=1e-9), where
        assert _between(a.cpu_system, info["cpu_times"].system, b.cpu_system, slack=1e-9), where
        if a.kernel_thread:
            assert info["cmdline"] in ([], None) and info["exe"] in ("", None), where
    assert compared >= min(len(before), len(theirs)) // 2 > 0, (compared, len(before), len(theirs))
    print(f"facts agreed with psutil for {compared} of {len(theirs)} processes")


def test_one_process_agrees_with_psutil():
    p = psutil.Process(os.getpid())
    f = proctree.facts(os.getpid())
    assert f.create_time == p.create_time()
    assert f.cmdline == p.cmdline() and f.exe == p.exe() and f.cwd == p.cwd()
    assert f.uids == tuple(p.uids()) and f.username == p.username() and f.status == p.status()
    assert f.terminal == p.terminal()
