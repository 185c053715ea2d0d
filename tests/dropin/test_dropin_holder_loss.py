"""proctree.Popen's holding tree lost to SIGKILL (its hold, or its keeper): the next start never uses it, and it is
ended whole, hold included, whatever the next start does.

Each iteration is a fresh owner process (a script run here), as a user's program would be; everything it reports
(the holding keepers, their hold processes, its commands) is pinned by pid and start time, and whatever of it is
still alive when the test ends is SIGKILLed by this test, never by name.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

import proctree
from proctree._table import binding

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0, reason="cgroup v2 containment (root, Linux)"
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
ROUNDS = 20

# Prints "ID pid:start" for every process it knows, so that the test can end them all by identity.
PRELUDE = (
    "import os, time, proctree\n"
    "from proctree._containment import popenhold\n"
    "from proctree._table import binding\n"
    "def ident(pid):\n"
    "    try:\n"
    "        print('ID', f'{pid}:{binding.proc(pid).start_time}', flush=True)\n"
    "    except proctree.NoSuchProcess:\n"
    "        pass\n"
    "p = proctree.Popen(['sleep', '30'])\n"
    "ident(p.pid)\n"
    "keeper = [c for c in proctree.children(os.getpid()) if c.pid != p.pid][0]\n"
    "hold = proctree.children(keeper.pid)[0]\n"
    "ident(keeper.pid)\n"
    "ident(hold.pid)\n"
    "print('HOLD', f'{hold.pid}:{binding.proc(hold.pid).start_time}', flush=True)\n"
)

# Repro 1: hold SIGKILLed, then a start within microseconds. It used to land in the dying holding cgroup and be
# ended by the old keeper (-15 instead of 7).
HOLD_KILLED = PRELUDE + (
    "os.kill(hold.pid, 9)\n"
    "p.wait()\n"
    "q = proctree.Popen(['sh', '-c', 'sleep 1; exit 7'])\n"
    "ident(q.pid)\n"
    "for pid in popenhold.held_pids():\n"
    "    ident(pid)\n"
    "print('RC', q.wait(), flush=True)\n"
)

# Repro 2: the keeper SIGKILLed, a start at once, then the owner exits normally. The old hold (which blocks every
# signal but SIGKILL) used to stay forever, reparented to init.
KEEPER_KILLED = PRELUDE + (
    "os.kill(keeper.pid, 9)\n"
    "q = proctree.Popen(['true'])\n"
    "ident(q.pid)\n"
    "for pid in popenhold.held_pids():\n"
    "    ident(pid)\n"
    "print('RC', q.wait(), flush=True)\n"
)


def _alive(ident: str) -> bool:
    pid, start = ident.split(":")
    try:
        proc = binding.proc(int(pid))
    except Exception:  # noqa: BLE001 - gone
        return False
    # A zombie has ended (reparented to init, it is reaped whenever init gets to it).
    return str(proc.start_time) == start and not proc.is_zombie


@pytest.fixture
def reported():
    """Every process identity the owners reported; SIGKILLed at the end if still alive (pid and start time)."""
    seen: list[str] = []
    yield seen
    for ident in seen:
        if _alive(ident):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(ident.split(":")[0]), signal.SIGKILL)
    deadline = time.monotonic() + 5
    while any(_alive(i) for i in seen) and time.monotonic() < deadline:
        time.sleep(0.02)


def _owner(code: str, reported: list[str]) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    fields: dict[str, str] = {}
    for line in out.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key == "ID":
            reported.append(value)
        else:
            fields[key] = value
    assert out.returncode == 0, out.stderr
    return fields


def _gone_within(ident: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(ident):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_start_right_after_holds_sigkill_runs_in_a_new_holding_tree(reported):
    codes = [_owner(HOLD_KILLED, reported)["RC"] for _ in range(ROUNDS)]
    assert codes == ["7"] * ROUNDS


def test_a_keeper_sigkilled_then_a_start_then_a_normal_exit_leaves_no_hold(reported):
    codes, left = [], []
    for _ in range(ROUNDS):
        fields = _owner(KEEPER_KILLED, reported)
        codes.append(fields["RC"])
        # Well within the grace (2 s) a polite end would take: hold takes no signal but SIGKILL.
        if not _gone_within(fields["HOLD"], 1.0):
            left.append(fields["HOLD"])
    assert left == []
    # A start that raced the keeper's death (killed, not exited yet) lands in the old tree and is ended with it,
    # politely or by the lost tree's SIGKILL (its cgroup.kill at the owner's exit): what it reports is still its
    # command's own status, never one made up.
    assert set(codes) <= {"0", str(-signal.SIGTERM), str(-signal.SIGKILL)}, codes


def test_the_old_holding_trees_command_ends_with_it(reported):
    # Fail-closed: the command that ran in the lost holding tree (sleep 30) is ended with it, either way it was lost.
    for code in (HOLD_KILLED, KEEPER_KILLED):
        before = len(reported)
        _owner(code, reported)
        first_command = reported[before]
        assert _gone_within(first_command, 5.0)
