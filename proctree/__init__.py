"""proctree: stop a process and everything it started, and nothing else.

Public API (stable): Proc, Snapshot, snapshot(), proc(), children(),
descendants(), environ(), cmdline(); Facts, facts(), all_facts(), facts_of(), Usage, usage(); terminate_tree(), terminate_tree_async(),
TeardownReport; spawn(), spawn_async(), Tree, ContainmentUnavailable, KeeperLost;
the drop-ins Popen, run(), call(), check_call(), check_output(),
create_subprocess_exec(), create_subprocess_shell(), typed as typeshed types
subprocess's; subprocess's constants and exceptions (PIPE, STDOUT, DEVNULL,
CalledProcessError, CompletedProcess, SubprocessError, TimeoutExpired) and
the module proctree.subprocess, which stands in for subprocess whole;
find_orphans(), reap_orphans(), Orphan, ReapReport, Rule, DEFAULT_RULES;
Supervisor, SyncSupervisor, ServiceSpec, ServiceSnapshot, ServiceEvent, LogPage, ForegroundResult,
Backoff; load_procfile(), ProcfilePlan, ProcfileService (what `proctree up`
runs) and the module proctree.procfile (the rest of what `proctree up` does with a
Procfile: honcho's choice of files, .env reading, ServiceSpecs, foreman's exit rule); and the exceptions Error, NoSuchProcess, AccessDenied, SupervisorError,
UnknownServiceError, ProcfileError.

The teardown and containment layers (and asyncio, which they use) load on
first use, so `import proctree` stays cheap for code that only reads the table.

PYTEST_DONT_REWRITE: the package ships a pytest plugin (an entry point), so pytest marks it for assertion
rewriting; a program that imports proctree before pytest.main() would otherwise get a
PytestAssertRewriteWarning (an error under filterwarnings = error). Its asserts are not tests'.
"""

from __future__ import annotations

from . import _lazyimport
from ._errors import AccessDenied, Error, NoSuchProcess, ReceiptWarning
from ._table.model import Proc, Snapshot
from ._table.model import proc_list as _proc_list
from ._validate import check_pid as _check_pid

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from collections.abc import Iterable
    from subprocess import DEVNULL, PIPE, STDOUT, CalledProcessError, CompletedProcess, SubprocessError, TimeoutExpired
    from typing import Any

    from . import procfile, subprocess
    from ._containment.dropintypes import (  # typed as typeshed types subprocess and asyncio's
        Popen,
        call,
        check_call,
        check_output,
        create_subprocess_exec,
        create_subprocess_shell,
        run,
    )
    from ._containment.selfcontain import Containment, contain_self
    from ._containment.spawn import Tree, spawn, spawn_async
    from ._errors import ContainmentUnavailable, KeeperLost, ProcfileError, SupervisorError, UnknownServiceError
    from ._procfile.config import ProcfilePlan, ProcfileService, load_procfile
    from ._reaper.model import Orphan, ReapReport
    from ._reaper.reap import find_orphans, reap_orphans
    from ._reaper.rules import DEFAULT_RULES, Rule
    from ._supervisor.events import ServiceEvent
    from ._supervisor.foreground import ForegroundResult
    from ._supervisor.logring import LogPage
    from ._supervisor.restart import Backoff
    from ._supervisor.snapshot import ServiceSnapshot
    from ._supervisor.spec import ServiceSpec
    from ._supervisor.supervisor import Supervisor
    from ._supervisor.syncface import SyncSupervisor
    from ._table.facts import Facts
    from ._table.usage import Usage
    from ._teardown.engine import terminate_tree, terminate_tree_async
    from ._teardown.report import TeardownReport
del TYPE_CHECKING  # the public namespace holds the public API only


