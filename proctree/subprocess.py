"""proctree.subprocess: the subprocess module with every command contained; `from proctree import subprocess`.

Every name of subprocess.__all__ is here. Popen, run, call, check_call,
check_output, getoutput and getstatusoutput are proctree's (each command's
whole tree contained, as proctree.Popen contains it); the constants and
exceptions are subprocess's own objects, so `except subprocess.CalledProcessError`
catches what either module raises. Any other attribute (list2cmdline, the
private flags) is read from the standard module. Type checkers see it all as
typeshed types subprocess (_containment/dropintypes.pyi), plus proctree's
keywords.

Must never patch the standard subprocess module: it only names things.
"""

import subprocess as _standard
from subprocess import (
    DEVNULL,
    PIPE,
    STDOUT,
    CalledProcessError,
    CompletedProcess,
    SubprocessError,
    TimeoutExpired,
)
from subprocess import list2cmdline as list2cmdline  # not in subprocess.__all__ either, but part of its face

from ._containment.dropintypes import Popen, call, check_call, check_output, getoutput, getstatusoutput, run

__all__ = [
    "Popen",
    "PIPE",
    "STDOUT",
    "call",
    "check_call",
    "getstatusoutput",
    "getoutput",
    "check_output",
    "run",
    "CalledProcessError",
    "DEVNULL",
    "SubprocessError",
    "TimeoutExpired",
    "CompletedProcess",
]

TYPE_CHECKING = False  # type checkers take this as True: they see only the names above, so a typo is an error
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        if name.startswith("__"):  # module machinery (__path__, ...) is this module's own business
            raise AttributeError(f"module 'proctree.subprocess' has no attribute {name!r}")
        return getattr(_standard, name)
