"""cgroup v2 plumbing for contained spawning: find the hierarchy, make, end and remove a tree's cgroup.

Layout: ``<v2 mount><caller's cgroup>/proctree-<owner pid>-<owner start>-<pid ns>-<time ns>/<tree>``
(the namespace inodes place the owner's numbers; older versions wrote
``proctree-<owner pid>-<owner start>``, which is still read).
The per-owner parent is created by us and named after our identity, and every
tree cgroup lives under it. This module must never kill, freeze or remove a
cgroup that is not below such a parent it made: ``is_ours`` is checked by every
function that writes to a cgroup.
"""

import errno
import os
import signal
import time

from .._teardown import signals as _signals

# cgroup v2 exists on Linux only; callers reach this module in cgroup mode only.
LINUX_ONLY = True

PARENT_PREFIX = "proctree-"
# A proctree.Popen command's cgroup, one level below a tree cgroup (the owner's holding tree).
COMMAND_PREFIX = "cmd-"


class Unavailable(OSError):
    """cgroup containment cannot work here; str() says why."""


def _unescape(field):
    # mountinfo escapes space, tab, newline and backslash as \ooo. (No re:
    # the keeper imports this module, and re costs it 4 ms of startup.)
    out, i = [], 0
    while i < len(field):
        c = field[i]
        if c == "\\" and len(field) - i >= 4 and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _is_parent_name(name):
    # proctree-<digits>-<digits>, or with -<pid ns>-<time ns> after them
    parts = name.split("-")
    return len(parts) in (3, 5) and parts[0] == "proctree" and all(p.isdigit() for p in parts[1:])


def parent_name(owner_pid, owner_start):
    """proctree-<pid>-<start>-<pid ns>-<time ns> of the calling owner (the legacy name where /proc/self/ns is unreadable)."""
    name = f"{PARENT_PREFIX}{owner_pid}-{owner_start}"
    try:
        pidns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return name
    try:
        timens = os.stat("/proc/self/ns/time").st_ino
    except FileNotFoundError:
        timens = 0  # a kernel without time namespaces
    except OSError:
        return name
    return f"{name}-{pidns}-{timens}"


def find_mount(mountinfo="/proc/self/mountinfo"):
    """The mount point of the cgroup v2 hierarchy, or None (also when mountinfo cannot be read)."""
    try:
        return _read_mount(mountinfo)
    except OSError:
        return None


def _read_mount(mountinfo="/proc/self/mountinfo"):
    """find_mount(), but a mountinfo that cannot be read (EMFILE, ENOMEM) raises OSError instead of None."""
    with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
        lines = f.read().splitlines()
    for line in lines:
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fstype = right.split(" ", 1)[0]
        fields = left.split(" ")
        if fstype == "cgroup2" and len(fields) >= 5 and fields[3] == "/":
            return _unescape(fields[4])
    return None


