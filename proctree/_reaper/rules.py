"""Rules for helpers that scrub their environment but name their spawner in argv.

A Rule matches on the executable's basename (argv[0]; the process name must
agree, so a renamed process is not read at all) — never on a substring
anywhere in the command line: a pager or an agent whose argv merely quotes a
rule's pattern is not the helper. It returns the spawner pid the helper
declares; the helper is an orphan when that spawner is provably gone.
Adding a harness is one entry in a tuple passed as `rules=`.

Pure: no system calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
COMM_LEN = 15  # Linux keeps the first 15 bytes of the executable's name as the process name


@dataclass(frozen=True)
class Rule:
    """name: the Orphan reason; executables: argv[0] basenames it applies to (exact match);
    spawner: argv -> the declared spawner pid (> 1), or None when argv is not the helper's."""

    name: str
    executables: tuple[str, ...]
    spawner: Callable[[Sequence[str]], int | None]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME_RE.fullmatch(self.name):
            raise ValueError(f"rule name must match [A-Za-z0-9_.-]{{1,64}}, got {self.name!r}")
        if (
            isinstance(self.executables, str)
            or not self.executables
            or not all(isinstance(e, str) and e and "/" not in e and "\0" not in e for e in self.executables)
        ):
            raise ValueError(f"rule {self.name}: executables must be a non-empty tuple of basenames")
        if not callable(self.spawner):
            raise TypeError(f"rule {self.name}: spawner must be callable")

    def wants_name(self, name: str) -> bool:
        """Whether a process of this name (the kernel's, truncated) could be this rule's helper."""
        return any(name == e[:COMM_LEN] or name == e for e in self.executables)

    def match(self, argv: Sequence[str]) -> int | None:
        """The spawner pid the helper declares, or None (a spawner that raises counts as no match)."""
        if not argv or argv[0].rsplit("/", 1)[-1] not in self.executables:
            return None
        try:
            pid = self.spawner(argv)
        except Exception:
            return None
        if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 1 or pid > 0x7FFFFFFF:
            return None
        return pid


def _claude_spawner(argv: Sequence[str]) -> int | None:
    """`claude daemon run ... --spawned-by {"pid": N, ...}`: N."""
    args = list(argv[1:])
    if not any(a == "daemon" and b == "run" for a, b in zip(args, args[1:])):
        return None
    blob = None
    for i, a in enumerate(args):
        if a == "--spawned-by" and i + 1 < len(args):
            blob = args[i + 1]
            break
        if a.startswith("--spawned-by="):
            blob = a.split("=", 1)[1]
            break
    if blob is None or len(blob) > 4096:
        return None
    try:
        decl = json.loads(blob)
    except ValueError:
        return None
    pid = decl.get("pid") if isinstance(decl, dict) else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) else None


CLAUDE_DAEMON = Rule("claude-daemon", ("claude", "claude.exe"), _claude_spawner)
DEFAULT_RULES: tuple[Rule, ...] = (CLAUDE_DAEMON,)
