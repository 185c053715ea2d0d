"""The conversion of the core's facts rows into Facts, on synthetic rows of both platforms' units.

Linux's core gives clock ticks since boot and pages; macOS's gives microseconds since the epoch, nanoseconds
of CPU and bytes (docs/facts.md). The same row of kernel values must read the same Facts in psutil's units.
"""

import os

import pytest

from proctree._table import binding
from proctree._table.facts import _Units, to_facts

STAT, UIDS, CMDLINE, EXE, CWD = (binding.FACT_STAT, binding.FACT_UIDS, binding.FACT_CMDLINE, binding.FACT_EXE,
                                 binding.FACT_CWD)  # fmt: skip


def _row(*, start, utime, stime, rss, have=STAT | UIDS | CMDLINE | EXE | CWD, denied=0, state=b"S", tty=0):
    uid = os.getuid()
    cmdline, exe, cwd = (v if have & bit else None for v, bit in ((b"tool\0-x\0", CMDLINE), (b"/bin/tool", EXE),
                                                                  (b"/tmp", CWD)))  # fmt: skip
    return (0, 4242, 1, tty, have, denied, state, 0, uid, uid, uid, start, utime, stime, 8 << 20, rss, 3,
            cmdline, exe, cwd, b"tool")  # fmt: skip


def _macos_units():
    return _Units(linux=False)


@pytest.mark.parametrize(
    "start_us, utime_ns, stime_ns, rss_bytes, create, user, system",
    [
        (1_700_000_000_123_456, 1_500_000_000, 250_000_000, 4096 * 10, 1_700_000_000.123456, 1.5, 0.25),
        (0, 0, 0, 0, 0.0, 0.0, 0.0),
        (1, 1, 1, 1, 1e-6, 1e-9, 1e-9),
        (2**53, 2**62, 2**62, 2**40, 2**53 / 1e6, 2**62 / 1e9, 2**62 / 1e9),
    ],
)
def test_macos_rows_read_in_psutils_units(start_us, utime_ns, stime_ns, rss_bytes, create, user, system):
    f = to_facts(_row(start=start_us, utime=utime_ns, stime=stime_ns, rss=rss_bytes), _macos_units())
    assert f.create_time == pytest.approx(create, rel=1e-12, abs=1e-9)
    assert f.start_time == start_us  # the identity, as Proc.start_time there
    assert (f.cpu_user, f.cpu_system) == (pytest.approx(user), pytest.approx(system))
    assert f.rss == rss_bytes and f.memory_info.rss == rss_bytes  # bytes already: no page size applied
    assert f.vms == 8 << 20
    assert f.cmdline == ["tool", "-x"] and f.exe == "/bin/tool" and f.cwd == "/tmp"
    assert f.status == "sleeping" and f.denied == frozenset()


def test_linux_rows_read_in_psutils_units():
    units = _Units(linux=True)
    hz, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    f = to_facts(_row(start=5 * hz, utime=2 * hz, stime=hz // 2, rss=10), units)
    assert f.create_time == pytest.approx(units.boot + 5)
    assert (f.cpu_user, f.cpu_system) == (pytest.approx(2.0), pytest.approx(0.5))
    assert f.rss == 10 * page


def test_another_users_counters_refused_on_macos_read_zero_and_are_named():
    row = _row(start=10, utime=0, stime=0, rss=0, have=STAT | UIDS | EXE, denied=STAT | CMDLINE | CWD)
    f = to_facts(row, _macos_units())
    assert {"rss", "vms", "memory_info", "cpu_times", "cpu_user", "cpu_system", "num_threads"} <= f.denied
    assert {"cmdline", "cwd"} <= f.denied and "exe" not in f.denied
    assert f.cmdline is None and f.cwd is None and f.exe == "/bin/tool"
    assert f.uids is not None


def test_a_zombie_reads_as_one_with_nothing_refused():
    f = to_facts(_row(start=10, utime=0, stime=0, rss=0, state=b"Z"), _macos_units())
    assert f.status == "zombie" and f.rss == 0 and f.denied == frozenset()
