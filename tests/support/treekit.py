"""Adversarial process trees for tests, started for real and always cleaned up.

Every builder starts a real tree whose processes report "role pid" lines back
through a pipe once they are in place (never guessed by sleeping), then a
final "ready". The kit records each reported process by identity (pid + start
time) as soon as it hears of it, and `cleanup()` (run by the `kit` fixture
even when the test fails) SIGCONTs and SIGKILLs whichever of those are still
the same process, then reaps its own children. Before that it also takes in
what the trees started without reporting (a forker's children): descendants
of registered processes, and members of a session led by one of its roots
while that root still holds its pid. It never signals anything else.

Use:  def test_x(kit):   # the fixture, from tests/support/plugin.py
      tree = kit.term_ignorer()
      tree.root, tree.pids, tree.role("ignorer")
"""

import functools
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import proctree

from .stubborn import ignore_polite_signals_py

READY_TIMEOUT = 30.0

# Shared prologue of every tree script: `say(role)` reports this process.
_PROLOGUE = r"""
import os, signal, sys, threading, time
FD = int(sys.argv[1])
def say(role, pid=None):
    os.write(FD, ("%s %d\n" % (role, pid or os.getpid())).encode())
def ready():
    os.write(FD, b"ready 0\n")
def idle():
    while True:
        time.sleep(1000)
def child(fn):
    # Fork a child that runs fn() and never returns into the caller's code.
    pid = os.fork()
    if pid == 0:
        try:
            fn()
        finally:
            os._exit(0)
    return pid
"""


class Tree:
    """A started tree: root (Popen), reported (role, pid) pairs in order."""

    def __init__(self, popen, reports):
        self.popen = popen
        self.reports = reports

    @property
    def root(self):
        return self.popen.pid

    @property
    def pids(self):
        """Every reported pid, root first if it reported itself."""
        return [pid for _, pid in self.reports]

    def role(self, name):
        """The pid reported under name (the first, if several)."""
        return self.roles(name)[0]

    def roles(self, name):
        return [pid for r, pid in self.reports if r == name]


def alive(pid, start_time=None):
    """True if pid is a live (non-zombie) process, the same one if start_time is given."""
    try:
        p = proctree.proc(pid)
    except proctree.NoSuchProcess:
        return False
    if start_time is not None and p.start_time != start_time:
        return False
    return not p.is_zombie