# name -> the module that defines it, imported when the name is first used.
_LAZY = {
    "TeardownReport": "._teardown.report",
    "terminate_tree": "._teardown.engine",
    "terminate_tree_async": "._teardown.engine",
    "ContainmentUnavailable": "._errors",
    "KeeperLost": "._errors",
    "Tree": "._containment.spawn",
    "spawn": "._containment.spawn",
    "spawn_async": "._containment.spawn",
    "Orphan": "._reaper.model",
    "ReapReport": "._reaper.model",
    "find_orphans": "._reaper.reap",
    "reap_orphans": "._reaper.reap",
    "contain_self": "._containment.selfcontain",
    "Popen": "._containment.popen",
    "create_subprocess_exec": "._containment.asyncpopen",
    "create_subprocess_shell": "._containment.asyncpopen",
    "run": "._containment.popen",
    "call": "._containment.popen",
    "check_call": "._containment.popen",
    "check_output": "._containment.popen",
    "Containment": "._containment.selfcontain",
    "Rule": "._reaper.rules",
    "DEFAULT_RULES": "._reaper.rules",
    "Supervisor": "._supervisor.supervisor",
    "SyncSupervisor": "._supervisor.syncface",
    "ServiceSpec": "._supervisor.spec",
    "ServiceSnapshot": "._supervisor.snapshot",
    "ServiceEvent": "._supervisor.events",
    "LogPage": "._supervisor.logring",
    "ForegroundResult": "._supervisor.foreground",
    "Backoff": "._supervisor.restart",
    "Facts": "._table.facts",
    "Usage": "._table.usage",
    "SupervisorError": "._errors",
    "UnknownServiceError": "._errors",
    "load_procfile": "._procfile.config",
    "ProcfilePlan": "._procfile.config",
    "ProcfileService": "._procfile.config",
    "ProcfileError": "._errors",
    # subprocess's own constants and exceptions (no leading dot: the standard module), for the one-import swap.
    "PIPE": "subprocess",
    "STDOUT": "subprocess",
    "DEVNULL": "subprocess",
    "CalledProcessError": "subprocess",
    "CompletedProcess": "subprocess",
    "SubprocessError": "subprocess",
    "TimeoutExpired": "subprocess",
}

