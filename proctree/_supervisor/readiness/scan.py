"""Where a service's output says it listens: loopback URLs and "listening on port N" phrases.

Pure text scanning, table-tested: no system calls, no connects. A line
naming a proxy target, an upstream or a server it connects to names somebody
else's server, and proves nothing about the service itself.
"""

from __future__ import annotations

import re
import urllib.parse

from ..._validate import is_port
from ..logring import strip_ansi
from ..ports import is_local_host

__all__ = ["find_listening_port", "find_url", "find_url_at", "names_another", "url_target"]

# --- URLs in output ------------------------------------------------------------------------------

# A loopback or wildcard host, as servers print it. 127.0.0.0/8 is loopback as a whole.
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_LOOPBACK_HOST = rf"(?:localhost|127\.{_OCTET}\.{_OCTET}\.{_OCTET}|0\.0\.0\.0|\[::1?\])"
_URL = re.compile(
    rf"(?<![\w.+-])(?P<scheme>https?)://(?P<host>{_LOOPBACK_HOST})"
    r"(?::(?P<port>\d{1,5}))?"
    # The host (and port) must end there: not localhost.example.com, 127.0.0.1.nip.io,
    # localhost@evil.example or :8000abc. A '.' or ':' that ends the text or is followed by a
    # space or closing punctuation ends a sentence ("Open http://127.0.0.1:8000."), not the host.
    r"(?![\w@-])(?![.:][^\s)\]}>\"',;!?.])"
    r"(?P<path>/[\w\-./~%?#=&+:@!$,;*']*)?",
    re.IGNORECASE | re.ASCII,
)


def _connectable(host: str) -> str:
    """The address to connect to for a host a server printed (the wildcards are not addresses)."""
    host = host.lower()
    if host == "0.0.0.0":
        return "127.0.0.1"
    if host == "[::]":
        return "[::1]"  # a server on the IPv6 wildcard accepts on ::1 whether or not it is dual-stack
    return host


def find_url(line: str) -> str | None:
    """The first loopback http(s) URL in line, made connectable, or None.

    localhost, 127.0.0.0/8, 0.0.0.0, [::1] and [::] count; 0.0.0.0 becomes
    127.0.0.1 and [::] becomes [::1]. A URL inside another URL (a redirect
    parameter) or glued to a word does not count, nor one with a port outside
    1-65535. The result is scheme://host:port/path with the port spelt out.
    Control sequences in line are ignored.
    """
    found = find_url_at(line)
    return None if found is None else found[0]


def find_url_at(line: str) -> tuple[str, str, int] | None:
    """find_url(), with the line stripped of control sequences and where the URL starts in it."""
    if "://" not in line:
        return None
    line = strip_ansi(line)
    for m in _URL.finditer(line):
        start = m.start()
        token_start = max(line.rfind(" ", 0, start), line.rfind("\t", 0, start)) + 1
        if "://" in line[token_start:start]:
            continue  # inside another URL: http://example.com/?next=http://localhost/
        scheme = m.group("scheme").lower()
        port = int(m.group("port")) if m.group("port") else (443 if scheme == "https" else 80)
        if not is_port(port):
            continue
        path = (m.group("path") or "/").rstrip(".,;:!?'")
        return f"{scheme}://{_connectable(m.group('host'))}:{port}{path or '/'}", line, start
    return None


def url_target(url: str) -> tuple[str, int]:
    """(host, port) to connect to for an http(s) URL (IPv6 brackets removed)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return host, port


# --- "listening on port N" ------------------------------------------------------------------------

# Where a listening line puts its port: "port 8000" / "port: 8000", or ":8000" after a host, a
# scheme://host, or nothing at all ("Listening on :8080").
_PORT_SPOT = re.compile(
    r"\bport\b[\s:=#\"']*(?P<p1>\d{1,5})(?![\d.:])|:(?P<p2>\d{1,5})(?![\d:.\w])", re.IGNORECASE | re.ASCII
)
# The characters of what may stand before such a colon: a host, [v6], *, or scheme://host.
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-[]:*/")
_HOST_REACH = 64
# What servers say once they listen (express, postgres, gin, echo, next, puma, http.server,
# mongod, mysql, ...), within _PHRASE_REACH characters before the port. A verb counts when a
# preposition follows it within a few words ("started on", "Serving HTTP on", "bound to"), so
# that "Started DB pool (host=127.0.0.1 port=5432)" names somebody else's port, not ours; the
# "... for connections" phrases need none (mysql: "ready for connections. ... port: 3306").
_VERB = re.compile(
    r"\b(?:(?P<connections>(?:accepting|waiting\s+for|ready\s+for)\s+connections)|"
    r"listening|listens|listen|serving|running|started|starting|bound|available|ready|server\s+(?:is\s+)?up)\b",
    re.IGNORECASE,
)
_PREPOSITIONS = frozenset(("on", "at", "to"))
_PHRASE_REACH = 120
_VERB_HINTS = ("listen", "serving", "running", "start", "bound", "available", "connections", "ready", " up")
_IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])", re.ASCII)


def find_listening_port(line: str) -> int | None:
    """The port in a server's "listening" line, or None.

    "Example app listening on port 3000", "Listening on :8080", "Serving HTTP
    on 0.0.0.0 port 8000", "* Listening on tcp://127.0.0.1:3000", 'listening
    on IPv4 address "0.0.0.0", port 5432', "started server on 0.0.0.0:3000".
    A line naming a host that is neither loopback nor a wildcard gives None
    (the server does not answer on loopback), as does a port outside 1-65535.
    """
    low = line.lower()
    if not any(word in low for word in _VERB_HINTS):
        return None
    line = strip_ansi(line)
    for m in _PORT_SPOT.finditer(line):
        port = int(m.group("p1") or m.group("p2"))
        if not is_port(port):
            continue
        if m.group("p2"):
            start = end = m.start()
            while start > 0 and end - start < _HOST_REACH and line[start - 1] in _HOST_CHARS:
                start -= 1
            before = line[start:end]
            if before and not is_local_host(before.rpartition("://")[2]):
                continue  # "listening on 10.0.0.5:3000", or a time of day
        verbs = list(_VERB.finditer(line, max(0, m.start() - _PHRASE_REACH), m.start()))
        if not verbs or not _says_listening(verbs[-1], line[verbs[-1].end() : m.start()]):
            continue
        # The stretch between the last verb and the port is where a host would be named.
        if any(not is_local_host(ip) for ip in _IPV4.findall(line, verbs[-1].end(), m.start())):
            continue  # "listening on 10.0.0.5 port 3000"
        return port
    return None


def _says_listening(verb: re.Match[str], gap: str) -> bool:
    """Whether the verb, followed by gap up to the port, says where the server itself listens."""
    if verb.group("connections") or gap.lstrip().startswith(":"):
        return True
    return any(word.lower().rstrip(",") in _PREPOSITIONS for word in gap.split()[:4])


# Words that make a URL or port in a line somebody else's: a dev server's proxy target, a
# server it connects to. Such a line proves nothing about the service itself.
_OTHERS = re.compile(
    r"\b(?:prox(?:y|ying|ied)|upstream|forward(?:s|ed|ing)?|connect(?:s|ed|ing)?\s+to|reach(?:ing)?)\b",
    re.IGNORECASE,
)


def names_another(line: str, url_start: int) -> bool:
    """Whether line (stripped) presents the URL at url_start as somebody else's ("proxying /api to http://...")."""
    return _OTHERS.search(line, 0, url_start) is not None
