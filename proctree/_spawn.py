"""Contained spawning: spawn() starts a tree that cannot leak, and Tree ends it.

The command runs under a keeper process (_keeper.py) that is the tree's
session leader and, in subreaper mode, a child subreaper, so descendants that
double-fork reparent to it instead of to init. In cgroup mode the command also
runs in a cgroup of its own, which nothing leaves without privilege, and
teardown ends with cgroup.kill. Every member carries the PROCTREE_OWNER
marker. The keeper tears the tree down when the command ends (unless
keep_orphans) and when the owner dies, however it dies.

This module must never signal a pid it did not verify as part of the tree:
the keeper is our own child (its pid stays ours until we reap it, so nothing
walks from it after that), and cgroup members are members of a cgroup we made.
"""
import asyncio
import dataclasses
import errno
import itertools
import os
import secrets
import select
import subprocess
import sys
import threading
import time

from . import _cgroup, _keeper, _marker, _signals, _teardown
from ._errors import NoSuchProcess
from ._model import Proc
from ._report import TeardownReport
from ._validate import check_seconds

MODES = ("auto", "cgroup", "subreaper", "session")
_KEEPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_keeper.py")
_LINUX = sys.platform.startswith("linux")

# Popen keywords that would break containment, with the reason given to the caller.
REJECTED = {
    "start_new_session": "the keeper already puts the tree in a session of its own",
    "process_group": "the tree gets its own session and process group",
    "preexec_fn": "it would run in the keeper, not in the command (and is unsafe with threads)",
    "user": "the keeper would lose the right to contain the tree (run the owner as that user)",
    "group": "the keeper would lose the right to contain the tree (run the owner as that group)",
    "extra_groups": "the keeper would lose the right to contain the tree",
}

# How long spawn() waits for the keeper to report (a hung keeper must not hang us).
START_TIMEOUT = 60.0
_counter = itertools.count(1)


class ContainmentUnavailable(OSError):
    """The containment asked for cannot work here; str() says why."""


_owner_cache = (None, None)


def _owner_identity():
    """(pid, start_time) of this process, re-read after a fork."""
    global _owner_cache
    pid = os.getpid()
    if _owner_cache[0] != pid:
        from . import _binding

        _owner_cache = (pid, _binding.proc(pid).start_time)
    return _owner_cache


def _protected():
    """Pids no teardown of ours may signal: the teardown engine's set (pid 0, 1,
    this process and every ancestor of it), for the keeper's own teardowns too."""
    return set(_signals.Guard().protected)


def _check_mode(contain):
    if not isinstance(contain, str):
        raise TypeError(f"contain must be a str, not {type(contain).__name__}")
    if contain not in MODES:
        raise ValueError(f"contain must be one of {', '.join(MODES)}; got {contain!r}")
    return contain


def _argv(args, shell, executable):
    """(argv, executable to run) the way Popen would build them."""
    if isinstance(args, (str, bytes, os.PathLike)):
        args = [args]
    else:
        args = list(args)
    argv = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else a for a in args]
    for a in argv:
        if not isinstance(a, str):
            raise TypeError(f"expected str, bytes or os.PathLike object, not {type(a).__name__}")
        if "\0" in a:
            raise ValueError("embedded null byte")
    if shell:
        argv = ["/bin/sh", "-c"] + argv
    if not argv:
        raise IndexError("list index out of range")  # what Popen raises for []
    exe = os.fsdecode(executable) if executable is not None else (argv[0] if not shell else "/bin/sh")
    return argv, exe


def spawn(args, *, contain="auto", grace=2.0, keep_orphans=False, tag=None, **popen_kwargs):
    """Start args as a contained tree and return its Tree once the command runs.

    args and the Popen keywords behave as in subprocess.Popen (stdio pipes,
    cwd, env, text, pass_fds, ...) minus those in REJECTED. contain is "auto"
    (the strongest that works here), "cgroup", "subreaper" or "session".
    A missing executable raises the FileNotFoundError Popen raises.
    """
    contain = _check_mode(contain)
    grace = check_seconds(grace, "grace")
    if not isinstance(keep_orphans, bool):
        raise TypeError(f"keep_orphans must be a bool, not {type(keep_orphans).__name__}")
    tag = _marker.check_tag(tag)
    for key in popen_kwargs:
        if key in REJECTED:
            raise ValueError(f"spawn() does not accept {key}=: {REJECTED[key]}")
    shell = popen_kwargs.pop("shell", False)
    executable = popen_kwargs.pop("executable", None)
    restore_signals = popen_kwargs.pop("restore_signals", True)
    argv, exe = _argv(args, shell, executable)
    env = popen_kwargs.pop("env", None)
    env = dict(os.environ if env is None else env)
    owner_pid, owner_start = _owner_identity()
    marker = _marker.format_marker(owner_pid, owner_start, tag)
    env[_marker.ENV] = marker

    mode, reason, cgroup = _choose(contain, owner_pid, owner_start, tag)
    try:
        return _start(args, argv, exe, env, mode, reason, cgroup, grace, keep_orphans,
                      restore_signals, marker, dict(popen_kwargs))
    except ContainmentUnavailable as exc:
        if cgroup is not None:
            _cgroup.remove(cgroup)
        if contain != "auto" or mode != "cgroup":
            raise
        # The cgroup could be made but not entered (a delegation that allows
        # mkdir but not the move): the command never started, so fall back.
        fallback = f"cgroup: {exc.strerror}"
    except BaseException:
        if cgroup is not None:
            _cgroup.remove(cgroup)
        raise
    return _start(args, argv, exe, env, "subreaper" if _LINUX else "session", fallback, None, grace,
                  keep_orphans, restore_signals, marker, popen_kwargs)


def _choose(contain, owner_pid, owner_start, tag):
    """(mode, why the stronger modes were not used, cgroup path or None)."""
    reasons = []
    if contain in ("auto", "cgroup"):
        if not _LINUX:
            why = f"cgroups are Linux-only (this is {sys.platform})"
            if contain == "cgroup":
                raise ContainmentUnavailable(errno.ENOSYS, f"contain='cgroup' is unavailable: {why}")
            reasons.append(why)
        else:
            name = f"{tag or 'tree'}-{next(_counter)}-{secrets.token_hex(3)}"
            try:
                return "cgroup", None, _cgroup.create(owner_pid, owner_start, name)
            except _cgroup.Unavailable as exc:
                if contain == "cgroup":
                    raise ContainmentUnavailable(exc.errno, f"contain='cgroup' is unavailable: {exc.strerror}") from exc
                reasons.append(f"cgroup: {exc.strerror}")
    if contain in ("auto", "subreaper"):
        if _LINUX:
            return "subreaper", "; ".join(reasons) or None, None
        why = f"child subreapers are Linux-only (this is {sys.platform})"
        if contain == "subreaper":
            raise ContainmentUnavailable(errno.ENOSYS, f"contain='subreaper' is unavailable: {why}")
        reasons.append(why)
    return "session", "; ".join(reasons) or None, None


def _start(args, argv, exe, env, mode, reason, cgroup, grace, keep_orphans, restore_signals, marker, kw):
    pass_fds = tuple(kw.pop("pass_fds", ()))
    r, w = os.pipe()
    go_r = go_w = None
    if cgroup is not None:
        go_r, go_w = os.pipe()
    ours = (w,) if go_r is None else (w, go_r)
    # Popen closes every fd not in pass_fds unless close_fds=False and pass_fds
    # is empty (a non-empty pass_fds overrides close_fds=False, with a warning).
    if kw.get("close_fds", True) or pass_fds:
        pass_fds += ours
    else:  # every inheritable fd goes through: make ours so
        for fd in ours:
            os.set_inheritable(fd, True)
    owner_pid = os.getpid()
    cmd = [sys.executable, "-I", "-S", _KEEPER, str(w), str(go_r) if go_r is not None else "-", mode,
           str(owner_pid), repr(grace), "1" if keep_orphans else "0", cgroup or "-",
           "1" if restore_signals else "0", exe, "--", *argv]
    try:
        # start_new_session: the keeper leaves the caller's session and terminal
        # before its interpreter even starts, so a Ctrl-C at the terminal in
        # those ~15 ms cannot reach it (a fresh child never leads a group, so this
        # setsid cannot fail; the keeper still tries setsid/setpgid itself).
        popen = subprocess.Popen(cmd, env=env, pass_fds=pass_fds, start_new_session=True, **kw)
    except BaseException:
        for fd in (r, w, go_r, go_w):
            if fd is not None:
                os.close(fd)
        raise
    os.close(w)
    tree = Tree(args, popen, r, mode, reason, marker, cgroup, grace, keep_orphans)
    moved = None
    try:
        if cgroup is not None:
            os.close(go_r)
            # Move the keeper in while its interpreter starts: the move waits for an
            # RCU grace period (~7 ms idle), which this overlaps; the command is then
            # born in the cgroup, and the keeper moves itself back out.
            try:
                try:
                    with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                        f.write(str(popen.pid))  # our own child, unreaped: the pid is the keeper's
                    moved = True
                except OSError as exc:
                    moved = exc
                try:
                    os.write(go_w, b"1" if moved is True else b"0")
                except OSError:
                    pass  # the keeper is gone already; its status says why
            finally:
                os.close(go_w)
        line = tree._next_line(time.monotonic() + START_TIMEOUT)
    except BaseException:
        tree._abandon()
        raise
    parts = (line or "").split()
    if parts[:1] == ["ok"] and len(parts) == 3:
        tree.pid = int(parts[1])
        tree._root = Proc(tree.pid, popen.pid, tree.pid, popen.pid, os.getuid(), "R", int(parts[2]), os.path.basename(exe))
        try:
            from . import _binding

            p = _binding.proc(tree.pid)
            if p.start_time == tree._root.start_time or not _LINUX:
                tree._root = p
        except (NoSuchProcess, OSError):
            pass  # it already ended: keep what the keeper told us
        return tree
    tree._abandon(patience=5.0)  # it reported (or exited): it ends by itself at once
    if parts[:1] == ["err"] and len(parts) == 3:
        code, stage = int(parts[1]), parts[2]
        msg = os.strerror(code) if code else "unknown error"
        if stage == "exec":
            raise OSError(code, msg, exe)  # FileNotFoundError/PermissionError, as Popen
        if stage == "cgroup" and isinstance(moved, OSError):
            raise ContainmentUnavailable(moved.errno, f"contain='cgroup' failed: cannot move the keeper into "
                                                      f"{cgroup}: {moved.strerror}") from moved
        if stage in ("cgroup", "subreaper"):
            raise ContainmentUnavailable(code, f"contain={mode!r} failed in the keeper: {msg} ({stage})")
        raise OSError(code, f"the keeper could not start the command ({stage}): {msg}")
    raise subprocess.SubprocessError(f"the keeper exited before starting the command (status {popen.returncode})")


class Tree:
    """A contained process tree started by spawn().

    pid is the command's own pid; mode the containment in force ("cgroup",
    "subreaper" or "session"); marker the PROCTREE_OWNER value its members
    carry; stdin/stdout/stderr the pipes asked for, as with Popen. As a context
    manager, leaving the block tears the whole tree down.
    """

    def __init__(self, args, popen, status_fd, mode, reason, marker, cgroup, grace, keep_orphans):
        self.args = args
        self.pid = None
        self.mode = mode
        self.mode_reason = reason  # why a stronger mode was not used (contain="auto"), or None
        self.marker = marker
        self.cgroup = cgroup
        self.grace = grace
        self.keep_orphans = keep_orphans
        self.stdin, self.stdout, self.stderr = popen.stdin, popen.stdout, popen.stderr
        self._popen = popen
        self._status_fd = status_fd
        self._buf = b""
        self._eof = False
        self._status = None  # the command's raw wait status, once known
        self._root = None
        self._report = None
        self._lock = threading.RLock()

    def __repr__(self):
        return f"<proctree.Tree pid={self.pid} mode={self.mode} returncode={self.returncode}>"

    @property
    def keeper_pid(self):
        return self._popen.pid

    # -- status channel -----------------------------------------------------
    def _next_line(self, deadline):
        """The next status line from the keeper, None at EOF; TimeoutError once deadline (monotonic) has passed."""
        while b"\n" not in self._buf:
            if self._eof:
                return None
            left = max(0.0, deadline - time.monotonic())  # 0: just look
            if not select.select([self._status_fd], [], [], left)[0]:
                raise TimeoutError
            data = os.read(self._status_fd, 4096)
            if not data:
                self._eof = True
                return None
            self._buf += data
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode()

    def _pump(self, deadline):
        """Read status lines until the command's status is known or deadline (None: no limit). True if known.

        The lock is held to read what has arrived, never while waiting for
        more: a wait() in one thread must not hold up a terminate() in another.
        """
        while True:
            with self._lock:
                while self._status is None:
                    if self._status_fd is None:
                        return False
                    try:
                        line = self._next_line(0)  # a deadline long past: just look
                    except TimeoutError:
                        break  # nothing complete yet: wait below, without the lock
                    if line is None:
                        # The keeper went away without a word (killed): its own status is the best we have.
                        self._status = _rc_to_status(self._popen.wait())
                    elif line.startswith("exit "):
                        self._status = int(line.split()[1])
                if self._status is not None:
                    return True
                fd = self._status_fd
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            try:
                # Sliced: another thread's _finish may close fd under us (the next look says so).
                select.select([fd], [], [], 0.5 if left is None else min(left, 0.5))
            except (OSError, ValueError):
                pass

    @property
    def returncode(self):
        """The command's exit code (negative signal number, as Popen), or None while it runs."""
        self.poll()
        if self._status is None:
            return None
        return os.waitstatus_to_exitcode(self._status)

    def poll(self):
        self._pump(time.monotonic())
        return None if self._status is None else os.waitstatus_to_exitcode(self._status)

    def wait(self, timeout=None):
        """Wait for the command to end and return its returncode.

        Without keep_orphans this also waits (within timeout) for the keeper to
        end what the command left behind. Raises subprocess.TimeoutExpired.
        """
        deadline = None if timeout is None else time.monotonic() + check_seconds(timeout, "timeout")
        if not self._pump(deadline):
            raise subprocess.TimeoutExpired(self.args, timeout)
        if not self.keep_orphans:
            try:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                self._popen.wait(left)
                self._finish()
            except subprocess.TimeoutExpired:
                pass
        return os.waitstatus_to_exitcode(self._status)

    def join(self, timeout=None):
        """Wait until nothing of the tree is left running (with keep_orphans: the orphans too).

        Returns the command's returncode; raises subprocess.TimeoutExpired.
        """
        deadline = None if timeout is None else time.monotonic() + check_seconds(timeout, "timeout")
        rc = self.wait(timeout)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self._popen.wait(left)  # the keeper ends with its last member
        self._finish()
        return rc

    async def wait_async(self, timeout=None):
        """wait() without blocking the event loop."""
        loop = asyncio.get_running_loop()
        if self._status is None and self._status_fd is not None:
            fut = loop.create_future()
            fd = self._status_fd

            def readable():
                if self._pump(time.monotonic()) and not fut.done():
                    fut.set_result(None)

            loop.add_reader(fd, readable)
            try:
                readable()
                await asyncio.wait_for(fut, timeout)
            except asyncio.TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
            finally:
                loop.remove_reader(fd)
        return await asyncio.to_thread(self.wait, None if self.keep_orphans else 2 * self.grace + 5)

    def communicate(self, input=None, timeout=None):
        """Popen.communicate through the keeper: (stdout, stderr), then the command's status is known."""
        out = self._popen.communicate(input, timeout)
        self._pump(time.monotonic() + 5)
        self._finish()
        return out

    def send_signal(self, sig):
        """Send sig to the command.

        The signals the keeper forwards (_keeper.FORWARD) go through it, to the
        command's process group. Any other goes to the command alone, by pidfd
        after checking its start time, while the keeper still holds it
        unreaped: SIGKILL and SIGSTOP cannot be caught, and the rest would kill
        the keeper (SIGPROF, SIGABRT, ...: its orphans would escape to init) or
        be swallowed by it (SIGALRM, its wake-up).
        """
        if sig in _keeper.FORWARD:
            self._popen.send_signal(sig)  # our own child, and Popen never signals it once reaped
        else:
            self._send_direct(sig)

    def _send_direct(self, sig):
        if self.poll() is not None or self._root is None or not self._keeper_is_ours():
            return
        st = _keeper.read_stat(self.pid)
        if st is None or st[1] != self.keeper_pid or (_LINUX and st[6] != self._root.start_time):
            return
        _keeper.send(st, sig, _protected())

    # -- membership and teardown --------------------------------------------
    def _keeper_is_ours(self):
        # Until we reap it, the keeper's pid cannot be reused: walking from it is safe.
        return self._popen.returncode is None

    def members(self):
        """The live members of the tree (the command and what it started), as Proc records."""
        from . import _binding, _live

        out = {}
        if self.cgroup is not None:
            for pid in _cgroup.pids(self.cgroup):
                try:
                    p = _binding.proc(pid)
                except (NoSuchProcess, OSError):
                    continue
                out[pid] = p
        if self._keeper_is_ours():
            try:
                for p in _live.descendants(self.keeper_pid):
                    out[p.pid] = p
            except NoSuchProcess:
                pass
            if self.mode == "session" and self._keeper_is_ours():
                # Session mode: a double-forker that kept our session is still found by sid.
                for p in _binding.snapshot().values():
                    if p.sid == self.keeper_pid and p.pid != self.keeper_pid:
                        out.setdefault(p.pid, p)
        return sorted((p for p in out.values() if not p.is_zombie), key=lambda p: p.pid)

    def terminate(self, grace=None):
        """Tear the whole tree down (SIGTERM, then SIGKILL after grace) and return the TeardownReport."""
        grace = self.grace if grace is None else check_seconds(grace, "grace")
        with self._lock:
            t0 = time.monotonic()
            if self.cgroup is not None:
                rep = self._report_from(_keeper.teardown(None, grace, cgroup=self.cgroup,
                                                        protect=_protected() | {self.keeper_pid}))
            elif self._keeper_is_ours():
                try:
                    rep = _teardown.terminate_tree(self.keeper_pid, grace=grace, include_root=False,
                                                   signal_group=False)
                    rep = dataclasses.replace(rep, root=self._root, mode=self.mode)
                except NoSuchProcess:
                    # The keeper, our unreaped child, cannot vanish; if it did, what it
                    # held went to init with it and the keeper's own sweep has nothing to start from.
                    rep = TeardownReport(root=self._root, mode=self.mode)
            else:
                rep = TeardownReport(root=self._root, mode=self.mode)
            self._finish()
            rep = dataclasses.replace(rep, elapsed=time.monotonic() - t0,
                                      extra={**rep.extra, "keeper": self.keeper_pid,
                                             **({"cgroup": self.cgroup} if self.cgroup else {})})
            self._report = rep
            return rep

    def kill(self):
        """terminate() with no grace: SIGKILL at once."""
        return self.terminate(grace=0)

    async def terminate_async(self, grace=None):
        """terminate() without blocking the event loop."""
        return await asyncio.to_thread(self.terminate, grace)

    def _report_from(self, d):
        conv = lambda m: tuple(Proc(*st) for st in m.values())  # noqa: E731
        return TeardownReport(root=self._root, found=conv(d["found"]), exited=conv(d["exited"]),
                              killed=conv(d["killed"]), survivors=conv(d["survivors"]),
                              late=conv(d["late"]), denied=conv(d["denied"]),
                              elapsed=d["elapsed"], mode=self.mode)

    def _finish(self):
        """Reap the keeper (it ends once its tree is gone) and remove the cgroup."""
        with self._lock:
            if self._popen.returncode is None:
                try:
                    self._popen.wait(max(2.0, self.grace + 1.0))
                except subprocess.TimeoutExpired:
                    # Still busy: its tree is gone (we just ended it), so end it too.
                    self._popen.kill()
                    self._popen.wait()
            self._pump(time.monotonic() + 0.5)
            if self._status is None:
                self._status = _rc_to_status(self._popen.returncode)
            if self._status_fd is not None:
                os.close(self._status_fd)
                self._status_fd = None
            if self.cgroup is not None:
                if _cgroup.populated(self.cgroup):
                    _keeper.teardown(None, 0, cgroup=self.cgroup, protect=_protected())
                _cgroup.remove(self.cgroup)

    def _abandon(self, patience=0.2):
        """spawn() failed or was interrupted: make sure the keeper and anything it started are gone.

        patience: how long the keeper may take to exit by itself (short when
        interrupted, where it may be about to start the command).
        """
        try:
            self._popen.wait(patience)
        except subprocess.TimeoutExpired:
            _keeper.teardown(self.keeper_pid, 0, cgroup=self.cgroup, protect=_protected())
            self._popen.kill()
            self._popen.wait()
        for f in (self.stdin, self.stdout, self.stderr):
            if f is not None:
                f.close()
        if self._status_fd is not None:
            os.close(self._status_fd)
            self._status_fd = None

    def __del__(self):
        # A dropped Tree keeps running until its owner dies (the keeper sees to
        # that); only our end of the status pipe is released here.
        fd = getattr(self, "_status_fd", None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
            self._status_fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.terminate()
        finally:
            for f in (self.stdin, self.stdout, self.stderr):
                if f is not None:
                    try:
                        f.close()
                    except OSError:
                        pass


def _rc_to_status(rc):
    """A Popen returncode back to a raw wait status."""
    if rc is None:
        return None
    if rc < 0:
        return -rc & 0x7F
    return (rc & 0xFF) << 8


async def spawn_async(args, **kwargs):
    """spawn() without blocking the event loop (the keeper's start runs in a thread).

    Spawning from a worker thread is safe: the keeper watches the owner
    process, not the thread that forked it.
    """
    return await asyncio.to_thread(spawn, args, **kwargs)
