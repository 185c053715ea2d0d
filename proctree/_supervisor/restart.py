"""Restart policy: whether a service that ended by itself starts again, after how long, and when to give up.

Pure: the decision is a function of the policy, the exit, how long the run
lasted and how many quick restarts came before it, plus a random draw for the
jitter (passed in, so tests fix it). Exponential backoff: initial * factor**n,
capped at maximum, each delay spread by +-jitter so that services that crashed
together do not restart in lockstep; a run that lasted reset_after seconds
starts the count again; past max_restarts quick restarts in a row the service
is in a crash loop and is not started again.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from .._validate import check_seconds

NO = "no"
ON_FAILURE = "on-failure"
ALWAYS = "always"
POLICIES = (NO, ON_FAILURE, ALWAYS)


def check_policy(value: object) -> str:
    """The restart policy, or TypeError/ValueError."""
    if not isinstance(value, str):
        raise TypeError(f"restart must be a str, not {type(value).__name__}")
    if value not in POLICIES:
        raise ValueError(f"restart must be one of {', '.join(POLICIES)}, got {value!r}")
    return value


def check_max_restarts(value: object) -> int | None:
    """max_restarts: an int >= 0 (restarts in a row before giving up), or None for no limit."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_restarts must be an int or None, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"max_restarts must be >= 0, got {value}")
    return value


@dataclass(frozen=True)
class Backoff:
    """How the delay before a restart grows: initial * factor**n seconds, at most maximum, +-jitter of it."""

    initial: float = 0.5
    factor: float = 2.0
    maximum: float = 30.0
    jitter: float = 0.2
    reset_after: float = 10.0  # a run at least this long resets the count of quick restarts

    def __post_init__(self) -> None:
        for field in ("initial", "maximum", "reset_after"):
            check_seconds(getattr(self, field), f"Backoff.{field}")
        if (
            isinstance(self.factor, bool)
            or not isinstance(self.factor, (int, float))
            or not (1 <= self.factor < math.inf)
        ):
            raise ValueError(f"Backoff.factor must be a finite number >= 1, got {self.factor!r}")
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, (int, float)) or not (0 <= self.jitter < 1):
            raise ValueError(f"Backoff.jitter must be a fraction in [0, 1), got {self.jitter!r}")

    def delay(self, attempt: int, draw: float) -> float:
        """The delay before restart number attempt (0 for the first), with draw in [0, 1) spreading it."""
        try:
            base = self.initial * self.factor**attempt
        except OverflowError:
            base = math.inf
        base = min(self.maximum, base)
        return max(0.0, min(self.maximum, base * (1 - self.jitter + 2 * self.jitter * draw)))


@dataclass(frozen=True)
class Decision:
    """What to do after a run ended by itself.

    restart: start it again after delay seconds. spent: the policy would
    restart it but max_restarts allows no more. crash_loop: spent after at
    least one quick restart (a single failure under max_restarts=0 is not a
    loop). streak: the quick restarts in a row, counting this one.
    """

    restart: bool
    delay: float = 0.0
    crash_loop: bool = False
    streak: int = 0
    spent: bool = False


def wants_restart(policy: str, failed: bool) -> bool:
    """Whether policy restarts a run that ended by itself (failed: a non-zero status or a signal)."""
    return policy == ALWAYS or (policy == ON_FAILURE and failed)


def decide(
    policy: str,
    max_restarts: int | None,
    backoff: Backoff,
    *,
    failed: bool,
    uptime: float,
    streak: int,
    draw: Callable[[], float] = random.random,
) -> Decision:
    """The decision after a run that lasted uptime seconds ended by itself, streak quick restarts in a row before it."""
    if uptime >= backoff.reset_after:
        streak = 0
    if not wants_restart(policy, failed):
        return Decision(False, streak=streak)
    if max_restarts is not None and streak >= max_restarts:
        return Decision(False, crash_loop=streak > 0, streak=streak, spent=True)
    return Decision(True, backoff.delay(streak, draw()), streak=streak + 1)