__all__ = [
    "DEFAULT_RULES",
    "DEVNULL",
    "PIPE",
    "STDOUT",
    "AccessDenied",
    "Backoff",
    "CalledProcessError",
    "CompletedProcess",
    "Containment",
    "ContainmentUnavailable",
    "Error",
    "Facts",
    "ForegroundResult",
    "KeeperLost",
    "LogPage",
    "NoSuchProcess",
    "Popen",
    "Orphan",
    "Proc",
    "ProcfileError",
    "ProcfilePlan",
    "ProcfileService",
    "ReapReport",
    "ReceiptWarning",
    "Rule",
    "ServiceEvent",
    "ServiceSnapshot",
    "ServiceSpec",
    "Snapshot",
    "SubprocessError",
    "Supervisor",
    "SupervisorError",
    "SyncSupervisor",
    "TeardownReport",
    "TimeoutExpired",
    "Tree",
    "UnknownServiceError",
    "Usage",
    "call",
    "check_call",
    "check_output",
    "all_facts",
    "children",
    "cmdline",
    "contain_self",
    "create_subprocess_exec",
    "create_subprocess_shell",
    "descendants",
    "environ",
    "facts",
    "facts_of",
    "find_orphans",
    "load_procfile",
    "proc",
    "procfile",
    "reap_orphans",
    "run",
    "snapshot",
    "spawn",
    "spawn_async",
    "subprocess",
    "terminate_tree",
    "terminate_tree_async",
    "usage",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        # Written once, in pyproject.toml; read only when asked, from the installed metadata.
        from ._version import installed_version

        value = globals()["__version__"] = installed_version()
        return value
    if name in ("subprocess", "procfile"):  # the public submodules: importing one binds it here
        return _lazyimport.load("." + name, __name__)  # fork-safe, as the other names
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'proctree' has no attribute {name!r}")
    value = getattr(_lazyimport.load(module, __name__), name)  # fork-safe: see _lazyimport
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    # The public API and the module's own dunders (__version__ among them), not its private helpers.
    return sorted({*__all__, "__version__", *(n for n in globals() if n.startswith("__"))})


def snapshot() -> Snapshot:
    """Return a Snapshot of every process visible to the caller."""
    from ._table import binding as _binding

    return _binding.snapshot()


def proc(pid: int) -> Proc:
    """Return the Proc for pid. Raises NoSuchProcess if it does not exist."""
    from ._table import binding as _binding

    return _binding.proc(_check_pid(pid))


def children(pid: int) -> list[Proc]:
    """Return the direct children of pid as a list of Proc (pid excluded)."""
    from ._table import live as _live

    return _live.children(_check_pid(pid))


def descendants(pid: int) -> list[Proc]:
    """Return every process below pid, breadth-first (pid excluded)."""
    from ._table import live as _live

    return _live.descendants(_check_pid(pid))


def environ(pid: int) -> dict[str, str]:
    """Return pid's environment as a dict, decoded like file names (os.fsdecode).

    The first entry of a name wins; entries without '=' are skipped. Empty for
    a zombie or a kernel thread, and on macOS for a process the kernel
    withholds it from (restricted processes): empty there means unknown.
    Raises NoSuchProcess, AccessDenied (another user's process), or OSError
    (E2BIG for an environment over 1 MiB).
    """
    from ._table import binding as _binding
    from ._table.model import environ_from_block

    return environ_from_block(_binding.environ_block(_check_pid(pid)))


def cmdline(pid: int) -> list[str]:
    """Return pid's argv as a list of str, decoded like file names; [] for a zombie or a kernel thread.

    Raises as environ() does.
    """
    from ._table import binding as _binding
    from ._table.model import cmdline_from_block

    return cmdline_from_block(_binding.cmdline_block(_check_pid(pid)))


def facts(pid: int, attrs: Iterable[str] | None = None) -> Facts:
    """Return what pid is now, as psutil names it: a Facts record (see docs/facts.md).

    attrs names the facts wanted (psutil's attrs= habit: "cmdline", "exe", "cwd", "uids", "username",
    "memory_info", "cpu_times", "create_time", ...); None reads them all. What one stat file holds is always
    filled; cmdline, exe, cwd, uids and username only when asked for (else None). A file the system refuses
    leaves its fields None and their names in Facts.denied. Raises NoSuchProcess, AccessDenied (not even its
    stat is readable), TypeError/ValueError for bad arguments.
    """
    from ._table import facts as _facts

    want = _facts.want_of(attrs)
    return _facts.facts(_check_pid(pid), want)


def all_facts(attrs: Iterable[str] | None = None) -> list[Facts]:
    """Return the Facts of every visible process, read in one pass (psutil's process_iter(attrs=...)).

    A process that exits or is refused during the pass is left out, never raised. attrs as in facts().
    """
    from ._table import facts as _facts

    return _facts.all_facts(_facts.want_of(attrs))


def facts_of(procs: Iterable[Proc], attrs: Iterable[str] | None = None) -> list[Facts]:
    """Return the Facts of procs (from a snapshot, descendants(), a Tree) that are still the same processes.

    Each is pinned to its (pid, start_time): one that exited, or whose pid another process took since, is
    left out, never raised and never mistaken. In the order given. attrs as in facts().
    """
    from ._table import facts as _facts

    want = _facts.want_of(attrs)
    return _facts.facts_of(_proc_list(procs, "use facts(p.pid)"), want)


def usage(procs: Iterable[Proc]) -> Usage:
    """Return procs' summed usage now: a Usage(processes, rss, vms, cpu_user, cpu_system) (docs/facts.md).

    Read in one pass (each process's stat, pinned to its start time, as facts_of()); one that exited, or whose
    pid another process took since, is left out of every field, never raised. Zombies in procs are left out
    (they hold no memory). A process listed twice counts once. OSError (ENOSYS) where this system's facts are not read.
    """
    from ._table import usage as _usage

    return _usage.usage_of([p for p in _proc_list(procs, "use usage([p])") if not p.is_zombie])


del annotations  # bound by the __future__ import; not part of the API
