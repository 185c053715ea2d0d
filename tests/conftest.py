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


def pytest_collection_finish(session):
    # The Pythons the tests start (`python -c`, `python -m proctree`) put their
    # working directory first on sys.path too: start them outside the checkout.
    # (Here, not at import or session start: pytest, and each xdist worker,
    # resolve the paths to collect against the cwd first.)
    if _RUN_OUTSIDE_CHECKOUT:
        run_dir = tempfile.mkdtemp(prefix="proctree-tests-")
        os.chdir(run_dir)
        atexit.register(shutil.rmtree, run_dir, True)


def pytest_sessionstart(session):
    global _CGROUPS_BEFORE
    _CGROUPS_BEFORE = _owner_cgroups()


# Tests that kill an owner together with its keeper (or the init's two processes at once, or a pid namespace
# whole: unshare --kill-child) leave that owner's per-owner cgroup (proctree-<pid>-<start>-...) behind, as
# documented: nothing of the tree outlives them to remove it, and `proctree reap` would (not for owner 1 of
# another namespace, which no reaper here can attribute). The suite removes the empty ones it made, at its end
# (rmdir takes only an empty cgroup; not in an xdist worker, whose siblings still run).
_CGROUPS_BEFORE = (None, set())


def _owner_cgroups():
    try:
        from proctree._containment import cgroup

        base = cgroup.base_dir()
        return base, {d for d in os.listdir(base) if d.startswith("proctree-")}
    except Exception:  # noqa: BLE001 - no cgroup v2 here, or none of ours: nothing to sweep
        return None, set()


def _owner_gone(name, live_namespaces):
    """(True if the owner named by proctree-<pid>-<start>[-<pid ns>-<time ns>] is gone, the live pid namespaces).

    In our pid namespace: its pid is free or another process's. In another: no process lives in that namespace
    any more (a killed namespace's PID 1 owner). Anything unreadable counts as alive.
    """
    from proctree import AccessDenied, NoSuchProcess, proc

    parts = name.split("-")
    try:
        pid, start = int(parts[1]), int(parts[2])
        pidns = int(parts[3]) if len(parts) == 5 else None
        mine = os.stat("/proc/self/ns/pid").st_ino
    except (IndexError, ValueError, OSError):
        return False, live_namespaces
    if pidns is None or pidns == mine:
        try:
            return proc(pid).start_time != start, live_namespaces
        except NoSuchProcess:
            return True, live_namespaces
        except (AccessDenied, OSError, ValueError):
            return False, live_namespaces
    if live_namespaces is None:
        live_namespaces = set()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    live_namespaces.add(os.stat(f"/proc/{entry}/ns/pid").st_ino)
                except FileNotFoundError:
                    continue
                except OSError:  # unreadable: it may be that namespace's, but pid 1 here is our namespace's own
                    live_namespaces.add(mine if entry == "1" else pidns)
    return pidns not in live_namespaces, live_namespaces


def pytest_sessionfinish(session, exitstatus):
    base, before = _CGROUPS_BEFORE
    if base is None or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    _, now = _owner_cgroups()
    live_namespaces = None
    for name in now - before:
        # Only an owner that is provably gone: another run on the machine (or a program of the user's) owns
        # the rest, and its empty command cgroups, made ahead of need, are in use.
        gone, live_namespaces = _owner_gone(name, live_namespaces)
        if not gone:
            continue
        for top, dirs, _ in os.walk(os.path.join(base, name), topdown=False):
            for d in dirs:
                try:
                    os.rmdir(os.path.join(top, d))
                except OSError:
                    pass
        try:
            os.rmdir(os.path.join(base, name))
        except OSError:
            pass


def _proctree_plugin_by_entry_point():
    import importlib.metadata

    return any(ep.value == "proctree.pytest_plugin" for ep in importlib.metadata.entry_points(group="pytest11"))


# The shared fixtures (tests/support/plugin.py), and proctree's own pytest plugin for the
# no-leftover check (configured in pyproject.toml), loaded here when proctree is not
# installed with its entry point (an in-place build).
pytest_plugins = ["support.plugin"] + ([] if _proctree_plugin_by_entry_point() else ["proctree.pytest_plugin"])


def pytest_make_parametrize_id(config, val, argname):
    # A value whose repr carries its address (`<object object at 0x...>`) gets its type's name: test ids must
    # be the same in every process that collects them (each xdist worker does).
    if " at 0x" in repr(val):
        return type(val).__name__
    return None
