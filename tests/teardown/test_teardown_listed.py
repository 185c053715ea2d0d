"""The ladder over listed members (a cgroup's), table-driven, on a simulated listing.

listed._ListedTeardown is driven here in a fake ListedWorld: a table of
members with a behaviour on SIGTERM, a listing that may show some as hidden
(cgroup.procs says 0), a kill_all that may fail, and a fake clock. Nothing
real is started or signalled. Each case checks which signals went to whom,
in what order, and what the report says.
"""

import signal

import pytest

from proctree import NoSuchProcess, Proc
from proctree._teardown import signals as real_signals
from proctree._teardown.listed import _ListedTeardown
from proctree._teardown.requests import _Call

ME = 60  # the caller
KEEPER = 90


def P(pid, state="S"):
    return Proc(pid, KEEPER, 100, 100, 0, state, pid, f"p{pid}")


class Target:
    def __init__(self, proc):
        self.proc = proc
        self.pidfd = None

    def close(self):
        pass


class Waiter:
    def __init__(self, world):
        self.w = world
        self.targets = []

    def watch(self, t):
        if self.w.ended(t.proc.pid):
            return False
        self.targets.append(t)
        return True

    def ready(self):
        done = [t for t in self.targets if self.w.ended(t.proc.pid)]
        self.targets = [t for t in self.targets if t not in done]
        return done

    def fileno(self):
        return None

    def poll_interval(self):
        return 0.01 if self.targets else None

    def close(self):
        pass


class ListedWorld:
    """A cgroup's members (pid -> what SIGTERM does: "die" or "ignore"), a log of every signal, a clock."""

    def __init__(self, members, hidden=0, kill_fails=False, zombies=(), join_at=None):
        self.procs = {pid: P(pid) for pid in members} | {pid: P(pid, "Z") for pid in zombies}
        self.on_term = dict(members)
        self.hidden = hidden
        self.kill_fails = kill_fails
        self.join_at = join_at  # (time, pid): a member that joins the cgroup then
        self.now = 0.0
        self.log = []  # (pid, signal name), and ("all", "KILL") for each kill_all

    def ended(self, pid):
        p = self.procs.get(pid)
        return p is None or p.is_zombie

    def listed(self):
        if self.join_at is not None and self.now >= self.join_at[0]:
            pid = self.join_at[1]
            self.procs[pid], self.on_term[pid], self.join_at = P(pid), "die", None
        return [pid for pid, p in self.procs.items()], self.hidden

    def hold(self, pid, guard, use_pidfd):
        assert guard.allows(pid), f"tried to hold protected {pid}"
        return None if self.ended(pid) else Target(self.procs[pid])

    def kill_all(self, use_pidfd):
        self.log.append(("all", "KILL"))
        if self.kill_fails:
            raise OSError("cgroup.kill refused")
        for pid in self.procs:
            self.procs[pid] = self.procs[pid]._replace(state="Z")

    def proc(self, pid):
        if pid not in self.procs:
            raise NoSuchProcess(pid)
        return self.procs[pid]

    def guard(self):
        return real_signals.Guard(me=ME, ancestors=[50, 1])

    def send(self, target, sig, guard):
        pid = target.proc.pid
        assert guard.allows(pid) and pid != KEEPER, f"tried to signal protected {pid}"
        name = signal.Signals(sig).name[3:]
        self.log.append((pid, name))
        if self.ended(pid):
            return real_signals.GONE
        if name == "KILL" or (name == "TERM" and self.on_term[pid] == "die"):
            self.procs[pid] = self.procs[pid]._replace(state="Z")
        return real_signals.SENT

    def make_waiter(self, use_pidfd):
        return Waiter(self)

    def monotonic(self):
        return self.now

    def pidfds_available(self):
        return False

    def fd_budget(self):
        return 0


