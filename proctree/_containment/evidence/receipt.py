"""Receipts: one small file per contained tree, so a reaper can find a tree whose owner and keeper both died.

spawn() writes ``<keeper pid>-<keeper start>.json`` into a per-user runtime
directory (``directory()``) once the keeper reported the command's start; the
owner removes it when its Tree ends the tree, the keeper when it ends the tree
itself. A receipt left behind names a tree nobody watches any more: its
owner, keeper and command by (pid, start time), its session and process
group, its cgroup, and the PROCTREE_OWNER / PROCTREE_TREE values its members
carry, which also works where other processes' environments cannot be read.

Files are read as untrusted input: ``read_all()`` opens each with O_NOFOLLOW,
checks it with fstat on the open descriptor (a regular file of ours, not
group/world-writable, at most MAX_BYTES) and validates every field; a bad
file is reported with the reason, never raised on, and never trusted.

The file name is the keeper protocol's (``protocol.receipt_name``), so the
native keeper removes its receipt without this module. It must never change the owner or mode of a directory
it did not create, and never follow a symlink.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import time

from ... import _lazyimport
from ..._record import record  # a frozen dataclass without dataclasses' import time
from .. import protocol as _protocol
from . import marker as _marker

VERSION = 1
ENV_DIR = "PROCTREE_RECEIPTS_DIR"  # overrides the location (same checks)
MAX_BYTES = 4096  # a receipt larger than this is not one
TEMP_PREFIX = ".tmp-"
TEMP_PATIENCE = 5.0  # seconds a temporary file may be an in-progress write
MODES = ("cgroup", "subreaper", "session")
_SUFFIX = ".json"
# A receipt is written by every spawn() and a process's first proctree.Popen, and read only by the reaper:
# written with _json below, json loads when a receipt is first read.
TYPE_CHECKING = False  # typing costs import time; type checkers take this as True
if TYPE_CHECKING:
    import json
else:
    json = _lazyimport.LazyModule("json", "")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_FIELDS = ("owner", "keeper", "command", "sid", "pgid", "cgroup", "tag", "mode", "marker", "tree", "created")


@record
class Receipt:
    """One tree's receipt, as read back. Identities are (pid, start time) in proctree's start-time units.

    path:    where it was read
    owner:   the process that called spawn()
    keeper:  the tree's keeper (the file is named after it)
    command: the command spawn() started, or None if unknown
    sid:     the tree's session (led by the keeper)
    pgid:    the command's process group
    cgroup:  the tree's cgroup directory (cgroup mode), else None
    tag:     spawn(tag=...), else None
    mode:    "cgroup", "subreaper" or "session"
    marker:  the PROCTREE_OWNER value the members carry
    tree:    the PROCTREE_TREE value the members carry
    created: time.time() when it was written
    pidns:   the owner's pid and time namespaces (inodes; 0 where the platform or
    timens:  kernel has none), so that a reader in other namespaces, whose pids
             and start times mean other processes, can tell; None if unknown
    uid:     the file's owner (the uid that wrote it), None where not read from a file
    """

    path: str
    owner: tuple[int, int]
    keeper: tuple[int, int]
    command: tuple[int, int] | None
    sid: int
    pgid: int
    cgroup: str | None
    tag: str | None
    mode: str
    marker: str
    tree: str
    created: float
    pidns: int | None = None
    timens: int | None = None
    uid: int | None = None  # the file's owner: whose tree it is


def file_name(keeper_pid: int, keeper_start: int) -> str:
    """The receipt's file name for a keeper identity (the keeper protocol's: the keeper removes it)."""
    return _protocol.receipt_name(keeper_pid, keeper_start)


def directory() -> str | None:
    """The receipt directory of this user, created 0700 if missing; None if no location passes the checks.

    PROCTREE_RECEIPTS_DIR if set (absolute; nothing else then). Otherwise the
    first of: $XDG_RUNTIME_DIR/proctree when XDG_RUNTIME_DIR is an absolute
    directory of ours; /run/user/<uid>/proctree when /run/user/<uid> is ours;
    /run/proctree for root (only root can create it); <tempdir>/proctree-<uid>.
    That last one can be created first by another user: then a directory of
    ours made by mkdtemp, <tempdir>/proctree-<uid>.<random>, is used instead,
    and read_all() says so. A location must be ours, a real directory (not a
    symlink) and closed to group and others. why_no_directory() says why the
    answer was None.
    """
    global _last_problem
    path, problems = _ensure_directory()
    _last_problem = None if path is not None else "; ".join(f"{d}: {why}" for d, why in problems) or "no location"
    return path


_last_problem: str | None = None
RUN_ROOT = "/run"  # where /run/user/<uid> and root's /run/proctree live (tests point it elsewhere)


def why_no_directory() -> str | None:
    """Why the last directory() call found no location (each tried path and its problem), or None."""
    return _last_problem


def _ensure_directory() -> tuple[str | None, list[tuple[str, str]]]:
    """(the first usable location, made if missing, or None; (path, why) for each location that failed)."""
    problems: list[tuple[str, str]] = []
    places = _locations()
    for i, path in enumerate(places):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            problems.append((path, f"cannot create it: {exc.strerror}"))
            continue
        why = _dir_ok(path)
        if why is None:
            return path, problems
        problems.append((path, why))
        if i == len(places) - 1 and os.environ.get(ENV_DIR) is None:
            fallback = _tempdir_fallback(create=True)
            if fallback is not None:
                return fallback, problems
    return None, problems


def _locations() -> list[str]:
    """Where this user's receipts may be, in order of preference (see directory())."""
    override = os.environ.get(ENV_DIR)
    if override is not None:
        return [os.path.normpath(override)] if os.path.isabs(override) else []
    uid = os.geteuid()
    out = []
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    for runtime in (xdg if xdg and os.path.isabs(xdg) else None, os.path.join(RUN_ROOT, "user", str(uid))):
        if runtime is None:
            continue
        try:
            st = os.lstat(runtime)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == uid:
            place = os.path.join(os.path.normpath(runtime), "proctree")
            if place not in out:
                out.append(place)
    if uid == 0:
        out.append(os.path.join(RUN_ROOT, "proctree"))
    out.append(_tempdir_location())
    return out


