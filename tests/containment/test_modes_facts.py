"""The containment modes on the facts alone (interfaces.ModeFacts), with no Tree and no keeper program.

A mode is fed what it needs of its tree; here those facts are written by
hand: synthetic ones for the answers that need no process, and a real
"keeper" (a shell we start as a session leader, with a child of its own)
for the ones that read and end processes.
"""

import secrets
import signal
import subprocess
import sys

import pytest

import proctree
from proctree._containment import modes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the modes' facts are Linux's here")


class Facts:
    """ModeFacts written by hand."""

    def __init__(self, keeper_pid, keeper_start=None, ours=True, root=None, keep_orphans=False, cgroup=None):
        self.keeper_pid = keeper_pid
        self.keeper_start = keeper_start
        self.root = root
        self.tree_id = f"facts-{secrets.token_hex(8)}"  # carried by no process
        self.mode = "session"
        self.cgroup = cgroup
        self.keep_orphans = keep_orphans
        self.stopped = {}
        self._ours = ours

    def keeper_is_ours(self):
        return self._ours


NOBODY = 2**22 + 12345  # above every pid_max: no process has it


@pytest.mark.parametrize(
    ("mode", "facts", "members", "outsiders", "leftovers"),
    [
        # A subreaper's members are all in the keeper's line: nothing beyond it to find.
        ("subreaper", Facts(NOBODY, keeper_start=1), {}, [], False),
        # A keeper no longer ours: its pid may be another's, so a session mode looks nowhere.
        ("session", Facts(NOBODY, keeper_start=1, ours=False), {}, [], False),
        # No keeper start time known: "started after the keeper" means nothing, so no marker sweep.
        ("session", Facts(NOBODY), {}, [], False),
        # keep_orphans without a start time: nothing to look for either.
        ("session", Facts(NOBODY, keep_orphans=True), {}, [], False),
    ],
)
def test_a_mode_answers_from_the_facts_it_is_given(mode, facts, members, outsiders, leftovers):
    m = modes.MODES[mode]
    assert m.name == mode
    assert m.members(facts) == members
    assert m.marked_outsiders(facts) == outsiders
    assert m.may_have_leftovers(facts) is leftovers


@pytest.fixture
def session_keeper():
    """A shell that leads its own session (as a keeper does) with one child: (shell Popen, child pid)."""
    sh = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        child = int(sh.stdout.readline())
        yield sh, child
    finally:
        if sh.poll() is None:  # still our unreaped child: its pid is its own
            proctree.terminate_tree(sh.pid, grace=0.5)  # by identity: the shell and what it started
        sh.wait()
        sh.stdout.close()


def test_a_session_mode_finds_the_keepers_session_from_the_facts(session_keeper):
    sh, child = session_keeper
    facts = Facts(sh.pid, keeper_start=proctree.proc(sh.pid).start_time)
    found = modes.MODES["session"].members(facts)
    assert child in found and sh.pid not in found  # the keeper is never its own member
    assert modes.MODES["subreaper"].members(facts) == {}


def test_a_mode_ends_what_is_below_the_keeper_it_is_told_of_and_spares_the_keeper(session_keeper):
    sh, child = session_keeper
    facts = Facts(sh.pid, keeper_start=proctree.proc(sh.pid).start_time)
    report = modes.MODES["subreaper"].teardown(facts, 2.0, None, signal.SIGTERM)
    assert [p.pid for p in report.found] == [child]
    assert report.ok
    assert sh.wait(timeout=10) == 0  # its child gone, the shell's wait returned: nobody signalled it
