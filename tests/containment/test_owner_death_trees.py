"""Owner SIGKILL with the adversarial trees of tests/support/treekit.py, contained, in every mode.

An owner process spawns one of treekit's trees (the same scripts, run as a
contained command) and relays every "role pid" line; the test records each
process by pid and start time, SIGKILLs the owner, and every member must be
gone soon after the tree's grace: TERM-ignorers, a stopped child, a forker
that starts forking on SIGTERM, a setsid grandchild, a double-forked daemon,
a job in its own group behind a shell. docs/benchmarks.md has the measured
times (the target is the grace + 0.5 s); this bound is loose, to catch hangs.
"""

import os
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import proctree
from support import treekit
from support.spawnkit import ALL_MODES, alive, wait_gone

GRACE = 0.5


class _Body(Exception):
    def __init__(self, body, extra_args):
        super().__init__()
        self.body, self.extra_args = body, extra_args


class _Capture(treekit.Kit):
    """A Kit whose builders hand back their script instead of starting it."""

    def start(self, body, *, new_session=True, extra_args=(), env=None, pass_fds=()):
        raise _Body(body, extra_args)


def script_of(builder, **kw):
    try:
        getattr(_Capture(), builder)(**kw)
    except _Body as b:
        return treekit._PROLOGUE + textwrap.dedent(b.body), [str(a) for a in b.extra_args]
    raise AssertionError(f"{builder} did not call start()")


OWNER = textwrap.dedent(r"""
    import os, sys, time
    sys.path.insert(0, sys.argv[1])
    import proctree
    out, mode, grace = int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    script, extra = sys.argv[5], sys.argv[6:]
    r, w = os.pipe()
    t = proctree.spawn([sys.executable, "-c", script, str(w), *extra], contain=mode, grace=grace, pass_fds=(w,))
    os.close(w)
    os.write(out, b"keeper %d\n" % t.keeper_pid)
    while True:
        data = os.read(r, 65536)
        if not data:
            break
        os.write(out, data)
        if b"ready" in data:
            break
    time.sleep(300)
""")

TREES = {
    "term_ignorer": {},
    "stopped": {},
    "setsid_descendant": {},
    "forker": {"limit": 100},
    "double_forked_daemon": {},
    "hup_ignorer_behind_shell": {},
}


def _read_until_ready(fd, timeout=30):
    reports, buf = [], b""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"the tree did not get ready; heard {reports}")
        data = os.read(fd, 65536)
        if not data:
            raise AssertionError(f"the owner closed its pipe; heard {reports}")
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            role, pid = line.decode().split()
            if role == "ready":
                return reports
            reports.append((role, int(pid)))


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("builder", sorted(TREES))
def test_owner_sigkill_ends_every_adversarial_tree(pipe, mode, builder):
    script, extra = script_of(builder, **TREES[builder])
    r, w = pipe
    root = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, root, str(w), mode, str(GRACE), script, *extra], pass_fds=(w,)
    )
    os.close(w)
    known = {}
    try:
        for _, pid in _read_until_ready(r):
            try:
                known[pid] = proctree.proc(pid).start_time
            except proctree.NoSuchProcess:
                pass
        members = [pid for pid in known]
        assert len(members) >= 2, known
        # What the tree holds besides the reporters (a forker's children, a shell's job's parent).
        snap = proctree.snapshot()
        keeper = next(iter(known))
        for p in snap.descendants(keeper) if keeper in snap else []:
            known.setdefault(p.pid, p.start_time)
        owner.kill()
        owner.wait()
        t0 = time.monotonic()
        gone = wait_gone(list(known), GRACE + 5)
        left = [pid for pid, st in known.items() if alive(pid, st)]
        assert gone and not left, f"{builder} in {mode}: left {left} after {time.monotonic() - t0:.2f} s"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        for pid, st in known.items():
            if alive(pid, st) and pid not in (0, 1, os.getpid()):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_keeper_waits_out_its_grace_after_the_owner_died_without_spinning():
    # The owner's pidfd stays readable once it has exited: a keeper that kept polling it spun at 100% CPU for the
    # whole grace (2 s for proctree.Popen's holding keeper, whose hold takes only SIGKILL) after every owner's exit.
    owner = subprocess.run(
        [
            sys.executable,
            "-c",
            "import proctree\n"
            "from proctree._containment import popenhold\n"
            "proctree.Popen(['true']).wait()\n"
            "print(popenhold.holder().keeper_pid, flush=True)\n",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert owner.returncode == 0, owner.stderr
    keeper = int(owner.stdout.split()[0])
    try:
        before = _cpu_seconds(keeper)
    except FileNotFoundError:
        pytest.skip("the keeper was gone already (a very slow machine's grace)")
    time.sleep(1.0)  # inside the 2 s grace: the keeper waits for hold, which takes only SIGKILL
    try:
        spent = _cpu_seconds(keeper) - before
    except FileNotFoundError:
        spent = 0.0
    assert spent < 0.3, f"the keeper used {spent:.2f} s of CPU in 1 s of its grace"
    assert wait_gone([keeper], 10)