def _temp_root() -> str:
    """The temp directory receipts fall back to: one fixed place, so that spawn and reap always agree.

    Not tempfile.gettempdir(), which moves to /var/tmp while /tmp is full or
    unwritable (a receipt written there would never be read).
    """
    # tempfile.tempdir only if tempfile is loaded (nobody set it otherwise): a spawn, proctree.Popen's
    # first among them, must import nothing (a fork while it imports leaves the child a held import lock).
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None and tempfile.tempdir:
        return str(tempfile.tempdir)
    env = os.environ.get("TMPDIR")
    return env if env and os.path.isabs(env) else "/tmp"


def _tempdir_location() -> str:
    return os.path.join(_temp_root(), f"proctree-{os.geteuid()}")


def _tempdir_fallback(create: bool) -> str | None:
    """An existing <tempdir>/proctree-<uid>.<random> of ours, else (create) a new one by mkdtemp; None if neither."""
    import tempfile

    found = _tempdir_fallbacks()
    if found:
        return found[0]
    if not create:
        return None
    try:
        path = tempfile.mkdtemp(prefix=f"proctree-{os.geteuid()}.", dir=_temp_root())
    except OSError:
        return None
    return path if _dir_ok(path) is None else None


def _tempdir_fallbacks() -> list[str]:
    """Every <tempdir>/proctree-<uid>.<random> that passes the checks (another user's look-alikes do not)."""
    root = _temp_root()
    prefix = f"proctree-{os.geteuid()}."
    try:
        names = sorted(n for n in os.listdir(root) if n.startswith(prefix))
    except OSError:
        return []
    return [os.path.join(root, n) for n in names if _dir_ok(os.path.join(root, n)) is None]


def _open_dir(path: str) -> int:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags)


def _dir_ok(path: str) -> str | None:
    """None if path is a directory we may keep receipts in, else why not."""
    try:
        fd = _open_dir(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and os.path.islink(path)):
            return "a symlink"
        return f"cannot open it: {exc.strerror}"
    try:
        return _dir_problem(os.fstat(fd))
    finally:
        os.close(fd)


def _dir_problem(st: os.stat_result) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}"
    if st.st_mode & 0o077:
        return f"mode {stat.S_IMODE(st.st_mode):04o} is open to group or others"
    return None


def encode(
    *,
    owner: tuple[int, int],
    keeper: tuple[int, int],
    command: tuple[int, int] | None,
    sid: int,
    pgid: int,
    cgroup: str | None,
    tag: str | None,
    mode: str,
    marker: str,
    tree: str,
    created: float | None = None,
    pidns: int | None = None,
    timens: int | None = None,
) -> bytes:
    """The receipt's bytes; ValueError if a field is invalid or the whole exceeds MAX_BYTES."""
    doc = {
        "version": VERSION,
        "owner": list(owner),
        "keeper": list(keeper),
        "command": None if command is None else list(command),
        "sid": sid,
        "pgid": pgid,
        "cgroup": cgroup,
        "tag": tag,
        "mode": mode,
        "marker": marker,
        "tree": tree,
        "created": time.time() if created is None else created,
        "pidns": pidns,
        "timens": timens,
    }
    why = _invalid(doc)
    if why is not None:
        raise ValueError(f"invalid receipt: {why}")
    data = _json(doc).encode("ascii") + b"\n"
    if len(data) > MAX_BYTES:
        raise ValueError(f"receipt would be {len(data)} bytes, over {MAX_BYTES} (cgroup path too long?)")
    return data


