"""A service's summed usage in its snapshot: read only when asked (get/list usage=True), on real trees.

The service holds a known amount of memory in two processes; its usage is compared with its tree's members
read by hand from /proc. Snapshots taken without usage=True carry None, and the events (the supervisor's own
path) never read it.
"""

import asyncio
import os
import sys
import time

import pytest

import proctree
from proctree import SyncSupervisor

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc facts")

PY = sys.executable
MIB = 1 << 20
HOLD = 24
HOLDER = (
    f"import sys, time; hold = bytearray({HOLD} << 20)\n"
    "for i in range(0, len(hold), 4096): hold[i] = 1\n"
    "print('holding', flush=True); time.sleep(120)\n"
)


def rss_by_hand(pids):
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
        total += int(raw[raw.rfind(b")") + 2 :].split()[24 - 3]) * page
    return total


def test_sync_snapshot_usage_on_request_matches_the_tree():
    events = []
    with SyncSupervisor(stop_grace=1, ready_timeout=30) as sup:
        sup.subscribe(events.append)
        # two interpreters holding HOLD MiB each, in one service's tree
        command = ["sh", "-c", f'{PY} -c "$0" & exec {PY} -c "$0"', HOLDER]
        sup.start(command, name="holders")
        deadline = time.monotonic() + 30
        while True:  # both interpreters up and holding their memory
            snap = sup.get("holders", usage=True)
            if snap.usage.processes == 2 and snap.usage.rss >= 2 * HOLD * MIB:
                break
            assert time.monotonic() < deadline, snap
            time.sleep(0.05)
        u = snap.usage
        assert u.processes == 2 and u.rss >= 2 * HOLD * MIB and u.vms >= u.rss
        assert u.cpu_user >= 0 and u.cpu_system >= 0
        members = proctree.descendants(snap.pid) + [proctree.proc(snap.pid)]
        assert abs(u.rss - rss_by_hand(p.pid for p in members)) <= 4 * MIB
        assert sup.get("holders").usage is None  # not read unless asked
        [listed] = sup.list(usage=True)
        assert listed.usage.processes == 2
        assert listed.to_dict()["usage"]["processes"] == 2 and "cpu_total" in listed.to_dict()["usage"]
        assert sup.list()[0].to_dict()["usage"] is None
        with pytest.raises(TypeError):
            sup.get("holders", usage="yes")
        sup.stop("holders")
        assert sup.get("holders", usage=True).usage == proctree.Usage(0, 0, 0, 0.0, 0.0)
    assert all(e.snapshot.usage is None for e in events)  # the supervisor's own path never reads it


def test_async_get_and_list_with_usage():
    async def main():
        async with proctree.Supervisor(stop_grace=1) as sup:
            await sup.start(["sleep", "60"], name="sleeper")
            snap = sup.get("sleeper", usage=True)
            assert snap.usage.processes == 1 and snap.usage.rss > 0
            assert [s.usage.processes for s in sup.list(usage=True)] == [1]
        assert sup.get("sleeper", usage=True).usage.processes == 0  # stopped on leaving: nothing running

    asyncio.run(main())
