"""spawn() and proctree.Popen with some of fds 0-2 closed, and with subprocess.Popen patched before the first spawn.

Each case runs in a child interpreter of its own: closing the test process's
own std fds, or patching its subprocess module, would disturb pytest.
"""

import os
import subprocess
import sys
import textwrap
import time

import pytest

import proctree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))


def run_script(body: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(body)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


CLOSED_STDIO = """
import os, sys, time, asyncio, subprocess
closed = {closed!r}
import proctree
log = os.dup(2)  # kept above 2: the report goes here
# A first spawn takes the module's own descriptors (the spare ones, the keeper watch's pipe), which
# would otherwise fill the closed numbers: the closed ones must be free when the call below runs.
proctree.spawn(["true"]).wait()
for fd in closed:
    os.close(fd)
t0 = time.monotonic()
try:
{call}
except BaseException:
    import traceback
    os.write(log, traceback.format_exc().encode())
    raise SystemExit(1)
os.write(log, f"ok {{time.monotonic() - t0:.3f}}\\n".encode())
"""

CALLS = {
    "spawn": "tree = proctree.spawn(['true'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, "
    "stdin=subprocess.DEVNULL)\nassert tree.wait() == 0",
    "spawn_pipe": "tree = proctree.spawn(['echo', 'hi'], stdout=subprocess.PIPE)\n"
    "assert tree.stdout.read() == b'hi\\n'\nassert tree.wait() == 0",
    "spawn_async": "async def main():\n    tree = await proctree.spawn_async(['true'], stdout=subprocess.DEVNULL)\n"
    "    assert tree.wait() == 0\nasyncio.run(main())",
    "spawn_pty": "tree = proctree.spawn(['true'], pty=True)\nassert tree.wait() == 0",
    "popen": "p = proctree.Popen(['echo', 'hi'], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)\n"
    "assert p.communicate()[0] == b'hi\\n'\nassert p.wait() == 0",
}


@pytest.mark.parametrize("closed", [(0,), (1,), (0, 1), (0, 1, 2)], ids=lambda c: "closed" + "".join(map(str, c)))
@pytest.mark.parametrize("entry", sorted(CALLS))
def test_spawn_with_std_fds_closed(closed, entry):
    # The keeper's status pipe used to land on a closed std fd that the stdio redirection then
    # overwrote: the start waited 5 s and raised "the keeper exited before starting the command".
    call = textwrap.indent(CALLS[entry], "    ")
    out = run_script(CLOSED_STDIO.format(closed=closed, call=call))
    assert out.returncode == 0, out.stderr
    word, took = out.stderr.split()
    assert word == "ok"
    assert float(took) < 4.0


PATCHED = """
import subprocess
from unittest import mock
with mock.patch("subprocess.Popen") as fake:
    import proctree
    tree = proctree.spawn(["sh", "-c", "echo $$"], stdout=subprocess.PIPE)
    out = tree.stdout.read()
    assert tree.wait() == 0
    assert int(out) == tree.pid, (out, tree.pid)
    assert not fake.called, fake.mock_calls
    {extra}
print("ok")
"""


@pytest.mark.parametrize("extra", ["", "p = proctree.Popen(['true']); assert p.wait() == 0"], ids=["spawn", "popen"])
def test_spawn_immune_to_patched_popen(extra):
    out = run_script(PATCHED.format(extra=extra))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ok\n"


def test_spawn_immune_to_popen_swapped_later():
    # A patch made after proctree's first spawn: the keeper keeps using the genuine class.
    out = run_script(
        """
        import subprocess
        from unittest import mock
        import proctree
        proctree.spawn(["true"]).wait()
        with mock.patch("subprocess.Popen") as fake:
            assert proctree.spawn(["true"]).wait() == 0
            assert not fake.called
        print("ok")
        """
    )
    assert out.returncode == 0, out.stderr


def test_report_time():
    # A guard against the run_script helper itself hanging: it must be quick.
    t0 = time.monotonic()
    run_script("pass")
    assert time.monotonic() - t0 < 10


RESTORED = """
import os, subprocess, sys, time
import proctree
{warm}
saved = [os.dup(1), os.dup(2)]
os.close(1)
os.close(2)
{call}
os.dup2(saved[0], 1)  # the caller takes its streams back: whatever proctree held on 1 or 2 is gone
os.dup2(saved[1], 2)
time.sleep(0.3)  # the watch closes what it held once the command has exited
os.write(1, b"still here\\n")
"""


@pytest.mark.parametrize(
    "call",
    [
        "p = proctree.Popen(['true'], stdout=subprocess.PIPE, stderr=subprocess.PIPE); p.communicate()",
        "t = proctree.spawn(['true'], stdout=subprocess.PIPE, stderr=subprocess.PIPE); t.wait()",
    ],
    ids=["popen", "spawn"],
)
@pytest.mark.parametrize("warm", ["", "proctree.spawn(['true']).wait()"], ids=["cold", "warm"])
def test_held_descriptors_stay_off_std_fds(call, warm):
    # The keeper watch's pidfd (and its wake pipe) landed on a closed fd 1 or 2; the caller's dup2 then
    # replaced it, and the watch closing "its" fd closed the caller's stdout (CPython's test_close_fds_1_2).
    out = run_script(RESTORED.format(call=call, warm=warm))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "still here\n"


FAKED_FOR_DROPINS = """
import asyncio
import subprocess
import sys
from unittest import mock
import proctree

# A mock in subprocess.Popen's place: the drop-in functions call it, as subprocess.run and asyncio's
# create_subprocess_exec would (a test suite's usual way to fake or fail process creation).
with mock.patch("subprocess.Popen") as fake:
    fake.side_effect = ZeroDivisionError
    for call in (proctree.run, proctree.call, proctree.check_call, proctree.check_output):
        try:
            call(["true"])
        except ZeroDivisionError:
            pass
        else:
            raise AssertionError(call)
    for start in (lambda: proctree.create_subprocess_exec("true"), lambda: proctree.create_subprocess_shell("true")):
        try:
            asyncio.run(start())
        except ZeroDivisionError:
            pass
        else:
            raise AssertionError(start)
    assert fake.call_count == 6, fake.call_count
    # proctree.Popen and spawn() never look at the name.
    assert proctree.Popen(["true"]).wait() == 0
    assert proctree.spawn(["true"]).wait() == 0
    assert fake.call_count == 6

# A class in its place, a plain subclass of the genuine Popen: the drop-ins still contain (proctree.Popen)...
class Plain(subprocess.Popen):
    pass

with mock.patch("subprocess.Popen", Plain):
    done = proctree.run(["true"])
    assert type(done) is subprocess.CompletedProcess, (type(done), subprocess.CompletedProcess)
    try:
        proctree.check_call(["false"])
    except subprocess.CalledProcessError:
        pass  # subprocess's own exception, though proctree.Popen was first built under a mock
    async def started():
        proc = await proctree.create_subprocess_exec("true")
        made = type(proc._transport._proc)
        await proc.wait()
        return made
    assert asyncio.run(started()) is proctree.Popen

# ...and a subclass of proctree.Popen is used as it is.
class Ours(proctree.Popen):
    made = 0
    def __init__(self, *args, **kwargs):
        Ours.made += 1
        super().__init__(*args, **kwargs)

with mock.patch("subprocess.Popen", Ours):
    assert proctree.check_output(["echo", "hi"]) == b"hi\\n"
    assert asyncio.run(started()) is Ours
    assert Ours.made == 2, Ours.made
print("ok")
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0,
    reason="proctree.Popen's cgroup containment (root, Linux)",
)
def test_dropin_functions_call_what_a_test_put_in_popens_place():
    out = run_script(FAKED_FOR_DROPINS)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ok\n"


INTERRUPTED_START = """
import os, subprocess, threading
import proctree
from proctree._containment import popenhold
from proctree._containment.cgrouppool import made_ahead  # empty cgroups ready for the next start

proctree.Popen(["true"]).wait()  # the holding tree exists first
real_read = os.read

def interrupted(fd, n):
    if threading.current_thread() is not threading.main_thread():
        return real_read(fd, n)  # the keeper watch's thread, reading its wake-up pipe: not the start's read
    os.read = real_read
    {before}
    raise KeyboardInterrupt

os.read = interrupted  # the first read of the start: the step's report of the command's pid
try:
    proctree.Popen(["sleep", "30"])
except KeyboardInterrupt:
    pass
else:
    raise AssertionError("not interrupted")
holder = popenhold.holder()
children = [p for p in proctree.snapshot().values() if p.ppid == os.getpid() and p.pid != holder.keeper_pid]
assert not children, children  # the command neither runs on nor is left unreaped
left = [d for d in os.listdir(holder.cgroup) if d.startswith("cmd-") and not made_ahead(os.path.join(holder.cgroup, d))]
assert not left, left
print("ok")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="cgroup v2 (root, Linux)")
@pytest.mark.parametrize("before", ["real_read(fd, n)", "pass"], ids=["after-the-pid", "before-the-pid"])
def test_an_interrupted_start_leaves_nothing(before):
    out = run_script(INTERRUPTED_START.format(before=before))
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ok\n"