def _json(value: object) -> str:
    """value as json.dumps(value, separators=(",", ":"), ensure_ascii=True) writes it, for a receipt's types."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
        return float.__repr__(value)
    if isinstance(value, str):
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return '"' + value + '"'  # nothing to escape (the usual case): no loop over its characters
        return '"' + "".join(_ESCAPES.get(c) or (c if " " <= c <= "~" else _u_escape(c)) for c in value) + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_json(v) for v in value) + "]"
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("a receipt's keys are str")
        return "{" + ",".join(_json(k) + ":" + _json(v) for k, v in value.items()) + "}"
    raise TypeError(f"a receipt holds no {type(value).__name__}")


def _u_escape(c: str) -> str:
    n = ord(c)
    if n < 0x10000:
        return f"\\u{n:04x}"
    n -= 0x10000
    return f"\\u{0xD800 | (n >> 10):04x}\\u{0xDC00 | (n & 0x3FF):04x}"


def write(directory: str, data: bytes, keeper: tuple[int, int]) -> str:
    """Write a tree's receipt (encode()'s bytes; keeper: its keeper's pid and start time) atomically; return its path.

    A temporary file (O_CREAT|O_EXCL|O_NOFOLLOW, 0600) renamed over
    <keeper pid>-<keeper start>.json: a reader sees the whole receipt or none.
    OSError if the directory fails its checks or the write fails (nothing is left).
    """
    name = file_name(*keeper)
    dfd = _open_dir(directory)
    try:
        why = _dir_problem(os.fstat(dfd))
        if why is not None:
            raise PermissionError(errno.EPERM, f"receipt directory {directory} is {why}")
        tmp = f"{TEMP_PREFIX}{name}.{os.urandom(4).hex()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(tmp, flags, 0o600, dir_fd=dfd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
    finally:
        os.close(dfd)
    return os.path.join(directory, name)


def remove(path: str) -> None:
    """Remove a receipt; a missing file is fine."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def read_all(directory: str | None = None) -> tuple[list[Receipt], list[tuple[str, str]]]:
    """Every valid receipt in directory (default: every location of this user, see directory()), and
    (path, why) for every file or location ignored.

    Never raises for a bad file, and never creates a directory. Temporary files
    younger than TEMP_PATIENCE (a write in progress) are skipped silently. A
    location that exists but fails the checks (another user's directory, a
    symlink) is reported as a problem: receipts written there would not be ours.
    """
    if directory is not None:
        return _read_dir(directory)
    good: list[Receipt] = []
    bad: list[tuple[str, str]] = []
    places = _locations()
    for path in places:
        if not os.path.lexists(path):
            continue
        why = _dir_ok(path)
        if why is not None:
            bad.append((path, f"not used for receipts: {why}"))
            continue
        g, b = _read_dir(path)
        good.extend(g)
        bad.extend(b)
    if os.environ.get(ENV_DIR) is None:
        for path in _tempdir_fallbacks():
            g, b = _read_dir(path)
            good.extend(g)
            bad.extend(b)
    return good, bad


def _read_dir(directory: str) -> tuple[list[Receipt], list[tuple[str, str]]]:
    good: list[Receipt] = []
    bad: list[tuple[str, str]] = []
    try:
        dfd = _open_dir(directory)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            bad.append((directory, "a symlink" if exc.errno == errno.ELOOP else f"cannot open: {exc.strerror}"))
        return good, bad
    try:
        try:
            names = sorted(os.listdir(dfd))
        except OSError as exc:
            bad.append((directory, f"cannot list: {exc.strerror}"))
            return good, bad
        for name in names:
            path = os.path.join(directory, name)
            got = _read_one(dfd, name, path)
            if isinstance(got, Receipt):
                good.append(got)
            elif got is not None:
                bad.append((path, got))
    finally:
        os.close(dfd)
    return good, bad