class Kit:
    def __init__(self):
        self.known = {}  # pid -> start_time of every process our trees reported
        self.popens = []

    # -- the machinery -----------------------------------------------------

    def start(self, body, *, new_session=True, extra_args=(), env=None, pass_fds=()):
        """Run body (after the prologue) as a tree root; return a Tree once it says ready."""
        r, w = os.pipe()
        script = _PROLOGUE + textwrap.dedent(body)
        popen = subprocess.Popen(
            [sys.executable, "-c", script, str(w), *map(str, extra_args)],
            pass_fds=(w, *pass_fds),
            start_new_session=new_session,
            env=env,
        )
        self.popens.append(popen)
        self._register(popen.pid)
        os.close(w)
        reports = []
        buf = b""
        deadline = time.monotonic() + READY_TIMEOUT
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([r], [], [], left)[0]:
                    raise RuntimeError(f"tree did not get ready in time; heard {reports}")
                data = os.read(r, 65536)
                if not data:
                    raise RuntimeError(f"tree closed its pipe before ready; heard {reports}")
                buf += data
                *lines, buf = buf.split(b"\n")
                done = False
                for line in lines:
                    role, pid = line.decode().split()
                    if role == "ready":
                        done = True
                        continue
                    reports.append((role, int(pid)))
                    self._register(int(pid))
                if done:
                    return Tree(popen, reports)
        finally:
            os.close(r)

    def _register(self, pid):
        try:
            self.known.setdefault(pid, proctree.proc(pid).start_time)
        except proctree.NoSuchProcess:
            pass  # already gone: nothing to clean up

    def register(self, pid, start_time):
        """Register a process a test learnt of another way (e.g. from a report)."""
        self.known.setdefault(pid, start_time)

    def still_alive(self):
        """Registered processes that are still the same, live process."""
        return [pid for pid, st in self.known.items() if alive(pid, st)]

    def python_env(self):
        """An environment in which a tree's own Python code can import proctree."""
        return dict(os.environ, PYTHONPATH=_PROCTREE_HOME)

    def _adopt_unreported(self):
        """Register what our trees started without reporting (a forker's children):
        descendants of registered processes, and members of the sessions our
        roots lead while each root still holds its pid (alive or an unreaped zombie)."""
        snap = proctree.snapshot()
        sessions = {p.pid for p in self.popens if p.pid in snap and snap[p.pid].start_time == self.known.get(p.pid)}
        for pid, st in list(self.known.items()):
            if pid in snap and snap[pid].start_time == st:
                for q in snap.descendants(pid):
                    self.known.setdefault(q.pid, q.start_time)
        for q in snap.values():
            if q.sid in sessions and q.pid != os.getpid():
                self.known.setdefault(q.pid, q.start_time)

    def cleanup(self):
        """CONT + KILL every process of our trees that is still the same one; reap ours."""
        self._adopt_unreported()
        # Until they are gone (zombies count): a loaded machine can take a
        # while to run a few hundred exits.
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            left = self.still_alive()
            for pid in left:
                if pid in (0, 1, os.getpid()):
                    continue
                try:
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if not left:
                break
            time.sleep(0.02)
        for p in self.popens:
            try:
                p.wait(timeout=5)
            except (subprocess.TimeoutExpired, ChildProcessError):
                pass

    # -- the builders --------------------------------------------------------

    def sleeper(self, **kw):
        """A root with one sleeping child: the cooperative case."""
        return self.start(
            """
            say("root")
            c = child(idle)
            say("child", c)
            ready()
            idle()
            """,
            **kw,
        )

    def hup_ignorer_behind_shell(self):
        """The seed's reproduction: sh runs a job that ignores SIGHUP in its own process group."""
        return self.start(
            """
            say("root")
            JOB = (
                "import os, signal, time\\n"
                "signal.signal(signal.SIGHUP, signal.SIG_IGN)\\n"
                "os.setpgid(0, 0)\\n"
                "os.write(%d, b'job %%d\\\\nready 0\\\\n' %% os.getpid())\\n"
                "time.sleep(1000)\\n"
            ) % 3
            if os.fork() == 0:
                # The shell reports itself (dash takes one-digit fds only), then
                # runs the job in the foreground.
                os.dup2(FD, 3)
                os.execv("/bin/sh", ["sh", "-c", 'echo "shell $$" >&3; "$0" -c "$1"; sleep 1000',
                                     sys.executable, JOB])
            idle()
            """
        )

    def term_ignorer(self, depth=1):
        """A child that survives the polite signals (support/stubborn.py): needs the escalation."""
        return self.start(
            f"""
            say("root")
            def ignorer():
                {ignore_polite_signals_py()}
                say("ignorer")
                ready()
                idle()
            child(ignorer)
            idle()
            """
        )

    def stopped(self):
        """A child stopped by SIGSTOP (reported once the parent saw it stop)."""
        return self.start(
            """
            say("root")
            def stopper():
                os.kill(os.getpid(), signal.SIGSTOP)
                idle()
            c = child(stopper)
            os.waitpid(c, os.WUNTRACED)
            say("stopped", c)
            ready()
            idle()
            """
        )

    def setsid_descendant(self):
        """A grandchild that started its own session but is still parented in the tree."""
        return self.start(
            """
            say("root")
            def middle():
                def leader():
                    os.setsid()
                    signal.signal(signal.SIGHUP, signal.SIG_IGN)
                    say("session_leader")
                    ready()
                    idle()
                child(leader)
                idle()
            say("middle", child(middle))
            idle()
            """
        )

    def forker(self, limit=300):
        """Survives the polite signals (support/stubborn.py), and on SIGTERM starts forking: up to `limit` children,
        one per ms, which inherit all of it."""
        return self.start(
            f"""
            LIMIT = int(sys.argv[2])
            go = threading.Event()
            {ignore_polite_signals_py()}
            signal.signal(signal.SIGTERM, lambda *a: go.set())
            say("forker")
            ready()
            while not go.is_set():
                time.sleep(0.01)
            for i in range(LIMIT):
                child(idle)
                time.sleep(0.001)
            idle()
            """,
            extra_args=(limit,),
        )

    def zombie_keeper(self):
        """A parent that never reaps its exited child (reported once it is a zombie)."""
        return self.start(
            """
            say("root")
            c = child(lambda: None)
            os.waitid(os.P_PID, c, os.WEXITED | os.WNOWAIT)
            say("zombie", c)
            ready()
            idle()
            """
        )

    def chain(self, depth=300):
        """A chain `depth` processes deep below the root; the deepest says ready."""
        return self.start(
            """
            DEPTH = int(sys.argv[2])
            say("root")
            for level in range(DEPTH):
                pid = os.fork()
                if pid:
                    idle()
                say("link")
            ready()
            idle()
            """,
            extra_args=(depth,),
        )

    def wide(self, width=1000):
        """A root with `width` sleeping children, reported by the root in one go."""
        return self.start(
            """
            WIDTH = int(sys.argv[2])
            say("root")
            kids = [child(idle) for _ in range(WIDTH)]
            os.write(FD, "".join("kid %d\\n" % k for k in kids).encode())
            ready()
            idle()
            """,
            extra_args=(width,),
        )

    def orphan_in_session(self):
        """A grandchild whose parent exited: reparented away, still in the root's session."""
        return self.start(
            """
            say("root")
            def middle():
                say("orphan", child(idle))
            m = child(middle)
            os.waitpid(m, 0)  # the middle is gone: its child reparented to init (or a subreaper)
            ready()
            idle()
            """
        )

    def thread_forker(self, n=3):
        """Children forked by a non-main thread (their parent link names a thread's list)."""
        return self.start(
            """
            say("root")
            def spawn():
                for _ in range(3):
                    say("thread_child", child(idle))
                ready()
            t = threading.Thread(target=spawn)
            t.start()
            t.join()
            idle()
            """
        )

    def member_of_nobody(self):
        """A root-owned root with a member that dropped to uid 65534 (nobody): role "nobody"."""
        return self.start(
            """
            say("root")
            def dropped():
                os.setgid(65534)
                os.setuid(65534)
                say("nobody")
                ready()
                idle()
            child(dropped)
            idle()
            """
        )

    def double_forked_daemon(self):
        """A daemon: double-forked into a session of its own, its parent gone (reaped) before ready.

        Nothing in the tree leads its group or session any more and its parent
        is init (or a subreaper): only containment (cgroup, subreaper, the
        session marker) can still name it.
        """
        return self.start(
            """
            say("root")
            r, w = os.pipe()
            def middle():
                os.setsid()
                def daemon():
                    say("daemon")
                    os.write(w, b"x")
                    idle()
                child(daemon)
            m = child(middle)
            os.read(r, 1)
            os.waitpid(m, 0)  # the middle is gone: the daemon reparented, alone in its session
            ready()
            idle()
            """
        )


