"""The PROCTREE_OWNER and PROCTREE_TREE environment markers: who spawned a contained tree, and which tree.

Every process of a tree spawned by proctree carries
``PROCTREE_OWNER=<owner pid>:<owner start time>[:<tag>]@<pid ns>.<time ns>.<uid>``
in its environment,
and keeps it after it double-forks and reparents: the environment is the one
handle that survives the events that break ppid, pgid, sid and tty links. The
orphan reaper attributes a leftover to its owner with it, and (pid, start
time) tells a live owner from a reused pid without any external oracle. The part
after ``@`` places those numbers: a pid and a start time mean one process only
in one pid namespace and one time namespace (their inode numbers, 0 where the
kernel has none), and the uid says whose authority the tree ran under. A
value without that part (written by proctree before 0.2) is a legacy marker:
the reaper takes it as proof only where it can place it (docs/reaper.md).

All trees of one owner share its PROCTREE_OWNER value, so every tree also
carries ``PROCTREE_TREE=<32 lowercase hex chars>``, random per spawn: the
one handle that names a single tree (session mode follows it to daemons
that left the keeper's session). A tree spawned from inside another tree
(its owner carries a PROCTREE_TREE itself) carries a chain,
``<its own id>:<the enclosing tree's id>:...`` (at most MAX_TREE_CHAIN ids;
past that the middle ones are dropped), so that the enclosing tree still finds the
inner tree's daemons after the inner owner and keeper were killed.
"""

import os
from collections import namedtuple

TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    from typing import NamedTuple

ENV = "PROCTREE_OWNER"
TREE_ENV = "PROCTREE_TREE"
MAX_TREE_CHAIN = 7  # ids in one PROCTREE_TREE value: 7 * 33 - 1 = 230 bytes, within the core's 256-byte value slot

# The grammar is checked with str methods, not re: a process's first proctree.Popen writes a receipt
# and reads a marker, and compiling a pattern costs more than that whole start's Python work.
# Documented as patterns: tag [A-Za-z0-9_.-]{1,64}; tree id [0-9a-f]{32}; marker value
# ([1-9][0-9]{0,9}):([0-9]{1,20})(:TAG)?(@([0-9]{1,20})\.([0-9]{1,20})\.([0-9]{1,10}))?
_TAG_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
_HEX = "0123456789abcdef"
_U64 = 1 << 64
_U32 = 1 << 32


def is_tag(value):
    """True if value is a str of 1 to 64 characters from [A-Za-z0-9_.-]."""
    return isinstance(value, str) and 1 <= len(value) <= 64 and not value.strip(_TAG_CHARS)


def _is_tree_id(value):
    return len(value) == 32 and not value.strip(_HEX)


def _digits(value, most):
    """value is 1 to most ASCII digits (str.isdigit alone takes other scripts' digits too)."""
    return 1 <= len(value) <= most and value.isascii() and value.isdigit()


if TYPE_CHECKING:

    class _MarkerFields(NamedTuple):
        pid: int
        start_time: int
        tag: str | None = None
        pidns: int | None = None
        timens: int | None = None
        uid: int | None = None

else:  # collections' namedtuple at run time: typing costs import time, and a start loads this module
    _MarkerFields = namedtuple("Marker", "pid start_time tag pidns timens uid", defaults=(None, None, None, None))


class Marker(_MarkerFields):
    """A parsed PROCTREE_OWNER value. (pid, start_time) is the owner's identity.

    pidns, timens: the owner's pid and time namespace inodes (0: the kernel
    has none), uid: the owner's effective uid; all None in a legacy marker.
    """

    __slots__ = ()

    def __str__(self):
        place = None if self.pidns is None else (self.pidns, self.timens, self.uid)
        return format_marker(self.pid, self.start_time, self.tag, place)

    @property
    def legacy(self):
        """True when the value does not say which namespaces its numbers belong to."""
        return self.pidns is None


def check_tag(tag):
    """Return tag (a str matching [A-Za-z0-9_.-]{1,64}) or None; raise TypeError/ValueError otherwise."""
    if tag is None:
        return None
    if not isinstance(tag, str):
        raise TypeError(f"tag must be a str or None, not {type(tag).__name__}")
    if not is_tag(tag):
        raise ValueError(f"tag must match [A-Za-z0-9_.-]{{1,64}}, got {tag!r}")
    return tag