WATCH_THREAD_REFUSED = """
import subprocess, threading
import proctree

real_start = threading.Thread.start

def refused(self):
    if self.name == "proctree-keeper-watch":
        threading.Thread.start = real_start  # once: a thread or memory limit that passes
        raise RuntimeError("can't start new thread")
    real_start(self)

threading.Thread.start = refused
assert proctree.Popen(["true"]).wait() == 0  # the start itself is unharmed
# A later command leaves a daemon holding its stdout: communicate() returns only if the daemon is ended,
# which takes the watch (nothing reaps the command before its pipe closes).
p = proctree.Popen(["sh", "-c", "sleep 30 & echo hi"], stdout=subprocess.PIPE)
out, _ = p.communicate(timeout=20)
assert out == b"hi\\n", out
print("ok")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="cgroup v2 (root, Linux)")
def test_a_watch_thread_that_could_not_start_is_started_at_the_next_start():
    out = run_script(WATCH_THREAD_REFUSED)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ok\n"
    assert "could not start its watch thread" in out.stderr


INTERRUPT_STORM = """
import os, signal, time
import proctree
from proctree._containment import popenhold
from proctree._containment.cgrouppool import made_ahead  # empty cgroups ready for the next start

proctree.Popen(["true"]).wait()
holder = popenhold.holder()

