"""What a Tree reads about its members' usage: Tree.usage(), kept apart so a start never loads the facts.

Must never: signal anything, or load the facts' modules before usage() is called (proctree.Popen's first
start imports the Tree class and pays for every import it makes).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from .._table.model import Proc
    from .._table.usage import Usage


class MembersUsage:
    """Tree's usage(), over the members() Tree defines."""

    __slots__ = ()

    def members(self) -> list[Proc]:
        raise NotImplementedError  # Tree's

    def usage(self) -> Usage:
        """The live members' summed usage now: a Usage(processes, rss, vms, cpu_user, cpu_system).

        The members are members()'s, the list a teardown would start from (proctree's keeper is not one),
        read as proctree.usage() reads them: one that exits during the read is left out, never raised.
        Linux only for now: OSError (ENOSYS) elsewhere.
        """
        from .._table import usage as _usage

        return _usage.usage_of(self.members())
