"""Shared fixtures: every test must leave no process behind."""

import atexit
import glob
import os
import shutil
import signal
import sys
import tempfile

# Under nohup, or as a shell's background job, the suite starts with SIGHUP or
# SIGINT ignored, and every process it starts inherits that: the tests of
# Ctrl-C and hang-up would fail for want of a signal. Give them back.
for _sig in (signal.SIGHUP, signal.SIGQUIT):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, signal.SIG_DFL)
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# `python -m pytest` puts the checkout first on sys.path, and the checkout's
# proctree/ has no compiled core unless it was built in place: test the
# installed package then, not the bare sources.
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not glob.glob(os.path.join(_CHECKOUT, "proctree", "_core*.so")):
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _CHECKOUT]
    _RUN_OUTSIDE_CHECKOUT = True
    # pytest loads its plugins' entry points (proctree's own among them) before this file, while the
    # checkout was still first on sys.path: forget the checkout's modules, import the installed
    # package, and point the already registered plugin at it.
    _plugin = sys.modules.get("proctree.pytest_plugin")
    for _name in [n for n in sys.modules if n == "proctree" or n.startswith("proctree.")]:
        _file = getattr(sys.modules[_name], "__file__", None) or ""
        if os.path.abspath(_file).startswith(os.path.join(_CHECKOUT, "proctree") + os.sep):
            del sys.modules[_name]
    import proctree as _installed

    if _plugin is not None:
        _plugin.proctree = _installed
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


def _proctree_plugin_by_entry_point():
    import importlib.metadata

    return any(ep.value == "proctree.pytest_plugin" for ep in importlib.metadata.entry_points(group="pytest11"))


# The shared fixtures (tests/support/plugin.py), and proctree's own pytest plugin for the
# no-leftover check (configured in pyproject.toml), loaded here when proctree is not
# installed with its entry point (an in-place build).
pytest_plugins = ["support.plugin"] + ([] if _proctree_plugin_by_entry_point() else ["proctree.pytest_plugin"])
