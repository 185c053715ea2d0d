"""Who a process belongs to by its ancestry, remembered in the environment it inherited.

While a fixture's setup runs, pytest's environment carries PROCTREE_PYTEST_FIXTURE naming it (removed again
as the setup returns: a test never sees it). Every process the setup starts inherits it, and so does
everything those processes start later, after any number of forks, a setsid or a double fork that leaves
no parent link to follow: a server a module fixture started that forks a detached worker while serving a
test still names its fixture. Read only for a process that would otherwise be blamed on a test.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import proctree

ENV = "PROCTREE_PYTEST_FIXTURE"


@contextlib.contextmanager
def tagged(tag: str) -> Iterator[None]:
    """pytest's environment names the fixture tag while the block runs (nested setups restore the outer tag)."""
    before = os.environ.get(ENV)
    os.environ[ENV] = tag
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before


def clear_stale() -> None:
    """Remove a tag left outside any fixture's setup (a fixture that saved os.environ during its setup and
    restored it whole at teardown put it back): a test's processes must not carry a fixture's name."""
    if ENV in os.environ:
        del os.environ[ENV]


def tag_of(pid: int) -> str | None:
    """The fixture tag a process inherited, or None (started by a test, scrubbed, or unreadable)."""
    try:
        return proctree.environ(pid).get(ENV)
    except (proctree.Error, OSError):
        return None
