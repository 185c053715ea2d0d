"""The reaper's receipt path on real processes: where environments cannot be read.

A reaper running as another user (nobody) cannot read the environments of
root's processes, so the tree's PROCTREE_OWNER marker proves nothing to it;
the tree's receipt, in that user's receipt directory, leads it to the
processes still in the tree's session. Selection only, in a forked child
that dropped to uid 65534 (it sends no signal); the test then reaps as root,
scoped to the pids it started.
"""

import json
import os
import shutil
import sys
import tempfile

import pytest

import proctree
from proctree._containment.evidence import receipt as _receipt
from support.reapkit import orphaned_tree
from support.spawnkit import alive, wait_gone

NOBODY = 65534

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="another user's view, with Linux semantics"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to look as another user"),
]


def _as_nobody(fn):
    """fn() in a forked child running as uid/gid 65534; its JSON-ready result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            out = json.dumps({"ok": fn()}).encode()
        except BaseException as exc:  # report, never raise out of the fork
            out = json.dumps({"error": repr(exc)}).encode()
        os.write(w, out)
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    doc = json.loads(data)
    assert "error" not in doc, doc["error"]
    return doc["ok"]


@pytest.fixture
def nobody_receipts():
    d = tempfile.mkdtemp(prefix="proctree-nobody-receipts-")
    os.chown(d, NOBODY, NOBODY)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_receipt_never_leads_to_another_users_processes(started, pipe, nobody_receipts):
    pids = orphaned_tree("session", started, pipe)
    members = {pids["cmd"], pids["scrubbed"], pids["daemon"]}
    # The owner wrote the tree's receipt into the run's receipt directory (root's). A copy of it
    # in nobody's own directory names root's session: nobody's reaper must not take root's
    # processes through it (it could not have signalled them, and cannot read their environments).
    found, problems = _receipt.read_all()
    (mine,) = [r for r in found if r.keeper[0] == pids["keeper"]]
    copy = os.path.join(nobody_receipts, os.path.basename(mine.path))
    shutil.copyfile(mine.path, copy)
    os.chown(copy, NOBODY, NOBODY)
    os.chmod(copy, 0o600)

    def look():
        os.environ["PROCTREE_RECEIPTS_DIR"] = nobody_receipts
        try:
            proctree.environ(pids["cmd"])
        except proctree.AccessDenied:
            pass
        else:
            raise AssertionError("nobody could read root's environment: this test needs it unreadable")
        return [[o.proc.pid, o.reason, o.via] for o in proctree.find_orphans(within=members)]

    assert _as_nobody(look) == []
    # Root reads the markers: the whole tree, and the reap removes the receipt.
    report = proctree.reap_orphans(within=members, grace=0.5)
    assert report.ok and {o.proc.pid for o in report.candidates} == members
    assert wait_gone(members, 5)
    assert not any(alive(p) for p in members)