def _read_one(dfd: int, name: str, path: str) -> Receipt | str | None:
    """A Receipt, the reason the file is ignored, or None for an in-progress temporary file."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None  # removed since the listing
        if exc.errno == errno.ELOOP:
            return "a symlink"
        return f"cannot open: {exc.strerror}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if name.startswith(TEMP_PREFIX):
            if time.time() - st.st_mtime < TEMP_PATIENCE:
                return None
            return "a stale temporary file"
        if st.st_uid != os.geteuid():
            return f"owned by uid {st.st_uid}"
        if st.st_mode & 0o022:
            return "group or world writable"
        if st.st_size > MAX_BYTES:
            return f"over {MAX_BYTES} bytes"
        try:
            data = os.read(fd, MAX_BYTES + 1)
        except OSError as exc:
            return f"cannot read: {exc.strerror}"
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        return f"over {MAX_BYTES} bytes"
    if not name.endswith(_SUFFIX):
        return "not a receipt's name"
    return parse(data, path, st.st_uid)


def parse(data: bytes, path: str, uid: int | None = None) -> Receipt | str:
    """A receipt's bytes read from path (a file owned by uid) as a Receipt, or the reason they are not one."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "malformed JSON (truncated?)"
    if not isinstance(doc, dict):
        return "malformed: not a JSON object"
    if doc.get("version") != VERSION or isinstance(doc.get("version"), bool):
        return f"unsupported version {doc.get('version')!r}"
    why = _invalid(doc)
    if why is not None:
        return why
    keeper = (doc["keeper"][0], doc["keeper"][1])
    if os.path.basename(path) != file_name(*keeper):
        return f"its name does not match its keeper {keeper[0]}-{keeper[1]}"
    return Receipt(
        path=path,
        owner=(doc["owner"][0], doc["owner"][1]),
        keeper=keeper,
        command=None if doc["command"] is None else (doc["command"][0], doc["command"][1]),
        sid=doc["sid"],
        pgid=doc["pgid"],
        cgroup=doc["cgroup"],
        tag=doc["tag"],
        mode=doc["mode"],
        marker=doc["marker"],
        tree=doc["tree"],
        created=float(doc["created"]),
        pidns=doc.get("pidns"),
        timens=doc.get("timens"),
        uid=uid,
    )


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _identity(v: object) -> str | None:
    if not isinstance(v, list) or len(v) != 2 or not all(_is_int(x) for x in v):
        return "not a [pid, start time] pair"
    if v[0] <= 1 or v[0] > 0x3FFFFFFF:
        return f"pid {v[0]} out of range"
    if v[1] < 0 or v[1] >= 1 << 64:
        return f"start time {v[1]} out of range"
    return None


def _invalid(doc: dict) -> str | None:
    """Why a receipt's decoded fields are not valid, or None."""
    missing = [k for k in _FIELDS if k not in doc]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    for key in ("owner", "keeper", "command"):
        if key == "command" and doc[key] is None:
            continue
        why = _identity(doc[key])
        if why is not None:
            return f"field {key}: {why}"
    for key in ("sid", "pgid"):
        v = doc[key]
        if not _is_int(v):
            return f"field {key}: not an int"
        if v <= 1 or v > 0x3FFFFFFF:
            return f"field {key}: {v} out of range"
    cgroup = doc["cgroup"]
    if cgroup is not None and not (
        isinstance(cgroup, str) and cgroup.startswith("/") and "\0" not in cgroup and len(cgroup) < MAX_BYTES
    ):
        return "field cgroup: not an absolute path or null"
    if doc["mode"] not in MODES:
        return f"field mode: {doc['mode']!r} is not one of {', '.join(MODES)}"
    if (cgroup is None) != (doc["mode"] != "cgroup"):
        return "field cgroup: given in cgroup mode only, and cgroup mode needs one"
    tag = doc["tag"]
    if tag is not None and not _marker.is_tag(tag):
        return "field tag: not a tag or null"
    marker = _marker.parse_marker(doc["marker"]) if isinstance(doc["marker"], str) else None
    if marker is None:
        return "field marker: not a PROCTREE_OWNER value"
    if (marker.pid, marker.start_time) != tuple(doc["owner"]) or marker.tag != tag:
        return "field marker: does not name the owner and tag"
    if not isinstance(doc["tree"], str) or _marker.parse_tree_id(doc["tree"]) is None:
        return "field tree: not a PROCTREE_TREE value"
    created = doc["created"]
    if not (_is_int(created) or isinstance(created, float)) or not (0 <= created < 1e11):
        return "field created: not a time"
    for key in ("pidns", "timens"):
        v = doc.get(key)
        if v is not None and not (_is_int(v) and 0 <= v < 1 << 64):
            return f"field {key}: not a namespace inode or null"
    return None
