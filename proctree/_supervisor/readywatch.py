"""Watching one run of a service for the proof that it is ready: the probe rounds and the lines of its output.

The service's record stays the Service's: this module reads its status and
calls mark_ready() / mark_running(), never sets a field itself. A probe or a
scanner that fails is logged and counts as "not proven", never as an error of
the run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Protocol

from .readiness import Detector
from .snapshot import RUNNING, STARTING

log = logging.getLogger("proctree.supervisor")

# After ready_timeout, probes go on this many times slower (a late server still turns `ready`).
_LATE_PROBE_FACTOR = 4
_LATE_PROBE_MIN = 1.0


class Watched(Protocol):
    """What the watch needs of the service it watches."""

    id: str
    status: str
    ready_timeout: float

    def mark_ready(self, how: str) -> None: ...

    def mark_running(self) -> None: ...


def watching(service: Watched, detector: Detector | None) -> bool:
    """Whether readiness is still to be proven for this run (a detector, no proof yet, starting or running)."""
    return detector is not None and detector.ready_by is None and service.status in (STARTING, RUNNING)


async def watch_probes(service: Watched, detector: Detector) -> None:
    """Probe until ready; past ready_timeout the service is `running` and probes go on, slower (exec ones stop)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + service.ready_timeout
    interval = detector.spec.interval
    if detector.spec.kind == "none":
        return
    while watching(service, detector):
        if service.status == STARTING or detector.spec.kind != "exec":
            if _proven(service, await _probe(service, detector)):
                return
        if service.status == STARTING and loop.time() >= deadline:
            service.mark_running()
        if service.status == STARTING:
            await detector.pause(max(0.0, min(interval, deadline - loop.time())))
        elif detector.spec.kind == "exec":
            return  # a command per round forever is too much for a service that never proved itself
        else:
            await detector.pause(max(_LATE_PROBE_MIN, interval * _LATE_PROBE_FACTOR))


def watch_lines(service: Watched, detector: Detector | None, lines: Iterable[str]) -> None:
    """Look for the proof in new lines of the service's output (a log: pattern, a URL it printed)."""
    if detector is None or not watching(service, detector):
        return
    for text in lines:
        try:
            how = detector.on_line(text)
        except Exception:
            log.debug("service %s: readiness detection failed on a line", service.id, exc_info=True)
            continue
        if _proven(service, how):
            return


async def _probe(service: Watched, detector: Detector) -> str | None:
    try:
        return await detector.probe()
    except Exception:
        log.debug("service %s: a readiness probe failed", service.id, exc_info=True)
        return None


def _proven(service: Watched, how: str | None) -> bool:
    if how is None:
        return False
    service.mark_ready(how)
    return True
