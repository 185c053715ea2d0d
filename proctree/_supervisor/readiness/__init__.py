"""When is a service ready: what its output says, and what probes find.

Readiness is proven, never assumed, and proven by the service's own tree: a
loopback URL the service printed, or a "listening on port N" phrase, counts
once the socket listening there belongs to a member of the tree (Linux: the
socket's inode in the kernel's tables, held in a member's fd table; macOS:
the members' sockets as lsof reads them) and a TCP connect to it succeeds;
a line matching a regex the user gave; or a probe: a TCP connect, an HTTP
GET with an expected status (on a local port, again only the tree's own
listener), or a command whose exit 0 means ready.

A port that already answered before the service started (the pre-flight
check), or that belongs to another service of the same supervisor, is
ignored entirely. Nothing here blocks an event loop: connects are asyncio,
and the socket tables are read in a worker thread.

scan.py holds the pure scanners, spec.py the ReadySpec, probes.py the HTTP
and exec probes, detector.py the Detector; the port a command names and the
TCP probe live in ports.py, the socket tables in sockets.py.
"""

from __future__ import annotations

from ..ports import port_answers, port_from_command, tcp_probe
from .detector import Detector
from .probes import exec_probe, http_probe
from .scan import find_listening_port, find_url
from .spec import KINDS, ReadySpec, parse_ready

__all__ = [
    "KINDS",
    "Detector",
    "ReadySpec",
    "exec_probe",
    "find_listening_port",
    "find_url",
    "http_probe",
    "parse_ready",
    "port_answers",
    "port_from_command",
    "tcp_probe",
]