def run_as_nobody(fn):
    """Run fn() in a forked child that dropped to uid 65534; return (the bytes it
    returned, its exit code). fn returns (bytes, exit code)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            data, code = fn()
            os.write(w, data)
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    return data, os.waitstatus_to_exitcode(status)


@pytest.fixture
def kit():
    k = Kit()
    try:
        yield k
    finally:
        k.cleanup()


# -- a fresh PID namespace, for tests whose failure mode is a wide kill ---------

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/, where `support` lives
# Where the proctree under test was imported from: the checkout when it was
# built in place, site-packages when the tests run against an install.
_PROCTREE_HOME = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))


@functools.cache
def pid_namespace_available():
    """(True, "") if `unshare --pid --fork --mount-proc` works here, else (False, why)."""
    try:
        r = subprocess.run(
            ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", "import os; print(os.getpid())"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"unshare unavailable: {exc}"
    if r.returncode != 0 or r.stdout.strip() != "1":
        return False, f"unshare --pid failed: {r.stderr.strip()[:200]}"
    return True, ""


def run_in_pid_namespace(script, timeout=60, env=None):
    """Run a Python script as pid 1 of a fresh PID namespace (with its own /proc).

    Whatever the script signals stays inside the namespace, and everything in
    it dies with it. Skips the calling test if namespaces are unavailable.
    """
    ok, why = pid_namespace_available()
    if not ok:
        pytest.skip(why)
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([_PROCTREE_HOME, _TESTS]))
    full_env.update(env or {})
    return subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


# Helpers every namespace script starts with: a canary that records every
# catchable signal it receives, and a way to read what it recorded.
NS_PROLOGUE = r"""
import json, math, os, signal, sys, time
import proctree
from proctree._teardown import signals as _signals

