"""Loopback ports for tests that run servers: free ones to hand out, and whether one answers."""

import os
import socket


def free_port():
    """A loopback port that was free a moment ago (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_base(offsets=(0, 1, 100, 200, 300)):
    """A base port B with B + each offset free on loopback right now (for `proctree up -p B`)."""
    for _ in range(200):
        base = 20000 + int.from_bytes(os.urandom(2), "big") % 30000
        socks = []
        try:
            for off in offsets:
                s = socket.socket()
                s.bind(("127.0.0.1", base + off))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free base port")


def answers(port):
    """True if something accepts a TCP connection on 127.0.0.1:port (within half a second)."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
