"""Shared fixtures: every test must leave no process behind."""
import atexit
import glob
import os
import secrets
import shutil
import sys
import tempfile
import time

import pytest

# `python -m pytest` puts the checkout first on sys.path, and the checkout's
# proctree/ has no compiled core unless it was built in place: test the
# installed package then, not the bare sources.
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not glob.glob(os.path.join(_CHECKOUT, "proctree", "_core*.so")):
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _CHECKOUT]
    _RUN_OUTSIDE_CHECKOUT = True
else:
    _RUN_OUTSIDE_CHECKOUT = False


def pytest_sessionstart(session):
    # The Pythons the tests start (`python -c`, `python -m proctree`) put their
    # working directory first on sys.path too: start them outside the checkout.
    # (Here, not at import: pytest resolves testpaths against the cwd first.)
    if _RUN_OUTSIDE_CHECKOUT:
        run_dir = tempfile.mkdtemp(prefix="proctree-tests-")
        os.chdir(run_dir)
        atexit.register(shutil.rmtree, run_dir, True)

import leakcheck  # noqa: E402

NONCE = f"{os.getpid()}-{secrets.token_hex(6)}"
os.environ[leakcheck.MARKER] = NONCE


def _reap_own_zombies():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


@pytest.fixture(autouse=True)
def no_leftover_processes(request):
    """Fail the test if a process it started (directly or not) outlives it."""
    yield
    deadline = time.monotonic() + 5.0
    left = leakcheck.leftovers(NONCE)
    while left and time.monotonic() < deadline:
        # Processes a test just killed may take a moment to exit or be reaped.
        time.sleep(0.02)
        _reap_own_zombies()
        left = leakcheck.leftovers(NONCE)
    if left:
        leakcheck.end(left)
        _reap_own_zombies()
        names = ", ".join(f"{p.pid} ({p.name})" for p in left)
        pytest.fail(f"test left processes behind: {names}", pytrace=False)
    _reap_own_zombies()
