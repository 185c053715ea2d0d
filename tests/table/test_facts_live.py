"""proctree.facts(), all_facts() and facts_of() on real processes, checked against /proc read by hand.

Each helper is started by the `spawn` fixture (tests/support/spawner.py), reports its pid through a pipe and
is ended afterwards. The reference reads here are plain Python file reads of proc(5)'s fields, sharing no
code with the core. Bad input is refused with TypeError/ValueError before anything is read.
"""

import os
import subprocess
import sys
import textwrap

import pytest

import proctree
from proctree._table import binding
from support.procfs import parse_stat

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc facts")

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

HELPER = r"""
os.chdir(CWD)
hold = bytearray(8 << 20)  # 8 MiB touched: a resident size well above the interpreter's own
for i in range(0, len(hold), 4096):
    hold[i] = 1
started = threading.Event()
threads = [threading.Thread(target=lambda: (started.set(), select.select([0], [], [], 120))) for _ in range(2)]
for t in threads:
    t.daemon = True
    t.start()
started.wait()
set_name(b"ptfacts")
report(os.getpid(), *[t.native_id for t in threads])
park()
"""


def by_hand(pid):
    """The facts' fields straight from /proc/<pid>: stat, status, cmdline and the two links."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    st = parse_stat(raw)
    tail = raw[raw.rfind(b")") + 2 :].split()
    with open(f"/proc/{pid}/status", "rb") as f:
        uid_line = next(line for line in f if line.startswith(b"Uid:"))
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read()
    with open("/proc/stat", "rb") as f:
        btime = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
    return {
        "ppid": st["ppid"],
        "name": os.fsdecode(st["name"]),
        "start_time": st["start_time"],
        "create_time": btime + st["start_time"] / TICKS,
        "num_threads": st["num_threads"],
        "cpu_user": int(tail[14 - 3]) / TICKS,
        "cpu_system": int(tail[15 - 3]) / TICKS,
        "vms": int(tail[23 - 3]),
        "rss": int(tail[24 - 3]) * PAGE,
        "uids": tuple(int(x) for x in uid_line.split()[1:4]),
        "cmdline": [os.fsdecode(a) for a in argv.split(b"\0")[:-1]],
        "exe": os.readlink(f"/proc/{pid}/exe"),
        "cwd": os.readlink(f"/proc/{pid}/cwd"),
    }


@pytest.fixture
def helper(spawn, tmp_path):
    body = f"CWD = {str(tmp_path)!r}\n" + textwrap.dedent(HELPER)
    pid, [line] = spawn.start(body, not_pids=(0,))
    return pid, line[1:], tmp_path


def test_facts_of_a_process_we_started_agree_with_proc_read_by_hand(helper):
    pid, _, cwd = helper
    f = proctree.facts(pid)
    ref = by_hand(pid)
    for key in ("ppid", "name", "start_time", "num_threads", "vms", "uids", "cmdline", "exe", "cwd"):
        assert getattr(f, key) == ref[key], key
    assert f.create_time == pytest.approx(ref["create_time"], abs=1e-6)
    assert f.num_threads == 3 and f.name == "ptfacts" and f.cwd == str(cwd) and f.ppid == os.getpid()
    assert f.rss >= 8 << 20 and abs(f.rss - ref["rss"]) <= 64 * PAGE  # parked: nothing but the GC moves
    assert 0 <= f.cpu_user <= ref["cpu_user"] and 0 <= f.cpu_system <= ref["cpu_system"]
    assert f.status in ("sleeping", "running") and f.kernel_thread is False and f.denied == frozenset()  # parking
    assert f.uids == (os.getuid(), os.geteuid(), os.getuid()) and f.username is not None
    assert f.memory_info == (f.rss, f.vms) and f.cpu_times == (f.cpu_user, f.cpu_system)
    assert f.identity == proctree.proc(pid).identity


def test_only_the_facts_asked_for_are_read(helper):
    pid, _, _ = helper
    f = proctree.facts(pid, attrs=["memory_info", "create_time"])
    assert (f.cmdline, f.exe, f.cwd, f.uids, f.username) == (None, None, None, None, None)
    assert f.rss > 0 and f.name == "ptfacts"  # what one stat file holds is always there
    g = proctree.facts(pid, attrs=("username",))
    assert g.uids is not None and g.username is not None and g.cmdline is None


def test_a_thread_id_is_not_a_process(helper):
    _, tids, _ = helper
    for tid in tids:
        with pytest.raises(proctree.NoSuchProcess):
            proctree.facts(tid)
        with pytest.raises(proctree.NoSuchProcess):
            proctree.facts(tid, attrs=["ppid"])  # even when status is not otherwise read


def test_all_facts_and_facts_of_hold_our_process(helper):
    pid, _, cwd = helper
    mine = [f for f in proctree.all_facts(["cwd"]) if f.pid == pid]
    assert len(mine) == 1 and mine[0].cwd == str(cwd) and mine[0].cmdline is None
    snap = proctree.snapshot()
    got = proctree.facts_of([snap[pid], snap[os.getpid()]], ["cmdline"])
    assert [f.pid for f in got] == [pid, os.getpid()]
    assert got[0].cmdline == by_hand(pid)["cmdline"]


def test_a_process_under_another_start_time_is_left_out_or_refused(helper):
    pid, _, _ = helper
    p = proctree.proc(pid)
    stale = p._replace(start_time=p.start_time + 1)  # as if pid had been reused since
    assert [f.identity for f in proctree.facts_of([stale, p, stale])] == [p.identity]
    with pytest.raises(proctree.NoSuchProcess):
        binding.facts_one(pid, binding.FACT_ALL, p.start_time + 1)


def test_a_zombie_has_no_argv_exe_or_cwd():
    child = subprocess.Popen(["true"])
    try:
        for _ in range(2000):
            with open(f"/proc/{child.pid}/stat", "rb") as f:
                if parse_stat(f.read())["state"] == "Z":
                    break
            os.sched_yield()
        f = proctree.facts(child.pid)
        assert f.status == "zombie" and f.cmdline == [] and f.exe == "" and f.cwd == ""
        assert f.rss == 0 and f.denied == frozenset()
        assert [g.pid for g in proctree.facts_of([proctree.proc(child.pid)])] == [child.pid]
    finally:
        child.wait()
    with pytest.raises(proctree.NoSuchProcess):
        proctree.facts(child.pid)


def test_kernel_threads_are_marked_and_have_no_argv():
    kthreads = [f for f in proctree.all_facts() if f.kernel_thread]
    if not kthreads:
        pytest.skip("no kernel thread visible (a PID namespace)")
    for f in kthreads[:20]:
        assert binding.is_kernel_thread(f.pid)
        assert f.cmdline == [] and f.exe == "" and f.rss == 0
    assert not proctree.facts(os.getpid()).kernel_thread


def test_strings_longer_than_a_rows_share_are_read_whole(spawn):
    long_arg = "x" * 100_000  # past the shared buffer's per-row share and the single read's first buffer
    pid, _ = spawn.start("report(os.getpid())\npark()\n#" + long_arg)
    want = by_hand(pid)["cmdline"]
    assert proctree.facts(pid).cmdline == want
    assert [f.cmdline for f in proctree.all_facts(["cmdline"]) if f.pid == pid] == [want]
    assert proctree.facts_of([proctree.proc(pid)], ["cmdline"])[0].cmdline == want


REFUSED = r"""
import json, os, sys
import proctree
from proctree._table import facts  # everything loaded before the uid drops: the checkout may be root's only
import pwd, posixpath, struct
os.setgroups([])
os.setgid(65534)
os.setuid(65534)
rows = proctree.all_facts(["cmdline", "exe", "cwd", "username"])
mine = proctree.facts(os.getpid())
print(json.dumps({
    "n": len(rows),
    "denied": sorted({f.pid for f in rows if "exe" in f.denied}),
    "exe_of_denied": sorted({str(f.exe) for f in rows if "exe" in f.denied}),
    "root_ok": [f.pid for f in rows if f.uids and f.uids[0] == 0 and not f.kernel_thread and "exe" not in f.denied],
    "mine": [mine.exe is not None, sorted(mine.denied)],
}))
"""


def test_refused_files_are_named_and_never_raised():
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to another user")
    r = subprocess.run([sys.executable, "-c", REFUSED], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    import json

    out = json.loads(r.stdout)
    assert out["n"] > 0 and out["denied"], out  # root's processes refuse their exe link to nobody
    assert out["exe_of_denied"] == ["None"]
    assert out["root_ok"] == []
    assert out["mine"] == [True, []]


@pytest.mark.parametrize(
    "call, exc",
    [
        (lambda: proctree.facts(True), TypeError),
        (lambda: proctree.facts("1"), TypeError),
        (lambda: proctree.facts(0), ValueError),
        (lambda: proctree.facts(-5), ValueError),
        (lambda: proctree.facts(2**40), ValueError),
        (lambda: proctree.facts(1, attrs="cmdline"), TypeError),
        (lambda: proctree.facts(1, attrs=b"cmdline"), TypeError),
        (lambda: proctree.facts(1, attrs=5), TypeError),
        (lambda: proctree.facts(1, attrs=[5]), TypeError),
        (lambda: proctree.facts(1, attrs=["cmdlines"]), ValueError),
        (lambda: proctree.all_facts(attrs=["memory"]), ValueError),
        (lambda: proctree.all_facts(attrs="exe"), TypeError),
        (lambda: proctree.facts_of([1, 2]), TypeError),
        (lambda: proctree.facts_of(proctree.proc(os.getpid())), TypeError),
        (lambda: proctree.facts_of(5), TypeError),
        (lambda: proctree.facts_of([], attrs=["nope"]), ValueError),
    ],
)
def test_bad_input_is_refused_before_anything_is_read(call, exc):
    with pytest.raises(exc):
        call()


def test_empty_and_pid_attrs_are_fine():
    assert proctree.facts_of([]) == []
    f = proctree.facts(os.getpid(), attrs=["pid"])
    assert f.pid == os.getpid() and f.cmdline is None
    assert proctree.facts(os.getpid(), attrs=[]).pid == os.getpid()


def test_a_pid_that_is_not_there_raises_no_such_process():
    with open("/proc/sys/kernel/pid_max") as f:
        free = int(f.read())  # pids are < pid_max: never assigned
    if free > 2**22:
        pytest.skip("pid_max above what proctree accepts")
    with pytest.raises(proctree.NoSuchProcess):
        proctree.facts(free)


def test_facts_pickle_and_compare_as_records():
    import copy
    import pickle

    f = proctree.facts(os.getpid())
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        g = pickle.loads(pickle.dumps(f, protocol))
        assert g == f and type(g) is proctree.Facts and g.memory_info == f.memory_info
    assert copy.copy(f) == f and hash(f._replace(cmdline=None, denied=frozenset())) is not None
    with pytest.raises(AttributeError):
        f.pid = 1


SHORT_OF_FDS = r"""
import errno, os, sys
import proctree
me = proctree.proc(os.getpid())
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
os.close(held.pop())  # one descriptor free: each call can open /proc, no process's directory besides
outcomes = []
for call in (lambda: proctree.all_facts([]), lambda: proctree.facts_of([me], []), lambda: proctree.usage([me])):
    try:
        outcomes.append(repr(call()))
    except OSError as exc:
        outcomes.append(errno.errorcode.get(exc.errno, str(exc.errno)))
print(" ".join(outcomes))
"""


def test_a_process_short_of_descriptors_gets_an_error_not_an_empty_answer():
    # Leaving out rows the core could not read for want of descriptors would report live processes as gone.
    r = subprocess.run([sys.executable, "-c", SHORT_OF_FDS], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["EMFILE", "EMFILE", "EMFILE"], r.stdout
