"""The interfaces that the modules acting on a Tree type against, so that none of them needs tree.py.

- ModeFacts: what a containment mode reads of its tree (treeparts.TreeParts
  provides it): identities and launch facts, never the Tree.
- Mode: a containment mode, what modes.py's three objects answer.
- LosableTree: what keeperloss.py uses of a Tree whose keeper exited.
- WaitableTree: what asyncwait.py uses of a Tree that a loop waits for.

Types only: modes.py, keeperloss.py and asyncwait.py import this module
under TYPE_CHECKING, and nothing imports it at run time (typing costs a
first proctree.Popen import time), so its classes exist for type checkers
alone. tests/project/test_architecture.py checks that no circle of imports,
even a type-only one, runs through tree.py.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Protocol

    from .._table.model import Proc
    from .._teardown.report import TeardownReport
    from .stopflag import _Stop
    from .treeparts import TreeParts

    class ModeFacts(Protocol):
        """What a mode reads of its tree; the keeper is never signalled through it."""

        @property
        def keeper_pid(self) -> int: ...
        @property
        def keeper_start(self) -> int | None:
            """The keeper's start time: only what started after it can be a member."""

        @property
        def root(self) -> Proc | None:
            """The command's record, once the keeper reported it."""

        @property
        def tree_id(self) -> str: ...
        @property
        def mode(self) -> str: ...
        @property
        def cgroup(self) -> str | None: ...
        @property
        def keep_orphans(self) -> bool: ...
        @property
        def stopped(self) -> Mapping[tuple[int, int], int]:
            """(pid, start time) -> the stop signal a forward already sent it: no teardown sends another."""

        def keeper_is_ours(self) -> bool: ...

    class Mode(Protocol):
        """A containment mode: what a tree's members are, and how it is ended (see modes.py)."""

        name: str

        def members(self, facts: ModeFacts) -> dict[int, Proc]: ...
        def teardown(self, facts: ModeFacts, grace: float, stop: _Stop | None, sig: int) -> TeardownReport: ...
        def leftovers(self, facts: ModeFacts, grace: float, sig: int) -> TeardownReport: ...
        def marked_outsiders(self, facts: ModeFacts) -> list[Proc]: ...
        def may_have_leftovers(self, facts: ModeFacts) -> bool: ...

    class LosableTree(Protocol):
        """What keeperloss.py uses of a Tree: its parts, its grace and stop signal, and its one finish."""

        parts: TreeParts
        grace: float
        terminate_signal: int

        def _finish(self, clean: bool | None = None, release_fds: bool = True) -> None: ...

    class WaitableTree(Protocol):
        """What asyncwait.py uses of a Tree: its parts, its blocking wait() and what that wait needs to know."""

        parts: TreeParts
        args: Any
        grace: float
        keep_orphans: bool

        def wait(self, timeout: float | None = None) -> int: ...
