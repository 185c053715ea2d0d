"""The test suite's shared fixtures.

Loaded by tests/conftest.py (pytest_plugins). That no test leaves a process
behind is checked by proctree's own pytest plugin (proctree.pytest_plugin,
enabled in pyproject.toml: proctree_leaks = "fail"), which fails the test,
names what it left and ends it. Every process a test starts also inherits
PROCTREE_TEST_RUN=<nonce>, which some tests look for. The trees the run
spawns write their receipts into a directory of the run's own
(PROCTREE_RECEIPTS_DIR), never into the user's.
"""

import atexit
import os
import secrets
import shutil
import tempfile

import pytest

from . import leakcheck
from .reapkit import started  # noqa: F401  (a fixture)
from .spawner import Spawner
from .treekit import kit  # noqa: F401  (a fixture)

NONCE = f"{os.getpid()}-{secrets.token_hex(6)}"
os.environ[leakcheck.MARKER] = NONCE
RECEIPTS = tempfile.mkdtemp(prefix="proctree-test-receipts-")  # 0700, ours
os.environ["PROCTREE_RECEIPTS_DIR"] = RECEIPTS
atexit.register(shutil.rmtree, RECEIPTS, True)


def _reap_own_zombies():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


@pytest.fixture(autouse=True)
def reap_own_zombies():
    """Reap the zombie children a test left (its unwaited Popens): the next test starts with none."""
    yield
    _reap_own_zombies()


@pytest.fixture
def spawn():
    s = Spawner()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def trees():
    """Trees a test spawns; each is torn down afterwards, whatever happened."""
    made = []
    yield made
    for t in made:
        try:
            t.terminate(grace=0.5)
        except Exception:
            pass
        for f in (t.stdin, t.stdout, t.stderr):  # as with Popen, the pipes are the caller's to close
            if f is not None:
                f.close()


@pytest.fixture
def pipe():
    """(read fd, write fd) of a pipe; whichever end the test did not close is closed afterwards.

    A test often closes the write end itself; closing that number again
    could close whatever reused it (another thread's fd), so an end is closed
    only while the number still names this pipe.
    """
    r, w = os.pipe()
    ino = os.fstat(r).st_ino
    yield r, w
    for fd in (r, w):
        try:
            if os.fstat(fd).st_ino == ino:
                os.close(fd)
        except OSError:
            pass
