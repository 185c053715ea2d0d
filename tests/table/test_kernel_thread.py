"""Kernel threads are not process trees: terminate_tree and `proctree kill` refuse them up front.

Detection is by PF_KTHREAD in the flags field of /proc/<pid>/stat, counted
after the last ')'. A parent pid of 2 or a kworker-like name proves nothing:
inside a PID namespace an ordinary process can have both (tested there).
"""

import json
import os
import sys

import pytest

import proctree
from proctree._table import binding as _binding
from proctree._teardown import signals as _signals
from proctree.cli import main
from support.treekit import run_in_pid_namespace

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

KTHREADD = (
    b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 25 0 0 "
    b"18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
)
PYTHON = b"4242 (python3) S 4000 4242 4000 34816 4242 4194560 1200 0 0 0 3 1 0 0 20 0 1 0 9000 0 0\n"


@pytest.mark.parametrize(
    "line,flags",
    [
        (KTHREADD, 2129984),
        (PYTHON, 4194560),
        # A name that holds a whole fake tail of fields claiming PF_KTHREAD: only
        # the fields after the LAST ')' count.
        (b"77 (x) S 2 0 0 0 -1 2097152 0) S 1 77 77 0 -1 4194304 0 0\n", 4194304),
        (b"78 (a b (c)) R 1 78 78 0 -1 64 0\n", 64),
        (b"79 ()) Z 1 79 79 0 -1 4 0\n", 4),
        (b"80 (\n) S 1 80 80 0 -1 8 0\n", 8),
    ],
)
def test_stat_flags_counts_fields_after_the_last_paren(line, flags):
    assert _binding.stat_flags(line) == flags


@pytest.mark.parametrize(
    "line", [b"", b"garbage", b"1 (x) S 1 2", b"1 x) S 1 1 1 0 -1 4 0", b"1 (x) S 1 1 1 0 -1 zz 0"]
)
def test_stat_flags_refuses_what_is_not_a_stat_line(line):
    with pytest.raises(ValueError):
        _binding.stat_flags(line)


def test_flag_test_uses_pf_kthread():
    assert _binding.stat_flags(KTHREADD) & _binding.PF_KTHREAD
    assert not _binding.stat_flags(PYTHON) & _binding.PF_KTHREAD


def test_ordinary_processes_are_not_kernel_threads():
    assert _binding.is_kernel_thread(os.getpid()) is False
    assert _binding.is_kernel_thread(1) is False


@linux_only
def test_missing_pid_is_no_such_process():
    with open("/proc/sys/kernel/pid_max") as f:
        free = int(f.read())  # pids are < pid_max: never assigned
    with pytest.raises(proctree.NoSuchProcess):
        _binding.is_kernel_thread(free)


def _a_kernel_thread():
    """kthreadd (it never exits), or skip where no kernel thread is visible."""
    snap = proctree.snapshot()
    if 2 in snap and snap[2].name == "kthreadd" and _binding.is_kernel_thread(2):
        return 2
    pytest.skip("no kernel thread visible here (a container's PID namespace?)")


@pytest.fixture
def no_signals(monkeypatch):
    """Make any signal the engine tries to send fail the test instead of reaching a kernel thread."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"a signal was about to be sent: {args}")

    monkeypatch.setattr(_signals, "send", refuse)
    monkeypatch.setattr(_signals, "send_group", refuse)


@linux_only
def test_terminate_tree_refuses_a_kernel_thread(no_signals):
    pid = _a_kernel_thread()
    with pytest.raises(ValueError, match=f"refusing to tear down pid {pid}: it is a kernel thread"):
        proctree.terminate_tree(pid, grace=0)


@linux_only
def test_terminate_tree_async_refuses_a_kernel_thread(no_signals):
    import asyncio

    pid = _a_kernel_thread()
    with pytest.raises(ValueError, match="kernel thread"):
        asyncio.run(proctree.terminate_tree_async(pid, grace=0))


@linux_only
@pytest.mark.parametrize("as_json", [False, True])
def test_cli_kill_refuses_a_kernel_thread(no_signals, capsys, as_json):
    pid = _a_kernel_thread()
    code = main(["kill", str(pid), "--grace", "0", *(["--json"] if as_json else [])])
    out, err = capsys.readouterr()
    assert code == 2
    if as_json:
        doc = json.loads(out)
        assert doc == {"ok": False, "error": {"type": "ValueError", "pid": pid, "message": doc["error"]["message"]}}
        assert "kernel thread" in doc["error"]["message"]
    else:
        assert out == "" and err.startswith("proctree kill: ") and "kernel thread" in err


def test_fake_kernel_thread_in_a_pid_namespace_is_torn_down():
    # Pid 2 of a fresh namespace is an ordinary process, and its child has
    # ppid 2 and a kworker name: neither makes it a kernel thread.
    r = run_in_pid_namespace(
        """
        import ctypes, json, os, signal, sys, time
        import proctree
        from proctree._table import binding as _binding

        def kworker_named_child():
            ctypes.CDLL(None).prctl(15, b"kworker/0:1", 0, 0, 0)  # PR_SET_NAME
            os.write(w, b"x")
            time.sleep(1000)

        r, w = os.pipe()
        two = os.fork()
        if two == 0:
            if os.fork() == 0:
                kworker_named_child()
            time.sleep(1000)
        os.read(r, 1)
        snap = proctree.snapshot()
        (fake,) = snap.child_pids(two)
        kthread = [_binding.is_kernel_thread(p) for p in (1, two, fake)]
        report = proctree.terminate_tree(two, grace=1)
        print(json.dumps({
            "two": two,
            "fake_ppid": snap[fake].ppid,
            "fake_name": snap[fake].name,
            "kthread": kthread,
            "ok": report.ok,
            "found": sorted(p.pid for p in report.found),
        }))
        """
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["two"] == 2 and out["fake_ppid"] == 2 and out["fake_name"] == "kworker/0:1"
    assert out["kthread"] == [False, False, False]
    assert out["ok"] is True and len(out["found"]) == 2
