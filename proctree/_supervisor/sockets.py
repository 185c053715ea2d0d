"""Who listens on a port: the kernel's socket tables, and the sockets a set of processes holds.

Readiness counts a port only when its listening socket belongs to the
service's own tree. On Linux that is proven from the kernel's tables: the
inode of each socket listening on the port at a loopback or wildcard address
(asked of sock_diag over netlink, which walks the listening sockets only;
else read from /proc/net/tcp and tcp6, which walk every socket: 5 ms and
more on a busy host), held by a member when one of its /proc/<pid>/fd links
reads socket:[inode]. Both see this network namespace. On macOS lsof lists the
members' listening ports (libproc's socket info, read for the given pids
only). Every function here reads files or runs lsof: call them from a worker
thread (asyncio.to_thread), never on an event loop. Nothing here connects,
signals or starts anything but lsof.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import struct
import subprocess
import sys
from collections.abc import Collection, Iterable
from dataclasses import dataclass

__all__ = ["Listener", "listeners", "local_hex_address", "owned_ports", "ownership_readable"]

_LINUX = sys.platform.startswith("linux")
_PROC_NET_TCP = ("/proc/net/tcp", "/proc/net/tcp6") if _LINUX else ()
_TCP_LISTEN = "0A"
# A member's fd table is read up to this many links: a process holding more is not read further.
_MAX_FDS = 65536
_LSOF_TIMEOUT = 2.0


@dataclass(frozen=True, order=True)
class Listener:
    """A socket listening on a loopback or wildcard address: its port, inode and owner's uid."""

    port: int
    inode: int
    uid: int


def local_hex_address(text: str) -> bool:
    """Whether a /proc/net/tcp{,6} address (hex, in the kernel's word order) is loopback or a wildcard."""
    try:
        raw = bytes.fromhex(text)
        if sys.byteorder == "little":  # the kernel prints each 32-bit word in host order
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
        if len(raw) == 4:
            ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.IPv4Address(raw)
        elif len(raw) == 16:
            ip = ipaddress.IPv6Address(raw)
            mapped = ip.ipv4_mapped
            if mapped is not None:
                ip = mapped
        else:
            return False
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified


def listeners(ports: Collection[int]) -> list[Listener] | None:
    """The sockets listening on any of ports at a loopback or wildcard address; None where the tables cannot be read."""
    if not _PROC_NET_TCP:
        return None
    try:
        found = _diag_listeners(socket.AF_INET) + _diag_listeners(socket.AF_INET6)
    except (OSError, ValueError, struct.error):
        return _proc_listeners(ports)  # no netlink here (a sandbox): the /proc tables say the same, slower
    wanted = set(ports)
    return [sock for sock in found if sock.port in wanted]


# sock_diag (linux/inet_diag.h): a dump request for one family's TCP sockets in LISTEN state.
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST_DUMP = 0x1 | 0x300
_NLMSG_ERROR = 2
_NLMSG_DONE = 3
_TCP_LISTEN_STATE = 10
_NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, seq, pid
_DIAG_REQUEST = struct.Struct("=BBBBI48x")  # family, protocol, ext, pad, states, inet_diag_sockid
_DIAG_MSG_MIN = 72  # inet_diag_msg: ..., uid at 64, inode at 68


def _diag_listeners(family: int) -> list[Listener]:
    """Every TCP socket of family listening at a loopback or wildcard address, from the kernel's sock_diag."""
    request = _DIAG_REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN_STATE)
    header = _NLMSG_HEADER.pack(_NLMSG_HEADER.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST_DUMP, 1, 0)
    size = 4 if family == socket.AF_INET else 16
    found: list[Listener] = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(2.0)
        nl.sendto(header + request, (0, 0))
        while True:
            data = nl.recv(1 << 16)
            if not data:
                raise ValueError("sock_diag: no answer")
            offset = 0
            while offset + _NLMSG_HEADER.size <= len(data):
                length, kind, _, _, _ = _NLMSG_HEADER.unpack_from(data, offset)
                if kind == _NLMSG_DONE:
                    return found
                if kind == _NLMSG_ERROR or length < _NLMSG_HEADER.size + _DIAG_MSG_MIN:
                    raise ValueError("sock_diag: an error or a short message")
                body = offset + _NLMSG_HEADER.size
                port = int.from_bytes(data[body + 4 : body + 6], "big")
                address = data[body + 8 : body + 8 + size]
                uid, inode = struct.unpack_from("=II", data, body + 64)
                if _local_packed(family, address):
                    found.append(Listener(port, inode, uid))
                offset += (length + 3) & ~3