CATCHABLE = [s for s in range(1, signal.NSIG) if s not in (signal.SIGKILL, signal.SIGSTOP, 32, 33)]

def canary(new_session=False):
    # A process that writes every signal it gets to a pipe; (pid, read end).
    r, w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        if new_session:
            os.setsid()
        for s in CATCHABLE:
            try:
                signal.signal(s, lambda n, f: os.write(w, b"%d " % n))
            except (OSError, ValueError, RuntimeError):
                pass
        os.write(ready_w, b"x")
        while True:
            time.sleep(1000)
    os.close(w)
    os.read(ready_r, 1)
    os.set_blocking(r, False)
    return pid, r

def heard(r):
    try:
        return [int(x) for x in os.read(r, 65536).split()]
    except BlockingIOError:
        return []

def state(pid):
    try:
        return proctree.proc(pid).state
    except proctree.NoSuchProcess:
        return "gone"

def age_past_one_tick(p):
    # start_time has clock-tick resolution (10 ms on Linux): a pid reused within
    # the same tick has the same start time, which only a pidfd can tell apart
    # (docs/teardown.md). Make the member older than that before reusing its pid.
    from proctree._table import binding as _binding
    while _binding.now() <= p.start_time + 1:
        time.sleep(0.005)

def done(**result):
    print(json.dumps(result), flush=True)
