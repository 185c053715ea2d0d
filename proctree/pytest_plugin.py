"""proctree's pytest plugin: every process a test leaks is named, blamed on its test or fixture, and ended.

Shipped in the wheel and registered through the ``pytest11`` entry point, it
does nothing until enabled: ``--proctree-leaks=fail|warn|kill`` (or the ini
option ``proctree_leaks``), or a ``@pytest.mark.proctree(leaks=...)`` on a
test. Enabled, the pytest process contains itself (proctree.contain_self):
every process started from then on carries the run's marker, orphans come
back to pytest (a child subreaper, Linux), and a native watchdog ends them all
if pytest dies (SIGKILL, a timeout's os._exit, the OOM killer).

Around each test (setup, call, teardown) the plugin compares the members
before and after; what the test left running is reported with pid, name,
command line, age and the test's node id, ended, and the test fails (an error
at teardown), warns, or only has it ended. Helpers (proctree.Popen's holder,
multiprocessing's, xdist's workers) are never counted; a process a live object
still holds is checked once nothing holds it; processes born of a fixture's
processes are the fixture's, checked when it is finalized. The parts live in
proctree/_plugin/ (one job per module); this module is the entry point.

A layer-6 face, like the CLI: the public API (and proctree.Popen's holder).

Must never: signal a process this run did not start (the members are the
run's own descendants or carriers of its tree id, each ended by identity).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import proctree
from proctree._errors import ProcessLeakWarning
from proctree._plugin import settings as _settings

MODES = _settings.MODES
__all__ = ["MODES", "ProcessLeakWarning", "proctree_spawn"]


def pytest_addoption(parser: pytest.Parser) -> None:
    _settings.add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Before any conftest loads: hand an enabled run to a pytest below the run's subreaper (pytest then
    adopts no orphan a test leaves; proctree/_plugin/handoff.py). Returns when the run stays here."""
    from proctree._plugin.handoff import hand_off

    hand_off(early_config)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "proctree(leaks='fail'|'warn'|'kill'|'off'): the leak check's mode for this test, over --proctree-leaks",
    )
    from proctree._plugin.guard import Guard  # the checks load only once pytest runs with the plugin

    config.pluginmanager.register(Guard(config, _settings.read(config)), "proctree-leaks")


@pytest.fixture
def proctree_spawn(request: pytest.FixtureRequest) -> Iterator[Callable[..., proctree.Tree]]:
    """spawn(args, **kwargs) -> a contained proctree.Tree, ended (with what it started) at the test's teardown."""
    made: list[proctree.Tree] = []

    def spawn(args: Any, **kwargs: Any) -> proctree.Tree:
        tree = proctree.spawn(args, **kwargs)
        made.append(tree)
        return tree

    yield spawn
    for tree in made:
        try:
            tree.terminate()
        finally:
            for f in (tree.stdin, tree.stdout, tree.stderr):
                if f is not None:
                    f.close()