def drive(world, grace=1.0, **kw):
    gen = _ListedTeardown(world, grace, spare=[KEEPER], **kw).steps()
    reply = None
    try:
        req = next(gen)
        for _ in range(10000):
            if isinstance(req, _Call):
                reply = req.fn()
            else:
                world.now += max(req.timeout, 0.001)
                reply = None
            req = gen.send(reply)
    except StopIteration as done:
        return done.value
    raise AssertionError("the ladder does not finish")


def pids(procs):
    return sorted(p.pid for p in procs)


def test_cooperative_members_hear_term_then_cont_once_and_no_kill():
    w = ListedWorld({101: "die", 102: "die", KEEPER: "ignore"})
    rep = drive(w)
    assert [e for e in w.log if e[0] != "all"] == [(101, "TERM"), (101, "CONT"), (102, "TERM"), (102, "CONT")]
    assert ("all", "KILL") not in w.log  # nothing was left to kill
    assert rep.root is None and rep.mode == "cgroup" and rep.ok
    assert pids(rep.found) == pids(rep.exited) == [101, 102] and not rep.killed
    assert rep.signals == {101: "SIGTERM", 102: "SIGTERM"}


def test_a_term_ignorer_is_killed_after_the_grace_by_kill_all_and_by_identity():
    w = ListedWorld({101: "ignore", KEEPER: "ignore"})
    rep = drive(w, grace=0.5)
    assert w.log[:2] == [(101, "TERM"), (101, "CONT")]
    kill_at = w.log.index(("all", "KILL"))
    assert w.log[kill_at + 1 :] == [(101, "KILL")]
    assert pids(rep.killed) == [101] and not rep.exited and rep.ok


def test_the_keeper_and_the_caller_are_never_members():
    w = ListedWorld({101: "ignore", KEEPER: "ignore", ME: "ignore"})
    rep = drive(w, grace=0.1)
    assert pids(rep.found) == [101]
    assert not [e for e in w.log if e[0] in (KEEPER, ME)]


def test_hidden_members_are_counted_and_reached_only_by_kill_all():
    w = ListedWorld({101: "ignore"}, hidden=2)
    rep = drive(w, grace=0.1)
    assert rep.extra == {"hidden": 2}
    assert {pid for pid, _ in w.log} == {101, "all"}  # pid 0 (hidden) is never signalled


@pytest.mark.parametrize("grace", [0, 0.0])
def test_no_grace_goes_straight_to_the_kill_with_the_members_read_first(grace):
    w = ListedWorld({101: "die", 102: "ignore"})
    rep = drive(w, grace=grace)
    assert not [e for e in w.log if e[1] in ("TERM", "CONT")]
    assert w.log[0] == ("all", "KILL")
    assert pids(rep.found) == pids(rep.killed) == [101, 102] and rep.signals == {}


def test_a_member_that_already_had_a_stop_signal_gets_no_second():
    w = ListedWorld({101: "ignore", 102: "die"})
    rep = drive(w, grace=0.2, already={(101, 101): signal.SIGINT})
    assert (101, "TERM") not in w.log and (101, "CONT") not in w.log
    assert rep.signals == {101: "SIGINT", 102: "SIGTERM"}


def test_a_failed_kill_all_still_kills_each_member_by_identity():
    w = ListedWorld({101: "ignore"}, kill_fails=True)
    rep = drive(w, grace=0.1)
    assert (101, "KILL") in w.log and rep.ok and pids(rep.killed) == [101]


def test_a_listed_zombie_is_a_member_that_exited_and_is_not_signalled():
    w = ListedWorld({101: "die"}, zombies=[103])
    rep = drive(w)
    assert pids(rep.found) == [101, 103] and pids(rep.exited) == [101, 103]
    assert not [e for e in w.log if e[0] == 103]


def test_a_late_joiner_during_the_grace_gets_the_same_signals():
    w = ListedWorld({101: "ignore"}, join_at=(0.05, 104))
    rep = drive(w, grace=1.0)
    assert w.log.index((104, "TERM")) < w.log.index((104, "CONT"))
    assert pids(rep.late) == [104] and 104 in rep.signals