def interrupt(signum, frame):
    raise KeyboardInterrupt

signal.signal(signal.SIGALRM, interrupt)
interrupted = 0
for i in range(150):
    try:  # the timer is set inside: on a busy machine it can fire before the next line
        signal.setitimer(signal.ITIMER_REAL, 0.0005 + (i % 7) * 0.0003)
        p = proctree.Popen(["true"])
        signal.setitimer(signal.ITIMER_REAL, 0)
        p.wait()
    except KeyboardInterrupt:
        interrupted += 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
signal.signal(signal.SIGALRM, signal.SIG_DFL)
deadline = time.monotonic() + 5
while time.monotonic() < deadline:
    mine = [q for q in proctree.snapshot().values() if q.ppid == os.getpid() and q.pid != holder.keeper_pid]
    steps = [q for q in mine if q.name == "proctree-enter"]
    left = [d for d in os.listdir(holder.cgroup) if d.startswith("cmd-") and not made_ahead(os.path.join(holder.cgroup, d))]
    if not steps and not left:
        break
    time.sleep(0.1)
assert not steps, steps  # an interrupted start never leaves its exec step unreaped
assert not left, left  # nor its command's cgroup
print("ok", interrupted)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="cgroup v2 (root, Linux)")
def test_interrupts_at_every_moment_of_a_start_leave_no_step_and_no_cgroup():
    out = run_script(INTERRUPT_STORM, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    word, interrupted = out.stdout.split()
    assert word == "ok" and int(interrupted) > 0, out.stdout


NO_DESCRIPTORS = """
import os, resource
import proctree
from proctree._containment import cgroup

mount = cgroup.base_dir()
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
held = []
while True:  # every descriptor but {free}
    try:
        held.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        break
for fd in held[-{free}:]:
    os.close(fd)
held = held[:-{free}]
try:
    proctree.Popen(["true"]).wait()
    failed = None
except OSError as exc:
    failed = exc
for fd in held:
    os.close(fd)
mine = [d for d in os.listdir(mount) if d.startswith(f"proctree-{{os.getpid()}}-")]
left = [os.path.join(d, c) for d in mine for c in os.listdir(os.path.join(mount, d)) if c.startswith(("popen-", "tree-"))]
if failed is not None:
    assert not left, (failed, left)  # a holding tree that could not start leaves no cgroup behind
assert proctree.Popen(["true"]).wait() == 0  # and the next start works
print("ok" if failed is not None else "started")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="cgroup v2 (root, Linux)")
@pytest.mark.parametrize("free", [2, 3, 4, 5, 6])
def test_a_first_start_without_descriptors_leaves_no_cgroup(free):
    out = run_script(NO_DESCRIPTORS.replace("{free}", str(free)).replace("{{", "{").replace("}}", "}"))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout in ("ok\n", "started\n")


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="cgroup v2 (root, Linux)")
def test_output_held_by_a_leftover_ends_when_the_command_does():
    # check_output reads to the pipe's end, which a daemon holding it brings only once it is ended: the command's
    # exit is seen at once (the watch's epoll), not at the watch's next look half a second later.
    started = time.monotonic()
    for _ in range(5):
        assert proctree.check_output(["sh", "-c", "sleep 30 & echo hi"], timeout=20) == b"hi\n"
    assert time.monotonic() - started < 2.0  # 2.5 s and more when each waited for the look