"""


def run_ns_json(script, **env):
    """Run script (after NS_PROLOGUE) in a fresh PID namespace; return its last JSON line."""
    r = run_in_pid_namespace(NS_PROLOGUE + script, env=env)
    assert r.returncode == 0, f"namespace script failed:\n{r.stdout}\n{r.stderr}"
    assert "BYSTANDER GOT" not in r.stdout, r.stdout
    return json.loads(r.stdout.strip().splitlines()[-1])


# -- the same trees under contained spawning, and under an owner that dies -------


def _read_reports(r, wanted, timeout=READY_TIMEOUT):
    """Read "role pid" lines from fd r until every role in `wanted` was heard; return them in order.

    "ready" lines count towards `wanted` but are not returned as reports.
    """
    reports, heard, buf = [], set(), b""
    deadline = time.monotonic() + timeout
    while not wanted <= heard:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([r], [], [], left)[0]:
            raise RuntimeError(f"tree did not get ready in time; heard {reports}")
        data = os.read(r, 65536)
        if not data:
            raise RuntimeError(f"tree closed its pipe before ready; heard {reports}")
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            role, pid = line.decode().split()
            heard.add(role)
            if role != "ready":
                reports.append((role, int(pid)))
    return reports


class SpawnedTree(Tree):
    """A builder's tree started by proctree.spawn: `contained` is the proctree.Tree,
    `root` the command (the builder's root), `keeper` the keeper's pid."""

    def __init__(self, contained, reports):
        self.contained = contained
        self.reports = reports

    @property
    def root(self):
        return self.contained.pid

    @property
    def keeper(self):
        return self.contained.keeper_pid


class SpawnedKit(Kit):
    """Kit whose builders start their body under proctree.spawn(contain=mode) instead of Popen.

    The builders are Kit's own (same bodies, same reports); cleanup() ends each
    contained tree with Tree.kill() first, then does what Kit.cleanup does.
    """

    def __init__(self, mode, grace=0.5):
        super().__init__()
        self.mode = mode
        self.grace = grace
        self.contained = []

    def start(self, body, *, new_session=True, extra_args=(), env=None, pass_fds=()):
        # new_session is spawn's business here: every mode detaches the tree.
        r, w = os.pipe()
        script = _PROLOGUE + textwrap.dedent(body)
        try:
            t = proctree.spawn(
                [sys.executable, "-c", script, str(w), *map(str, extra_args)],
                contain=self.mode,
                grace=self.grace,
                pass_fds=(w, *pass_fds),
                env=env,
            )
        except BaseException:
            os.close(r)
            os.close(w)
            raise
        self.contained.append(t)
        self._register(t.keeper_pid)
        self._register(t.pid)
        os.close(w)
        try:
            reports = _read_reports(r, {"ready"})
        finally:
            os.close(r)
        for _, pid in reports:
            self._register(pid)
        return SpawnedTree(t, reports)

    def _adopt_unreported(self):
        snap = proctree.snapshot()
        for t in self.contained:
            k = t.keeper_pid
            if k in snap and snap[k].start_time == self.known.get(k):
                for q in snap.descendants(k):
                    self.known.setdefault(q.pid, q.start_time)
        super()._adopt_unreported()

    def cleanup(self):
        self._adopt_unreported()
        for t in self.contained:
            try:
                t.kill()
            except Exception:
                pass  # Kit.cleanup below ends whatever is left, by identity
        super().cleanup()
        for t in self.contained:
            for f in (t.stdin, t.stdout, t.stderr):
                if f is not None:
                    f.close()


# An owner: spawns argv[4:] under proctree.spawn(contain=argv[2], grace=argv[3]),
# passes fd argv[1] through to the tree, reports "keeper" and "cmd", then idles
# until it is killed.
_OWNER = r"""
import os, sys, time
import proctree
w, mode, grace = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
t = proctree.spawn(sys.argv[4:], contain=mode, grace=grace, pass_fds=(w,))
os.write(w, b"keeper %d\ncmd %d\n" % (t.keeper_pid, t.pid))
while True:
    time.sleep(1000)
"""


class OwnedTree(SpawnedTree):
    """A builder's tree spawned by a separate owner process (`owner`, a Popen) that a test may SIGKILL."""

    def __init__(self, owner, reports):
        self.owner = owner
        self.reports = reports

    @property
    def root(self):
        return self.role("cmd")

    @property
    def keeper(self):
        return self.role("keeper")


class OwnerKit(Kit):
    """Kit whose builders start their body under proctree.spawn in a separate owner process.

    That owner is the caller of spawn: killing it is the owner's death the
    keeper must answer. The owner and everything its tree reports are
    registered, so cleanup() ends them all, by identity, whatever happened.
    """

    def __init__(self, mode, grace=0.5):
        super().__init__()
        self.mode = mode
        self.grace = grace
        self.owned = []

    def start(self, body, *, new_session=True, extra_args=(), env=None, pass_fds=()):
        r, w = os.pipe()
        script = _PROLOGUE + textwrap.dedent(body)
        owner = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _OWNER,
                str(w),
                self.mode,
                repr(self.grace),
                sys.executable,
                "-c",
                script,
                str(w),
                *map(str, extra_args),
            ],
            pass_fds=(w, *pass_fds),
            env=self.python_env() if env is None else env,
        )
        self.popens.append(owner)
        self._register(owner.pid)
        os.close(w)
        try:
            reports = _read_reports(r, {"ready", "keeper", "cmd"})
        finally:
            os.close(r)
        for _, pid in reports:
            self._register(pid)
        tree = OwnedTree(owner, reports)
        self.owned.append(tree)
        return tree

    def _adopt_unreported(self):
        snap = proctree.snapshot()
        for t in self.owned:
            k = t.keeper
            if k in snap and snap[k].start_time == self.known.get(k):
                for q in snap.descendants(k):
                    self.known.setdefault(q.pid, q.start_time)
        super()._adopt_unreported()