def _local_packed(family: int, packed: bytes) -> bool:
    ip = ipaddress.ip_address(packed)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


def _proc_listeners(ports: Collection[int]) -> list[Listener] | None:
    """listeners() from /proc/net/tcp and tcp6."""
    wanted = {f"{port:04X}": port for port in ports}
    found: list[Listener] = []
    readable = False
    for path in _PROC_NET_TCP:
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                next(f, None)  # the header
                for line in f:
                    # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
                    fields = line.split()
                    if len(fields) < 10 or fields[3] != _TCP_LISTEN:
                        continue
                    address, _, port_hex = fields[1].rpartition(":")
                    port = wanted.get(port_hex)
                    if port is None or not local_hex_address(address):
                        continue
                    try:
                        found.append(Listener(port, int(fields[9]), int(fields[7])))
                    except ValueError:
                        continue
            readable = True
        except OSError:
            continue  # no IPv6 here, say: the other table still counts
    return found if readable else None


def _held_sockets(pid: int) -> set[int] | None:
    """The socket inodes pid holds open; None when its fd table cannot be read (another uid, gone)."""
    held: set[int] = set()
    try:
        base = f"/proc/{pid}/fd"
        names = os.listdir(base)
    except OSError:
        return None
    for name in names[:_MAX_FDS]:
        try:
            target = os.readlink(f"{base}/{name}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:[") and target.endswith("]"):
            try:
                held.add(int(target[8:-1]))
            except ValueError:
                continue
    return held


def ownership_readable() -> bool:
    """Whether this platform can tell whose a listening socket is (Linux /proc, or lsof on macOS)."""
    return bool(_PROC_NET_TCP) or (sys.platform == "darwin" and shutil.which("lsof") is not None)


def owned_ports(ports: Collection[int], pids: Iterable[int]) -> set[int] | None:
    """Which of ports the processes pids listen on (a loopback or wildcard address); None when unknowable.

    Linux: a port counts when a socket listening on it is held by one of
    pids. A member whose fds cannot be read (it changed its uid) is taken at
    its word only for sockets owned by the uid it runs as, never another's.
    macOS: lsof's listening TCP sockets of pids. None elsewhere, or when the
    tables cannot be read.
    """
    pids = sorted(set(pids))
    if not ports:
        return set()
    if _PROC_NET_TCP:
        return _owned_linux(ports, pids)
    if sys.platform == "darwin":
        return _owned_lsof(ports, pids)
    return None


def _owned_linux(ports: Collection[int], pids: list[int]) -> set[int] | None:
    found = listeners(ports)
    if found is None:
        return None
    if not found or not pids:
        return set()
    inodes: set[int] = set()
    uids: set[int] = set()  # of members whose fd table is closed to us
    for pid in pids:
        held = _held_sockets(pid)
        if held is not None:
            inodes |= held
            continue
        try:
            uids.add(os.stat(f"/proc/{pid}").st_uid)
        except OSError:
            continue  # gone
    return {sock.port for sock in found if sock.inode in inodes or (sock.uid in uids and sock.inode != 0)}


def _owned_lsof(ports: Collection[int], pids: list[int]) -> set[int] | None:
    lsof = shutil.which("lsof")
    if lsof is None:
        return None
    if not pids:
        return set()
    try:
        done = subprocess.run(
            [lsof, "-nP", "-a", "-iTCP", "-sTCP:LISTEN", "-p", ",".join(map(str, pids)), "-Fn"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_LSOF_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    owned: set[int] = set()
    for line in done.stdout.decode("ascii", "replace").splitlines():
        if not line.startswith("n"):
            continue
        host, _, port_text = line[1:].rpartition(":")
        if port_text.isdigit() and int(port_text) in ports and _local_name(host):
            owned.add(int(port_text))
    return owned


def _local_name(host: str) -> bool:
    host = host.strip("[]")
    if host in ("*", "localhost", ""):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified
