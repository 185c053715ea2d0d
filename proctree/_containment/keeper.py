"""The keeper: the small process that holds a contained tree together.

``spawn()`` starts this file as ``python -I -S _keeper.py ...``; the keeper
becomes session leader (setsid, falling back to setpgid), a child subreaper
(subreaper mode; in cgroup mode the cgroup holds the tree), and starts the
command in its own process group with posix_spawn. In cgroup mode the owner
moves the keeper into the tree's cgroup while it starts up (the move waits for
an RCU grace period, ~7 ms, which then overlaps the interpreter's start), the
command is born there, and the keeper moves back out. Then it:

* reports to the owner on a status pipe (protocol.py: the command line and
  the status lines): ``ok <pid> <start>`` once the command runs,
  ``err <errno> <stage>`` if it could not start, ``exit <waitstatus>`` when it ends;
* reaps every zombie that reparents to it;
* forwards HUP, INT, QUIT, TERM, USR1, USR2 and WINCH to the command's process group;
* when the command ends, tears down what it left (unless keep_orphans) and
  exits with the command's status (re-raising a fatal signal on itself);
* when the owner dies, however it dies, tears the whole tree down within about
  the grace and exits. See _ownerwatch for how death is proven.

It must never signal anything but its own descendants (or members of the
tree's own cgroup), each checked by pid and start time, and never itself or
its parent. Stdlib only, imported lazily where it costs startup time.

Nothing outside this file imports it: the owner side uses the teardown
engine and owner.py, and speaks to the keeper through protocol.py only.
"""

import errno
import os
import select
import sys
import time

try:
    import _signal as signal  # the C module: the signal wrapper imports enum (~5 ms of keeper startup)
except ImportError:
    import signal

try:
    from . import cgroup as _cgroup
    from . import ownerwatch as _ownerwatch
    from . import protocol as _protocol
except ImportError:  # run as a script (python -I puts no script dir on sys.path)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import cgroup as _cgroup
    import ownerwatch as _ownerwatch
    import protocol as _protocol

FORWARD = _protocol.FORWARD
# The keeper's own pidfd decision (PROCTREE_NO_PIDFD=1 forces the start-time fallback, as on the owner side).
USE_PIDFD = os.environ.get("PROCTREE_NO_PIDFD") != "1" and hasattr(os, "pidfd_open")
# Sent by PR_SET_PDEATHSIG where no pidfd can watch the owner: a wakeup, never forwarded.
PDEATH_SIG = signal.SIGALRM
MAX_PROCS = 16384


# ---------------------------------------------------------------------------
# /proc reading (Linux) -- kept here so the keeper needs no compiled core.

_HAVE_PROC = os.path.isdir("/proc/self/task")
_binding = None


def _core():
    """The package's compiled core, for systems without /proc (macOS); loaded only when needed."""
    global _binding
    if _binding is None:
        # this file is <site>/proctree/_containment/keeper.py
        parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        if parent not in sys.path:
            sys.path.append(parent)
        if sys.flags.no_site:
            # spawn() starts the keeper with -S (no site: less startup where
            # /proc needs no core), but the core's cffi backend is installed
            # in site-packages: add them now, on the platforms that need it.
            import site

            site.main()
        from proctree._table import binding as b

        _binding = b
    return _binding


def read_stat(pid):
    """(pid, ppid, pgid, sid, uid, state, start_time, name) -- a Proc's fields -- or None if gone."""
    if not _HAVE_PROC:
        try:
            return tuple(_core().proc(pid))
        except Exception:
            return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
    # The name may hold ')' and spaces: it runs from the first '(' to the last ')'.
    lp, rp = data.find(b"("), data.rfind(b")")
    if lp < 0 or rp < 0:
        return None
    rest = data[rp + 2 :].split()
    try:
        return (
            pid,
            int(rest[1]),
            int(rest[2]),
            int(rest[3]),
            uid,
            rest[0].decode("ascii", "replace"),
            int(rest[19]),
            os.fsdecode(data[lp + 1 : rp]),
        )
    except (IndexError, ValueError):
        return None


def child_pids(pid):
    """Direct children of pid, over all its threads (a thread may have forked)."""
    out = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(x) for x in f.read().split())
        except OSError:
            pass
    return out


def session_members(sid, cap=MAX_PROCS):
    """Processes in session sid (its leader excluded) as {pid: stat}: a full scan, for session mode."""
    out = {}
    if not _HAVE_PROC:
        snap = _core().snapshot()
        for pid in snap:
            p = snap[pid]
            if p.sid == sid and pid != sid and len(out) < cap:
                out[pid] = tuple(p)
        return out
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != sid and len(out) < cap:
            st = read_stat(int(name))
            if st is not None and st[3] == sid:
                out[st[0]] = st
    return out


def walk(root, cap=MAX_PROCS):
    """Live descendants of root (root excluded) as {pid: stat}, breadth-first, at most cap."""
    if not _HAVE_PROC:
        snap = _core().snapshot()
        try:
            return {pid: tuple(snap[pid]) for pid in snap.descendant_pids(root)[:cap]}
        except Exception:  # root gone
            return {}
    found = {}
    queue = [root]
    seen = {root}
    while queue and len(found) < cap:
        nxt = []
        for parent in queue:
            for c in child_pids(parent):
                if c in seen:
                    continue
                seen.add(c)
                st = read_stat(c)
                if st is not None and st[1] == parent:
                    found[c] = st
                    nxt.append(c)
        queue = nxt
    return found


def walk_by_scan(root, cap=MAX_PROCS):
    """Live descendants of root by one full scan of /proc (ppid links).

    Slower than walk(), but it cannot skip a process that stays put, as the
    kernel's children lists can while siblings exit (and it works where those
    lists are missing): the teardown confirms every empty answer with it."""
    if not _HAVE_PROC:
        return walk(root, cap)  # walk() is already a full snapshot there
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = read_stat(int(name))
            if st is not None:
                stats[st[0]] = st
    kids = {}
    for pid, st in stats.items():
        kids.setdefault(st[1], []).append(pid)
    found = {}
    queue = [root]
    while queue and len(found) < cap:
        for c in kids.get(queue.pop(), ()):
            if c != root and c not in found:
                found[c] = stats[c]
                queue.append(c)
    return found


TREE_ENV = b"PROCTREE_TREE="
ENVIRON_MAX = 1 << 20  # bytes of one process's environment read at most


def tree_id_of_env(env):
    """This tree's PROCTREE_TREE value (32 lowercase hex chars) from an environment mapping, or None."""
    value = env.get("PROCTREE_TREE", "")
    if len(value) == 32 and all(c in "0123456789abcdef" for c in value):
        return value
    return None


def marked(tree_id, since, cap=MAX_PROCS):
    """Processes whose environment carries PROCTREE_TREE=tree_id and that started after since, as {pid: stat}.

    Session mode follows its own marker to daemons that left the session.
    Linux only (/proc/<pid>/environ; macOS is the native keeper's job): a
    process whose environment cannot be read, or is over ENVIRON_MAX, is
    skipped. since is the keeper's (start time, pid): a process that started
    before it (in the same clock tick: with a lower pid, as pids are handed out
    in order) is no member, whatever it carries; the stat is read again after
    the environment so that both name one process.
    """
    out = {}
    if not _HAVE_PROC:
        return out
    if tree_id is None:
        return out
    needle = TREE_ENV + tree_id.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or len(out) >= cap:
            continue
        st = read_stat(int(name))
        if st is None or (st[6], st[0]) <= since:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                data = f.read(ENVIRON_MAX + 1)
        except OSError:
            continue
        if len(data) > ENVIRON_MAX or needle not in data.split(b"\0"):
            continue
        again = read_stat(st[0])
        if again is not None and again[6] == st[6]:
            out[st[0]] = again
    return out


# ---------------------------------------------------------------------------
# Identity-checked signalling and the teardown.


def send(st, sig, protect=()):
    """Signal the process recorded in st if it is still that process. Returns 'sent', 'gone' or 'denied'."""
    pid, start = st[0], st[6]
    if pid <= 1 or pid in protect or pid == os.getpid():
        return "gone"
    fd = None
    try:
        if USE_PIDFD:
            fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return "gone"
    except (AttributeError, OSError):
        fd = None
    try:
        # With a pidfd held, this check cannot race a pid reuse; without one
        # (old kernel) the window is the few microseconds to the kill.
        now = read_stat(pid)
        if now is None or now[6] != start:
            return "gone"
        if fd is not None and hasattr(signal, "pidfd_send_signal"):
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
        return "sent"
    except ProcessLookupError:
        return "gone"
    except PermissionError:
        return "denied"
    finally:
        if fd is not None:
            os.close(fd)


def teardown(root, grace, cgroup=None, reap=None, protect=(), wake=None, cap=MAX_PROCS, session=None, marks=None):
    """End every live descendant of root (root itself spared), every member of cgroup,
    every process in session (when given: session mode, where that is all we know),
    and every process marks(cap) returns ({pid: stat}: those carrying the tree's marker).

    SIGTERM + SIGCONT each, wait up to grace (re-scanning, so late joiners are
    handled too), then SIGKILL (cgroup.kill for a cgroup) and confirm.
    reap() is called while waiting (the keeper reaps its zombies); wake(t)
    sleeps up to t seconds or until something happened. Returns a dict of
    stat tuples: found, exited, killed, survivors, late, denied; and elapsed.
    """
    t0 = time.monotonic()
    protect = set(protect) | {os.getpid()}
    marked_at = [None]

    def scan(full=False):
        cur = {}
        if cgroup is not None:
            for pid in _cgroup.pids(cgroup)[:cap]:
                st = read_stat(pid)
                if st is not None:
                    cur[pid] = st
        if root is not None:
            cur.update((walk_by_scan if full else walk)(root, cap))
        if session is not None:
            cur.update(session_members(session, cap))
        # Reading every environment is the costly scan: at most every 0.1 s, and on every full scan.
        if marks is not None and (full or marked_at[0] is None or time.monotonic() - marked_at[0] >= 0.1):
            marked_at[0] = time.monotonic()
            for pid, st in marks(cap).items():
                cur.setdefault(pid, st)
        live = {st[:1] + st[6:7]: st for pid, st in cur.items() if st[5] not in ("Z", "X") and pid not in protect}
        if not live and (root is not None or marks is not None) and not full:
            return scan(full=True)  # "nothing left" ends the teardown: never on a children-list read alone
        return live

    def nap(t):
        if wake is not None:
            wake(t)
        else:
            time.sleep(t)

    found, late, killed, denied = {}, {}, {}, {}
    cur = scan()
    found.update(cur)
    for key, st in cur.items():
        if send(st, signal.SIGTERM, protect) == "denied":
            denied[key] = st
        send(st, signal.SIGCONT, protect)
    deadline = t0 + grace
    pause = 0.002
    while cur:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        nap(min(pause, left))
        pause = min(pause * 2, 0.02)
        if reap is not None:
            reap()
        cur = scan()
        for key, st in cur.items():
            if key not in found:
                found[key] = late[key] = st
                send(st, signal.SIGTERM, protect)
                send(st, signal.SIGCONT, protect)
    for _ in range(100):  # bounded: ~2 s of SIGKILL rounds at most
        if not cur:
            break
        if cgroup is not None:
            try:
                _cgroup.kill(cgroup, use_pidfd=USE_PIDFD)
            except OSError:
                pass
        for key, st in cur.items():
            found.setdefault(key, st)
            if send(st, signal.SIGKILL, protect) == "denied":
                denied[key] = st
            else:
                killed.setdefault(key, st)
        nap(0.005)
        if reap is not None:
            reap()
        cur = scan()
    exited = {k: v for k, v in found.items() if k not in killed and k not in cur}
    return {
        "found": found,
        "exited": exited,
        "killed": killed,
        "survivors": cur,
        "late": late,
        "denied": denied,
        "elapsed": time.monotonic() - t0,
    }


# ---------------------------------------------------------------------------
# The keeper process.


def _wake_pipe():
    """(read fd, write fd) of a non-blocking close-on-exec pipe, on every platform.

    os.pipe2 is Linux-only (macOS's libc has no pipe2): os.pipe() already sets
    close-on-exec (PEP 446), and the keeper is single-threaded here, so no
    other thread can fork between the two calls."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    return r, w


class _Keeper:
    def __init__(self, status_fd, mode, owner, grace, keep_orphans, cgroup, restore_signals, go_fd=None, receipts=None):
        self.status_fd = status_fd
        self.go_fd = go_fd
        self.mode = mode
        self.owner = owner
        self.grace = grace
        self.keep_orphans = keep_orphans
        self.cgroup = cgroup
        self.restore_signals = restore_signals
        self.receipts = receipts
        # Session mode follows the tree's own PROCTREE_TREE marker (which the
        # command inherits from us) to daemons that left the session.
        self.tree_id = tree_id_of_env(os.environ) if mode == "session" else None
        self.start_time = None  # ours, read when first needed
        self.cmd = None
        self.cmd_status = None
        self.pending = []
        self.wake_r, self.wake_w = _wake_pipe()

    def say(self, line):
        if self.status_fd is None:
            return
        try:
            os.write(self.status_fd, line.encode() + b"\n")
        except OSError:  # the owner is gone; its death is handled by the main loop
            pass

    def _on_signal(self, signum, frame):
        if signum in FORWARD:
            self.pending.append(signum)

    def install_signals(self):
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        for sig in FORWARD + (signal.SIGCHLD, PDEATH_SIG):
            signal.signal(sig, self._on_signal)

    def wake(self, timeout, extra=()):
        try:
            r, _, _ = select.select([self.wake_r, *extra], [], [], max(timeout, 0))
        except InterruptedError:
            r = []
        if self.wake_r in r:
            try:
                while os.read(self.wake_r, 512):
                    pass
            except OSError:
                pass
        return r

    def reap(self):
        """Reap every zombie child; record the command's status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False  # no children left
            if pid == 0:
                return True
            if pid == self.cmd and self.cmd_status is None:
                self.cmd_status = status
                self.say(_protocol.exit_line(status))

    def forward(self):
        while self.pending:
            sig = self.pending.pop(0)
            if self.cmd is None or self.cmd_status is not None:
                continue  # not reaped yet <=> its pid (and group) is still ours
            try:
                os.killpg(self.cmd, sig)
            except OSError:
                try:
                    os.kill(self.cmd, sig)
                except OSError:
                    pass

    def start(self, exe, argv):
        """Start the command; returns True once it runs, else reports and returns False.

        posix_spawn (vfork-style in glibc and on macOS): no copy-on-write
        faults of a Python heap in a forked child, and exec errors come back as
        its return value; 3-6 ms faster here than fork + an error pipe.
        """
        sigdef = []
        if self.restore_signals:  # Python ignores these; Popen restores them too
            sigdef = [getattr(signal, n) for n in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, n)]
        try:
            # setpgroup=0: its own group, so forwarded signals reach its children too.
            pid = os.posix_spawnp(exe, argv, os.environ, setpgroup=0, setsigdef=sigdef)
        except OSError as exc:
            self.cmd_status = 0
            if self.cgroup is not None:
                self.leave_cgroup()  # else the cgroup cannot be removed while we live
            self.say(_protocol.err_line(exc.errno or 0, "exec"))
            return False
        self.cmd = pid
        if self.cgroup is not None:
            self.leave_cgroup()  # before "ok": once spawn() returns, the cgroup holds the tree alone
        st = read_stat(pid)
        self.say(_protocol.ok_line(pid, st[6] if st else 0))
        return True

    def wait_for_cgroup(self, go_fd):
        """cgroup mode: the owner moves us into the tree's cgroup while we start up, then says go."""
        try:
            go = os.read(go_fd, 1)
        except OSError:
            go = b""
        os.close(go_fd)
        if go != b"1":
            self.say(_protocol.err_line(errno.EPERM, "cgroup"))
            return False
        return True

    def leave_cgroup(self):
        """Back to the owner's cgroup, so that killing and removing the tree's is ours to do."""
        base = os.path.dirname(os.path.dirname(self.cgroup))
        try:
            with open(os.path.join(base, "cgroup.procs"), "w") as f:
                f.write("0")  # "0": the writing process
        except OSError:
            pass  # we stay inside: cgroup.kill will end us with the tree, and the owner removes it

    def owner_alive(self):
        return os.getppid() == self.owner

    def run(self, exe, argv):
        self.install_signals()
        watch = _ownerwatch.watch_owner(self.owner)
        if watch is None:
            _ownerwatch.parent_death_signal(PDEATH_SIG)  # a wakeup only; see _ownerwatch
        if not self.owner_alive():  # it died before we could watch it
            self.say(_protocol.err_line(0, "owner"))
            return 1
        if self.go_fd is not None and not self.wait_for_cgroup(self.go_fd):
            if not self.owner_alive():  # it died mid-spawn: nobody else will remove the cgroup
                self.leave_cgroup()
                self.cleanup_cgroup()
            return 126
        started = self.start(exe, argv)
        # The command owns our stdio now; hold none of it ourselves, so the
        # owner sees EOF on its pipes when the command's side closes them.
        _detach_stdio()
        if not started:
            self.cleanup_cgroup()
            return 127
        extra = [watch] if watch is not None else []
        while True:
            children = self.reap()
            if self.cgroup is not None:
                children = children or _cgroup.populated(self.cgroup)
            self.forward()
            if not self.owner_alive():
                self.status_fd = None
                self.end_receipt(self.end_tree())
                return self.exit_code()
            if self.cmd_status is not None and (not self.keep_orphans or not children):
                # Session mode has no subreaper: what the command left reparented
                # to init, and only a scan of our session (and of its marker) finds it.
                clean = True
                if children or (self.mode == "session" and not self.keep_orphans):
                    clean = self.end_tree()
                elif self.mode == "session":
                    # keep_orphans: what left for init may still run; the receipt stays for it.
                    clean = not session_members(os.getpid()) and not self.marked()
                self.cleanup_cgroup()
                self.end_receipt(clean)
                return self.exit_code()
            # Without an owner watch (kernels before pidfds) getppid() is polled; so
            # is a cgroup whose orphans (init's children, no SIGCHLD for us) we keep.
            polling = not extra or (self.cmd_status is not None and self.cgroup is not None)
            self.wake(0.25 if polling else 30.0, extra)

    def end_tree(self):
        """Tear the tree down; True if nothing of it survived (and no scan was cut short)."""
        result = teardown(
            os.getpid(),
            self.grace,
            cgroup=self.cgroup,
            reap=self.reap,
            protect={self.owner},
            wake=self.wake,
            session=os.getpid() if self.mode == "session" else None,
            marks=self.marked if self.tree_id is not None else None,
        )
        self.reap()
        self.cleanup_cgroup()
        return not result["survivors"] and len(result["found"]) < MAX_PROCS

    def marked(self, cap=MAX_PROCS):
        """Processes carrying this tree's PROCTREE_TREE that started at or after us (session mode, Linux)."""
        if self.tree_id is None:
            return {}
        if self.start_time is None:
            me = read_stat(os.getpid())
            if me is None:
                return {}  # cannot tell a member from an older process: take none
            self.start_time = me[6]
        return marked(self.tree_id, (self.start_time, os.getpid()), cap)

    def end_receipt(self, clean):
        """The tree ended with nothing left: remove its receipt (the owner may already have)."""
        if not clean or self.receipts is None:
            return
        me = read_stat(os.getpid())
        if me is None:
            return
        try:
            os.unlink(os.path.join(self.receipts, _protocol.receipt_name(os.getpid(), me[6])))
        except OSError:
            pass  # gone already, or not ours to remove

    def cleanup_cgroup(self):
        if self.cgroup is not None:
            try:
                _cgroup.remove(self.cgroup)
            except (OSError, ValueError):
                pass

    def exit_code(self):
        status = self.cmd_status or 0
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            # Die of the same signal, as a shell does, so our parent sees it.
            try:
                import resource

                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            except (ImportError, ValueError, OSError):
                pass
            signal.set_wakeup_fd(-1)
            if sig != signal.SIGKILL:  # SIGKILL has no handler to reset (signal() refuses it)
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
            os.kill(os.getpid(), sig)
            return 128 + sig
        return os.waitstatus_to_exitcode(status)


def main(argv):
    try:
        args = _protocol.KeeperArgs.from_argv(argv[1:])
    except _protocol.ProtocolError as exc:
        sys.stderr.write(f"proctree keeper: {exc}\n")
        return 2
    status_fd, go_fd, mode, cgroup = args.status_fd, args.go_fd, args.mode, args.cgroup
    os.set_inheritable(status_fd, False)
    if go_fd is not None:
        os.set_inheritable(go_fd, False)
    try:
        # Leave the caller's session and terminal (SIGTTIN/SIGTTOU). spawn()
        # already did (Popen start_new_session); this is for other starters.
        os.setsid()
    except OSError:
        try:
            os.setpgid(0, 0)
        except OSError:
            pass  # never fail the spawn for it
    keeper = _Keeper(
        status_fd,
        mode,
        args.owner_pid,
        args.grace,
        args.keep_orphans,
        cgroup,
        args.restore_signals,
        go_fd,
        args.receipts,
    )
    # In cgroup mode the cgroup already holds every member, so the keeper skips
    # PR_SET_CHILD_SUBREAPER (and the ctypes import it costs); orphans are reaped by init.
    if mode == "subreaper":
        try:
            _ownerwatch.become_subreaper()
        except OSError as exc:
            keeper.say(_protocol.err_line(exc.errno or 0, "subreaper"))
            return 126
    return keeper.run(args.exe if args.exe is not None else args.argv[0], list(args.argv))


def _detach_stdio():
    """Hand our stdio and passed fds to the command alone: /dev/null on 0-2, close the rest we inherited."""
    fd = os.open(os.devnull, os.O_RDWR)
    for i in (0, 1, 2):
        os.dup2(fd, i)
    if fd > 2:
        os.close(fd)
    try:
        fds = [int(x) for x in os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd")]
    except OSError:
        return
    for fd in fds:
        # Inheritable means inherited from the owner (pass_fds): ours are all CLOEXEC.
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    os.close(fd)
            except OSError:
                pass


if __name__ == "__main__":
    sys.exit(main(sys.argv))
