"""proctree.Popen across os.fork(): an inherited Popen acts as the stdlib's does there, and nothing of the parent's.

A forked child that calls wait()/poll()/communicate()/send_signal()/terminate()/kill() on a Popen it inherited
gets what the stdlib's Popen gives it (ECHILD from waitpid, read as an exit with status 0), and the parent's
commands, their trees and its holding keeper run on untouched.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

import proctree

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0, reason="cgroup v2 containment (root, Linux)"
)


def communicate_to_the_end(p: subprocess.Popen) -> object:
    """communicate() with no pipe left to read: it goes straight to wait(), as for a command without pipes."""
    p.stdout.close()
    p.stdout = None
    return p.communicate()


# What the child calls on the Popen it inherited.
ACTIONS = {
    "communicate_to_the_end": communicate_to_the_end,
    "wait": lambda p: p.wait(),
    "wait_timeout": lambda p: p.wait(0.05),
    "poll": lambda p: p.poll(),
    "communicate": lambda p: p.communicate(timeout=0.05),
    "send_signal": lambda p: p.send_signal(signal.SIGTERM),
    "terminate": lambda p: p.terminate(),
    "kill": lambda p: p.kill(),
}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def in_a_forked_child(popen: subprocess.Popen, action: str) -> str:
    """What the action on popen returned in a forked child (repr of the result and returncode, or the exception)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            try:
                result = ACTIONS[action](popen)
                out = f"{result!r} {popen.returncode!r}"
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                out = f"raised {type(exc).__name__}"
            time.sleep(0.05)  # anything proctree would start in the child (a thread) gets its chance to act
            os.write(w, out.encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out = f.read().decode()
    os.waitpid(pid, 0)
    return out


@contextlib.contextmanager
def commands():
    """A stdlib Popen and a proctree.Popen, each a shell running a grandchild (pid on stdout).

    Started in the test itself, not a fixture: the first proctree.Popen starts the process's holding tree,
    which the plugin's check of a fixture would count as the fixture's.
    """
    started = []
    try:
        for cls in (subprocess.Popen, proctree.Popen):
            p = cls(["sh", "-c", "sleep 300 & echo $!; wait"], stdout=subprocess.PIPE)
            started.append((p, int(p.stdout.readline())))
        yield started
    finally:
        for p, grandchild in started:
            if p.poll() is None and alive(grandchild):
                os.kill(grandchild, signal.SIGKILL)  # the stdlib's command leaves it behind; ours would not
            p.kill()
            p.wait()
            p.stdout.close()


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_an_inherited_popen_acts_as_the_stdlibs_in_a_forked_child(action):
    with commands() as ((std, _), (ours, grandchild)):
        expected = in_a_forked_child(std, action)
        assert in_a_forked_child(ours, action) == expected
        time.sleep(0.1)
        assert ours.poll() is None and alive(ours.pid) and alive(grandchild), "the child ended the parent's command"


def test_a_hundred_forked_children_leave_the_parents_commands_alone():
    with commands() as ((_, _), (ours, grandchild)):
        other = proctree.Popen(["sleep", "300"])  # a second command, so a teardown of the wrong cgroup shows too
        try:
            names = sorted(ACTIONS)
            for i in range(100):
                in_a_forked_child(ours if i % 2 else other, names[i % len(names)])
            time.sleep(0.2)
            assert ours.poll() is None and other.poll() is None
            assert alive(ours.pid) and alive(grandchild) and alive(other.pid)
        finally:
            other.kill()
            other.wait()


def test_a_subclass_named_like_cpythons_class_is_not_taken_for_it(tmp_path):
    # A counting wrapper that says it is subprocess.Popen, swapped in before the first start: the holding
    # keeper must still start through CPython's own class (it deadlocked, starting the holder again).
    script = tmp_path / "counting.py"
    script.write_text(
        "import subprocess, proctree\n"
        "from unittest import mock\n"
        "from proctree._containment import realpopen\n"
        "count = 0\n"
        "class Counting(proctree.Popen):\n"
        "    __module__ = 'subprocess'\n"
        "    __qualname__ = 'Popen'\n"
        "    def __init__(self, *a, **k):\n"
        "        global count\n"
        "        count += 1\n"
        "        super().__init__(*a, **k)\n"
        "genuine = subprocess.Popen\n"
        "subprocess.Popen = Counting\n"
        "assert realpopen.genuine_popen() is genuine\n"
        "print(subprocess.run(['sh', '-c', 'exit 3']).returncode, proctree.run(['true']).returncode, count)\n"
        "with mock.patch('subprocess.Popen') as fake:\n"
        "    assert realpopen.genuine_popen() is genuine\n"
        "    print(proctree.Popen(['true']).wait(), fake.called)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "0", "2", "0", "False"]


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fresh_python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)


def test_children_forked_during_a_first_start_start_their_own_at_once():
    # The acceptance run is 200 children (tools/fork_first_start.py, docs/dropin.md); 60 here, 5 each way.
    tool = os.path.join(REPO, "tools", "fork_first_start.py")  # the repository's (or sdist's), beside these tests
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run(
        [sys.executable, tool, "--children", "60", "--per-trial", "5", "--patience", "20"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 of 60 children forked during first starts hung" in out.stdout
    assert "while a first command's leftovers are ended from another thread: 0 of 5 hung" in out.stdout


def test_a_start_imports_nothing():
    # Everything a start needs loads with the name proctree.Popen: a start never holds an import lock.
    out = fresh_python(
        "import sys, proctree\n"
        "Popen = proctree.Popen\n"
        "before = set(sys.modules)\n"
        "Popen(['true']).wait()\n"
        "Popen(['sh', '-c', 'exit 3'], stdout=proctree.PIPE, text=True).communicate()\n"
        "try:\n"
        "    Popen(['/nonexistent/command'])\n"
        "except FileNotFoundError:\n"
        "    pass\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_name_loads_neither_the_teardown_nor_typing_nor_inspect():
    # What only ending leftovers needs loads then, through the fork-safe loader (the forks in
    # test_children_forked_during_a_first_start_start_their_own_at_once land in that load too).
    out = fresh_python("import sys, proctree\nproctree.Popen\nprint(' '.join(sorted(sys.modules)))\n")
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.split())
    heavy = {"typing", "inspect", "dataclasses", "ast", "asyncio", "proctree._teardown.engine"}
    assert not loaded & heavy, sorted(loaded & heavy)


def test_many_threads_making_their_first_popen_together():
    out = fresh_python(
        "import threading, proctree\n"
        "from proctree._containment import popenhold\n"
        "results, go = [], threading.Barrier(8)\n"
        "def first():\n"
        "    go.wait()\n"
        "    results.append(proctree.Popen(['sh', '-c', 'exit 5']).wait())\n"
        "threads = [threading.Thread(target=first) for _ in range(8)]\n"
        "for t in threads: t.start()\n"
        "for t in threads: t.join(30)\n"
        "print(results, len(popenhold.held_pids()))\n"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[5,", "5,", "5,", "5,", "5,", "5,", "5,", "5]", "2"]


def test_a_fork_while_another_thread_imports_leaves_the_child_a_fresh_import(tmp_path):
    # proctree's lazy import of a module (here a stand-in that takes a while) from one thread, os.fork() from
    # another meanwhile: the child imports it afresh instead of waiting forever for the copied lock.
    out = fresh_python(
        "import os, sys, threading, time, proctree\n"
        "from proctree import _lazyimport\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "open(os.path.join(sys.path[0], 'slowmod.py'), 'w').write('import time\\ntime.sleep(0.5)\\nDONE = 1\\n')\n"
        "t = threading.Thread(target=_lazyimport.load, args=('slowmod', None))\n"
        "t.start()\n"
        "time.sleep(0.2)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    import signal\n"
        "    signal.alarm(10)\n"
        "    import slowmod\n"
        "    os._exit(0 if slowmod.DONE == 1 else 3)\n"
        "t.join()\n"
        "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"