def own_cgroup(pid="self"):
    """This process's cgroup v2 path (relative to the mount, starting with '/'), or None."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                if line.startswith("0::"):
                    path = line[3:].rstrip("\n")
                    # A process in a cgroup removed under it reads "/x (deleted)".
                    return None if path.endswith(" (deleted)") else path
    except OSError:
        pass
    return None


def base_dir():
    """Where per-owner parents go (the caller's own cgroup directory). Raises Unavailable."""
    mount = find_mount()
    if mount is None:
        raise Unavailable(errno.ENOENT, "no cgroup v2 hierarchy is mounted (see /proc/self/mountinfo)")
    rel = own_cgroup()
    if rel is None:
        raise Unavailable(errno.ENOENT, "this process has no cgroup v2 path in /proc/self/cgroup")
    base = os.path.normpath(mount + rel)
    if not os.path.isdir(base):
        raise Unavailable(errno.ENOENT, f"this process's cgroup {base} is not visible (another cgroup namespace?)")
    return base


def is_ours(path):
    """True when path is a tree cgroup directly below a proctree-<pid>-<start> parent, or a
    cmd-* cgroup directly below such a tree cgroup (a proctree.Popen command's), inside the
    cgroup v2 mount (a look-alike directory elsewhere is not a cgroup of ours)."""
    return _is_ours_below(find_mount(), path)


def _is_ours_below(mount, path):
    path = os.path.normpath(path)
    if mount is None or os.path.commonpath([mount, path]) != os.path.normpath(mount):
        return False
    parent = os.path.dirname(path)
    if _is_parent_name(os.path.basename(parent)):
        return True
    # A proctree.Popen command's own cgroup, nested in its owner's holding tree (popenhold.py).
    return os.path.basename(path).startswith(COMMAND_PREFIX) and _is_parent_name(
        os.path.basename(os.path.dirname(parent))
    )


def _require_ours(path):
    """ValueError unless path is a cgroup of ours; Unavailable when that cannot be read (no descriptor left:
    not a proof that it is not ours)."""
    try:
        mount = _read_mount()
    except OSError as exc:
        raise Unavailable(exc.errno, f"cannot check {path}: {exc.strerror}") from exc
    if not _is_ours_below(mount, path):
        raise ValueError(f"refusing to touch {path}: not a cgroup proctree created")


def create(owner_pid, owner_start, name):
    """Make <base>/proctree-<owner>-<start>/<name> and return its path. Raises Unavailable."""
    base = base_dir()
    parent = os.path.join(base, parent_name(owner_pid, owner_start))
    path = os.path.join(parent, name)
    for _ in range(3):  # the parent can be removed by our own cleanup between the two mkdirs
        try:
            os.mkdir(parent)
        except FileExistsError:
            pass
        except OSError as exc:
            raise Unavailable(
                exc.errno,
                f"cannot create a cgroup under {base}: {exc.strerror} (cgroup v2 needs root or a delegated subtree)",
            ) from exc
        try:
            os.mkdir(path)
            break
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise Unavailable(exc.errno, f"cannot create cgroup {path}: {exc.strerror}") from exc
    else:
        raise Unavailable(errno.ENOENT, f"cannot create cgroup {path}: its parent keeps disappearing")
    if not os.access(os.path.join(path, "cgroup.procs"), os.W_OK):
        remove(path)
        raise Unavailable(errno.EACCES, f"cgroup {path} was created but its cgroup.procs is not writable")
    return path


def _procs_of(path):
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []
    except OSError as exc:
        if exc.errno == errno.ENODEV:  # removed while we read
            return []
        raise


def pids(path, limit=4096):
    """Pids in the cgroup and the cgroups nested below it (a member's own trees), or [] when gone.

    A member in a pid namespace this process cannot see (cgroup.procs lists it
    as 0) is left out: members() counts those.
    """
    return members(path, limit)[0]


def members(path, limit=4096):
    """(the pids visible here, how many members cgroup.procs lists as 0) for the cgroup and those below it.

    The kernel writes 0 for a member outside the reader's pid namespace: such a
    cgroup is not empty, and its members are not ours to number.
    """
    raw = _procs_of(path)
    try:
        subdirs = [e.path for e in os.scandir(path) if e.is_dir(follow_symlinks=False)]
    except OSError:
        subdirs = []
    seen = 0
    while subdirs and seen < limit:  # bounded: at most limit nested cgroups
        d = subdirs.pop()
        seen += 1
        raw.extend(_procs_of(d))
        try:
            subdirs.extend(e.path for e in os.scandir(d) if e.is_dir(follow_symlinks=False))
        except OSError:
            pass
    visible = [p for p in raw if p > 0]
    return visible, len(raw) - len(visible)


def populated(path):
    """True while any process (zombies excluded, as the kernel counts) is in the cgroup."""
    try:
        with open(os.path.join(path, "cgroup.events")) as f:
            for line in f:
                k, _, v = line.partition(" ")
                if k == "populated":
                    return v.strip() != "0"
    except (FileNotFoundError, OSError):
        return False
    return bool(pids(path))


def has_kill(path):
    return os.path.exists(os.path.join(path, "cgroup.kill"))


def kill(path, use_pidfd=True):
    """SIGKILL everything in the cgroup: cgroup.kill (5.14+), else freeze, SIGKILL each, thaw.

    use_pidfd: whether the fallback may hold members by pidfd; the caller's
    own capability decision (each side probes once, honouring PROCTREE_NO_PIDFD).
    """
    _require_ours(path)
    if has_kill(path):
        try:
            with open(os.path.join(path, "cgroup.kill"), "w") as f:
                f.write("1")
            return
        except FileNotFoundError:
            return
    _freeze_kill(path, use_pidfd)


def _freeze_kill(path, use_pidfd):
    # Frozen, nothing can fork or move out between reading cgroup.procs and the
    # kill; SIGKILL is delivered to frozen tasks once they are thawed.
    freeze = os.path.join(path, "cgroup.freeze")
    frozen = False
    try:
        with open(freeze, "w") as f:
            f.write("1")
        frozen = True
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and not _events(path).get("frozen") == "1":
            time.sleep(0.005)
    except OSError:
        pass
    try:
        mount = find_mount()
        for _ in range(10):
            ps = pids(path)
            if not ps:
                break
            for pid in ps:
                _kill_member(path, mount, pid, use_pidfd)
            if frozen:
                break
            time.sleep(0.01)
    finally:
        if frozen:
            try:
                with open(freeze, "w") as f:
                    f.write("0")
            except OSError:
                pass


def _kill_member(path, mount, pid, use_pidfd):
    """SIGKILL pid if it is still in the cgroup at path (or one nested in it).

    The pid was read from cgroup.procs, but a member that is not frozen can
    exit and its pid be reused before the kill: hold it by pidfd, then check
    its cgroup. (Without pidfds the check is only as fresh as the kill is quick.)
    """
    path = os.path.normpath(path)
    try:
        fd = _signals.open_pidfd(pid, use_pidfd)
    except ProcessLookupError:
        return
    try:
        rel = own_cgroup(pid)
        where = None if rel is None or mount is None else os.path.normpath(mount + rel)
        if where != path and not (where or "").startswith(path + "/"):
            return  # gone, or someone else now
        if fd is not None:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    finally:
        if fd is not None:
            os.close(fd)


def _events(path):
    try:
        with open(os.path.join(path, "cgroup.events")) as f:
            return dict(line.split(" ", 1) for line in f.read().split("\n") if " " in line)
    except OSError:
        return {}


def remove(path, timeout=5.0):
    """rmdir the tree cgroup (waiting for the kernel to let go), then its parent if empty. True if gone.

    The wait ends as soon as the kernel lets go (exiting members still charged to
    the cgroup hold it busy); timeout only bounds a machine so loaded that they
    take seconds.
    """
    parent = os.path.dirname(os.path.normpath(path))
    if _is_parent_name(os.path.basename(parent)) and _missing(path) and _missing(parent):
        # A tree's keeper removes its cgroup and the emptied parent itself: nothing is left to check or remove
        # (two stats, where the check below reads the whole mount table).
        return True
    _require_ours(path)
    deadline = time.monotonic() + timeout
    gone = False
    # Cgroups nested below ours (a tree member that spawned trees of its own,
    # whose keepers died in our kill) go first, deepest first; bounded.
    try:
        nested = [d for d, _, _ in os.walk(path, topdown=False) if d != path][:4096]
    except OSError:
        nested = []
    for d in nested:
        try:
            os.rmdir(d)
        except OSError:
            pass
    while True:
        try:
            os.rmdir(path)
            gone = True
            break
        except FileNotFoundError:
            gone = True
            break
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                break
            time.sleep(0.005)  # exiting tasks still charged to it
    try:
        os.rmdir(os.path.dirname(path))  # EBUSY while another tree of this owner lives
    except OSError:
        pass
    return gone


def _missing(path):
    """True only when path provably does not exist (ENOENT); a stat that fails otherwise proves nothing."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False