def format_marker(pid, start_time, tag=None, place=None):
    """The marker value for an owner: 'pid:start_time[:tag]', then '@pidns.timens.uid' when place is given.

    place: (pid namespace inode, time namespace inode, uid) of the owner.
    """
    for name, v in (("pid", pid), ("start_time", start_time)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"marker {name} must be a non-negative int, got {v!r}")
    if pid == 0:
        raise ValueError("marker pid must be positive")
    tag = check_tag(tag)
    value = f"{pid}:{start_time}" + (f":{tag}" if tag else "")
    if place is None:
        return value
    pidns, timens, uid = place
    for name, v, top in (("pidns", pidns, _U64), ("timens", timens, _U64), ("uid", uid, _U32)):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < top:
            raise ValueError(f"marker {name} must be an int in [0, {top}), got {v!r}")
    return f"{value}@{pidns}.{timens}.{uid}"


def parse_marker(value):
    """Parse a marker value (str or bytes). Returns a Marker, or None if it is not one.

    Never raises on garbage: the reaper reads this from other processes'
    environments, where anything can appear.
    """
    value = _as_text(value)
    if value is None:
        return None
    owner, at, place = value.partition("@")
    fields = owner.split(":")
    if not 2 <= len(fields) <= 3:
        return None
    pid, start = fields[0], fields[1]
    tag = fields[2] if len(fields) == 3 else None
    if not (_digits(pid, 10) and pid[0] != "0" and _digits(start, 20)) or (tag is not None and not is_tag(tag)):
        return None
    if not at:
        return Marker(int(pid), int(start), tag)
    numbers = place.split(".")
    if len(numbers) != 3 or not all(_digits(n, most) for n, most in zip(numbers, (20, 20, 10))):
        return None
    pidns, timens, uid = (int(n) for n in numbers)
    if pidns >= _U64 or timens >= _U64 or uid >= _U32:
        return None
    return Marker(int(pid), int(start), tag, pidns, timens, uid)


def from_environ_block(data):
    """The Marker in a raw NUL-separated environment block (/proc/<pid>/environ), or None."""
    key = ENV.encode() + b"="
    for entry in bytes(data).split(b"\0"):
        if entry.startswith(key):
            return parse_marker(entry[len(key) :])
    return None


def _as_text(value):
    """value as str (bytes decoded as ASCII), or None if it is neither or not ASCII. Never raises."""
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("ascii")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def new_tree_id():
    """A fresh PROCTREE_TREE value: 32 random lowercase hex characters (128 bits)."""
    return os.urandom(16).hex()


def parse_tree_id(value):
    """A PROCTREE_TREE value (str or bytes) as str, or None if it is not one. Never raises on garbage."""
    value = _as_text(value)
    if value is None or not _is_tree_id(value):
        return None
    return value


def parse_tree_chain(value):
    """A PROCTREE_TREE value (str or bytes) as its tree ids, innermost first, or None. Never raises on garbage."""
    value = _as_text(value)
    if value is None:
        return None
    ids = value.split(":")
    if not 1 <= len(ids) <= MAX_TREE_CHAIN or not all(_is_tree_id(i) for i in ids):
        return None
    return tuple(ids)


def tree_chain(tree_id, enclosing=None):
    """The PROCTREE_TREE value of a new tree: tree_id, then the enclosing value's ids (if it is one), bounded.

    Past MAX_TREE_CHAIN ids the middle ones are dropped: a tree always names
    itself, the tree it was spawned in and the outermost tree (a test run
    under `proctree run`, a supervisor), whose teardown is the last resort.
    """
    outer = parse_tree_chain(enclosing) if enclosing is not None else None
    outer = outer or ()
    if len(outer) > MAX_TREE_CHAIN - 1:
        outer = outer[: MAX_TREE_CHAIN - 2] + outer[-1:]
    return ":".join((tree_id, *outer))


def carries_tree(value, tree_id):
    """True if the PROCTREE_TREE value (str or bytes, as read from an environment) names tree_id anywhere."""
    ids = parse_tree_chain(value)
    return ids is not None and tree_id in ids


def tree_from_environ_block(data):
    """The innermost tree id of the PROCTREE_TREE value in a raw NUL-separated environment block, or None."""
    key = TREE_ENV.encode() + b"="
    for entry in bytes(data).split(b"\0"):
        if entry.startswith(key):
            ids = parse_tree_chain(entry[len(key) :])
            return None if ids is None else ids[0]
    return None
