"""The plugin's options and ini settings, read once at configure time; a test's mode (its marker)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

MODES = ("fail", "warn", "kill", "off")

# Seconds a process still running after a test may take to exit on its own before it counts as leaked.
# Measured (docs/benchmarks.md, "settle"): a process sent SIGTERM or SIGKILL is gone within a few
# milliseconds, a Python interpreter that runs its exit handlers within ~50 ms on a loaded 2-core machine.
DEFAULT_SETTLE = "1"


@dataclass(frozen=True)
class Settings:
    mode: str
    subreaper: bool
    watchdog: bool
    grace: float
    settle: float


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("proctree", "processes a test leaves behind (proctree)")
    group.addoption(
        "--proctree-leaks",
        choices=MODES,
        default=None,
        help="what to do with processes a test or fixture leaves running: fail the test, warn, "
        "only kill them, or off (the default; ini: proctree_leaks)",
    )
    parser.addini("proctree_leaks", "fail, warn, kill or off (the default)", default="off")
    parser.addini(
        "proctree_subreaper",
        "become a child subreaper so orphans come back to pytest (Linux; default true). false: members are "
        "found by their PROCTREE_TREE, a scan of every environment per test",
        type="bool",
        default=True,
    )
    parser.addini(
        "proctree_watchdog",
        "start a native keeper that ends everything the run started if pytest dies (default true)",
        type="bool",
        default=True,
    )
    parser.addini(
        "proctree_grace", "seconds a leaked process gets between SIGTERM and SIGKILL (default 1)", default="1"
    )
    parser.addini(
        "proctree_settle",
        "seconds a process still running after a test may take to exit on its own (one the test just killed) "
        f"before it counts as leaked (default {DEFAULT_SETTLE})",
        default=DEFAULT_SETTLE,
    )


def read(config: pytest.Config) -> Settings:
    """The run's settings; pytest.UsageError for a value out of range."""
    mode = config.getoption("proctree_leaks") or config.getini("proctree_leaks") or "off"
    if mode not in MODES:
        raise pytest.UsageError(f"proctree_leaks must be one of {', '.join(MODES)}, got {mode!r}")
    seconds = {}
    for name in ("proctree_grace", "proctree_settle"):
        try:
            seconds[name] = float(config.getini(name))
        except ValueError:
            raise pytest.UsageError(f"{name} must be a number of seconds, got {config.getini(name)!r}") from None
        if not 0 <= seconds[name] <= 3600:
            raise pytest.UsageError(f"{name} must be between 0 and 3600 seconds, got {seconds[name]}")
    return Settings(
        mode,
        bool(config.getini("proctree_subreaper")),
        bool(config.getini("proctree_watchdog")),
        seconds["proctree_grace"],
        seconds["proctree_settle"],
    )


def mode_for(item: pytest.Item, default: str) -> str:
    """The leak check's mode for this test: its proctree marker's, else the run's."""
    m = item.get_closest_marker("proctree")
    if m is None:
        return default
    mode = m.kwargs.get("leaks", m.args[0] if m.args else default)
    if mode not in MODES:
        raise pytest.UsageError(f"{item.nodeid}: proctree(leaks=...) must be one of {', '.join(MODES)}")
    return str(mode)
