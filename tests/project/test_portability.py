"""Portability: no Linux-only call outside code guarded for Linux.

There is no Mac here, so an AST scan stands in: every module under proctree/
(and Python source embedded in string literals, which the package runs with
``python -c``) fails on any use of a Linux-only name or path outside a Linux
guard. The keeper is C: tools/cross_compile.sh compiles it for both macOS
targets, and its macOS paths are read against XNU's (docs/platforms.md).

THE GUARD RULE (strict, syntactic, nothing else counts)

A *Linux-only use* is:
  * an attribute in LINUX_ONLY below (``os.pipe2``, ``os.waitid``,
    ``os.pidfd_open``, ``signal.pidfd_send_signal``, ``select.epoll``,
    ``os.memfd_create``, ``os.sched_setaffinity``, ...), reached as
    ``module.name`` or ``getattr(module, "name")`` without a default
    (``import x as y`` and ``from x import name`` followed);
  * any attribute named ``prctl`` (e.g. ``libc.prctl`` through ctypes);
  * a /proc path: a string literal, or an f-string's leading text, that is
    ``/proc`` or starts with ``/proc/``. Docstrings are not uses.

A *Linux test* is an expression that is one of:
  * ``sys.platform.startswith("linux")`` or ``sys.platform == "linux"``;
  * ``hasattr(module, "name")`` for a name in LINUX_ONLY (a feature probe);
  * ``os.path.isdir/exists/isfile(<a /proc path>)`` (a /proc probe; its
    own path argument is not a use);
  * a module-level name assigned exactly once from a Linux test
    (``_LINUX = sys.platform.startswith("linux")``);
  * ``A and B`` where A or B is a Linux test.

A use is *guarded* when it sits, in the same module, inside one of:
  * the body of ``if T:`` / ``while T:``, the ``else`` of ``if not T:``, the
    value ``A`` of ``A if T else B``, or an operand after T in ``T and ...``,
    where T is a Linux test;
  * the statements after ``if not T: ... return/raise/continue/break`` in the
    same block (an early exit);
  * a ``try:`` body whose handlers catch ``AttributeError`` (for attribute
    uses) or ``OSError`` (for /proc paths), or ``Exception``,
    ``BaseException`` or a bare ``except:`` (for both). A function defined
    inside such a try is not covered by it: its body runs later.
  * a module that declares itself Linux-only with a module-level
    ``LINUX_ONLY = True`` (its functions may be called only under a guard).

Nothing else is recognised: a guard by data flow (``if fd is not None:``
where fd came from pidfd_open) must be written as one of the forms above.
"""

import ast
import os
import textwrap

import pytest

import proctree

PKG = os.path.dirname(os.path.abspath(proctree.__file__))

LINUX_ONLY = {
    "os": {
        "pipe2",
        "waitid",
        "P_PIDFD",
        "pidfd_open",
        "memfd_create",
        "eventfd",
        "eventfd_read",
        "eventfd_write",
        "splice",
        "copy_file_range",
        "sched_setaffinity",
        "sched_getaffinity",
        "sched_setscheduler",
        "sched_getscheduler",
        "sched_setparam",
        "sched_getparam",
        "sched_rr_get_interval",
        "posix_fadvise",
        "posix_fallocate",
        "getxattr",
        "setxattr",
        "listxattr",
        "removexattr",
        "unshare",
        "setns",
        "getrandom",
        "O_PATH",
        "O_TMPFILE",
    },
    "signal": {"pidfd_send_signal", "SIGRTMIN", "SIGRTMAX", "SIGPWR", "SIGSTKFLT", "SIGPOLL"},
    "select": {
        "epoll",
        "EPOLLIN",
        "EPOLLOUT",
        "EPOLLPRI",
        "EPOLLERR",
        "EPOLLHUP",
        "EPOLLET",
        "EPOLLONESHOT",
        "EPOLLEXCLUSIVE",
        "EPOLLRDHUP",
    },
}
# Modules reached under another name: the keeper imports the C module _signal as signal.
_MODULE_ALIASES = {"_signal": "signal"}
_ATTR_CATCHERS = {"AttributeError", "Exception", "BaseException"}
_PATH_CATCHERS = {"OSError", "IOError", "EnvironmentError", "Exception", "BaseException"}
_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _is_proc_path(s):
    return s == "/proc" or s.startswith("/proc/")


class _Scan:
    """One module's (or one embedded script's) Linux-only uses outside a guard."""

    def __init__(self, tree, where, line_offset=0):
        self.where = where
        self.offset = line_offset
        self.modules = {}  # local name -> module
        self.names = {}  # local name -> (module, attr) from `from m import attr`
        self.guard_names = set()
        self.problems = []
        self._imports(tree)
        self._module_guards(tree)
        self.linux_module = any(
            isinstance(s, ast.Assign)
            and [getattr(t, "id", None) for t in s.targets] == ["LINUX_ONLY"]
            and isinstance(s.value, ast.Constant)
            and s.value.value is True
            for s in tree.body
        )

    # -- what the names in this module mean --------------------------------

    def _imports(self, tree):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    name = a.name if a.asname else a.name.split(".")[0]
                    self.modules[a.asname or name] = _MODULE_ALIASES.get(name, name)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                mod = _MODULE_ALIASES.get(node.module, node.module)
                for a in node.names:
                    self.names[a.asname or a.name] = (mod, a.name)

    def _module_guards(self, tree):
        counts = {}
        for s in tree.body:
            for t in getattr(s, "targets", []):
                if isinstance(t, ast.Name):
                    counts[t.id] = counts.get(t.id, 0) + 1
        changed = True
        while changed:
            changed = False
            for s in tree.body:
                if (
                    isinstance(s, ast.Assign)
                    and len(s.targets) == 1
                    and isinstance(s.targets[0], ast.Name)
                    and counts.get(s.targets[0].id) == 1
                    and s.targets[0].id not in self.guard_names
                    and self.is_linux_test(s.value)
                ):
                    self.guard_names.add(s.targets[0].id)
                    changed = True

    def _module_of(self, node):
        return self.modules.get(node.id) if isinstance(node, ast.Name) else None

    def linux_attr(self, node):
        """'module.name' if node is a Linux-only attribute (or prctl), else None."""
        if isinstance(node, ast.Attribute):
            if node.attr == "prctl":
                return "prctl"
            mod = self._module_of(node.value)
            if mod in LINUX_ONLY and node.attr in LINUX_ONLY[mod]:
                return f"{mod}.{node.attr}"
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) == 2
            and not node.keywords
            and isinstance(node.args[1], ast.Constant)
        ):
            mod = self._module_of(node.args[0])  # getattr without a default raises where it is missing
            if mod in LINUX_ONLY and node.args[1].value in LINUX_ONLY[mod]:
                return f"{mod}.{node.args[1].value}"
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in self.names:
            mod, attr = self.names[node.id]
            if attr in LINUX_ONLY.get(mod, ()):
                return f"{mod}.{attr}"
        return None

    def is_proc_probe(self, node):
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("isdir", "exists", "isfile")
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "path"
            and self._module_of(node.func.value.value) == "os"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and _is_proc_path(node.args[0].value)
        )

    def is_linux_test(self, node):
        if isinstance(node, ast.Name):
            return node.id in self.guard_names
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            return any(self.is_linux_test(v) for v in node.values)
        if self.is_proc_probe(node):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr":
            if len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
                mod = self._module_of(node.args[0])
                return mod in LINUX_ONLY and node.args[1].value in LINUX_ONLY[mod]
            return False
        platform = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith":
            platform, arg = node.func.value, (node.args[0] if len(node.args) == 1 else None)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
            platform, arg = node.left, node.comparators[0]
        if platform is None:
            return False
        return (
            isinstance(platform, ast.Attribute)
            and platform.attr == "platform"
            and self._module_of(platform.value) == "sys"
            and isinstance(arg, ast.Constant)
            and arg.value == "linux"
        )

    def _negated_test(self, node):
        return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and self.is_linux_test(node.operand)

    # -- the walk ------------------------------------------------------------

    def run(self, tree):
        self.block(tree.body, guarded=self.linux_module, attr_ok=False, path_ok=False)
        return self.problems

    def report(self, node, what):
        self.problems.append(f"{self.where}:{node.lineno + self.offset}: {what} outside a Linux guard")

    def block(self, stmts, guarded, attr_ok, path_ok):
        for s in stmts:
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
                continue  # a docstring (or a string used as a comment)
            self.stmt(s, guarded, attr_ok, path_ok)
            if (
                isinstance(s, ast.If)
                and not s.orelse
                and self._negated_test(s.test)
                and s.body
                and isinstance(s.body[-1], _EXITS)
            ):
                guarded = True  # early exit: the rest of the block runs only on Linux

    def stmt(self, s, guarded, attr_ok, path_ok):
        if isinstance(s, (ast.If, ast.While)):
            self.expr(s.test, guarded, attr_ok, path_ok)
            self.block(s.body, guarded or self.is_linux_test(s.test), attr_ok, path_ok)
            self.block(s.orelse, guarded or self._negated_test(s.test), attr_ok, path_ok)
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            caught = set()
            for h in s.handlers:
                caught |= self._caught(h.type)
            self.block(
                s.body, guarded, attr_ok or bool(caught & _ATTR_CATCHERS), path_ok or bool(caught & _PATH_CATCHERS)
            )
            for h in s.handlers:
                self.block(h.body, guarded, attr_ok, path_ok)
            self.block(s.orelse, guarded, attr_ok, path_ok)
            self.block(s.finalbody, guarded, attr_ok, path_ok)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in s.decorator_list + s.args.defaults + [d for d in s.args.kw_defaults if d]:
                self.expr(d, guarded, attr_ok, path_ok)
            self.block(s.body, guarded, False, False)  # a try around a def does not cover its body
        elif isinstance(s, ast.ClassDef):
            for d in s.decorator_list + s.bases:
                self.expr(d, guarded, attr_ok, path_ok)
            self.block(s.body, guarded, False, False)
        else:
            for _, value in ast.iter_fields(s):
                values = value if isinstance(value, list) else [value]
                if values and all(isinstance(v, ast.stmt) for v in values):
                    self.block(values, guarded, attr_ok, path_ok)  # a body: early exits carry on in it
                    continue
                for v in values:
                    if isinstance(v, ast.withitem):
                        self.expr(v.context_expr, guarded, attr_ok, path_ok)
                    elif isinstance(v, ast.match_case):
                        self.block(v.body, guarded, attr_ok, path_ok)
                    elif isinstance(v, ast.AST):
                        self.expr(v, guarded, attr_ok, path_ok)

    def _caught(self, node):
        if node is None:
            return {"BaseException"}
        if isinstance(node, ast.Tuple):
            return set().union(*(self._caught(e) for e in node.elts))
        if isinstance(node, ast.Name):
            return {node.id}
        if isinstance(node, ast.Attribute):
            return {node.attr}
        return set()

    def expr(self, node, guarded, attr_ok, path_ok):
        if node is None:
            return
        if isinstance(node, ast.Lambda):
            return self.expr(node.body, guarded, False, False)
        what = self.linux_attr(node)
        if what and not (guarded or attr_ok):
            self.report(node, what)
        if self.is_proc_probe(node):
            return self.expr(node.func, guarded, attr_ok, path_ok)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _is_proc_path(node.value) and not (guarded or path_ok):
                self.report(node, f"/proc path {node.value!r}")
            self._embedded(node)
            return
        if isinstance(node, ast.JoinedStr):
            head = node.values[0] if node.values else None
            if (
                isinstance(head, ast.Constant)
                and isinstance(head.value, str)
                and _is_proc_path(head.value)
                and not (guarded or path_ok)
            ):
                self.report(node, f"/proc path f{head.value!r}...")
            for v in node.values[1:] if head is not None and isinstance(head, ast.Constant) else node.values:
                self.expr(v, guarded, attr_ok, path_ok)
            return
        if isinstance(node, ast.IfExp):
            self.expr(node.test, guarded, attr_ok, path_ok)
            self.expr(node.body, guarded or self.is_linux_test(node.test), attr_ok, path_ok)
            self.expr(node.orelse, guarded or self._negated_test(node.test), attr_ok, path_ok)
            return
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            g = guarded
            for v in node.values:
                self.expr(v, g, attr_ok, path_ok)
                g = g or self.is_linux_test(v)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, guarded, attr_ok, path_ok)
            elif isinstance(child, ast.comprehension):
                for e in [child.target, child.iter, *child.ifs]:
                    self.expr(e, guarded, attr_ok, path_ok)

    def _embedded(self, node):
        """Python source in a string literal (run with python -c) is scanned as a script of its own."""
        src = node.value
        if "\n" not in src:
            return
        try:
            tree = ast.parse(textwrap.dedent(src))
        except SyntaxError:
            return
        if not any(isinstance(n, (ast.Import, ast.ImportFrom, ast.Call)) for n in ast.walk(tree)):
            return
        inner = _Scan(
            tree,
            f"{self.where} (code in the string at line {node.lineno + self.offset})",
            node.lineno + self.offset - 1,
        )
        self.problems.extend(inner.run(tree))


def scan_source(source, where="<source>"):
    """Linux-only uses outside a Linux guard in one module's source, as 'where:line: what' strings."""
    tree = ast.parse(source)
    return _Scan(tree, where).run(tree)


def _package_files():
    for dirpath, _, files in os.walk(PKG):
        for f in sorted(files):
            if f.endswith(".py"):
                yield os.path.join(dirpath, f)


# Known unguarded uses in modules this change does not own, each safe today by
# a data-flow argument the rule does not accept, with the edit that removes it.
# An entry that no longer matches fails the test: delete it with the fix.
PENDING: set = set()


def _key(problem):
    where, _, rest = problem.partition(":")
    return where, rest.partition(": ")[2].rsplit(" outside a Linux guard", 1)[0]


def test_no_linux_only_call_outside_a_guard():
    problems = []
    for path in _package_files():
        with open(path, encoding="utf-8") as f:
            problems += scan_source(f.read(), os.path.relpath(path, os.path.dirname(PKG)))
    new = [p for p in problems if _key(p) not in PENDING]
    assert not new, "Linux-only uses outside a Linux guard (see this file's docstring):\n" + "\n".join(new)
    stale = PENDING - {_key(p) for p in problems}
    assert not stale, f"fixed, so delete from PENDING: {sorted(stale)}"


# -- the scanner itself, on small cases ---------------------------------------

FLAGGED = [
    "import os\nr, w = os.pipe2(0)\n",
    "import os\nos.waitid(os.P_PID, 1, os.WEXITED)\n",
    "import _signal as signal\nsignal.pidfd_send_signal(3, 9)\n",
    "from os import pidfd_open\npidfd_open(1)\n",
    "import select\nep = select.epoll()\n",
    "import os\nos.sched_setaffinity(0, {0})\n",
    "import ctypes\nctypes.CDLL(None).prctl(1, 9)\n",
    "def f(pid):\n    return open(f'/proc/{pid}/stat')\n",
    "PATH = '/proc/self/mountinfo'\n",
    "import os, sys\nif sys.platform == 'darwin':\n    os.pipe2(0)\n",
    "import os\ntry:\n    os.pipe2(0)\nexcept OSError:\n    pass\n",  # OSError does not cover a missing attribute
    "import os\ntry:\n    def f():\n        os.pipe2(0)\nexcept AttributeError:\n    pass\n",
    "import os\nfd = 3\nif fd is not None:\n    os.pidfd_open(1)\n",  # data flow is not a guard
    "import os\nif not hasattr(os, 'pipe2'):\n    os.pipe2(0)\n",
    "import os\nif hasattr(os, 'pipe'):\n    os.pipe2(0)\n",  # a probe for a portable name proves nothing
    "CODE = '''\nimport os\nos.waitid(os.P_PID, 1, os.WEXITED | os.WNOWAIT)\n'''\n",
    "import os\n_L = os.name == 'posix'\nif _L:\n    os.pipe2(0)\n",
    "import os\nf = getattr(os, 'pipe2')\n",
    "import _signal\n_signal.pidfd_send_signal(3, 9)\n",
    "import os.path\nos.waitid(os.P_PID, 1, 4)\n",
    "import os\nwith open('/proc/self/stat') as f:\n    pass\n",
    "import os\nfor x in range(3):\n    os.pipe2(0)\n",
]

GUARDED = [
    "import os, sys\nif sys.platform.startswith('linux'):\n    os.pipe2(0)\n",
    "import os, sys\n_LINUX = sys.platform.startswith('linux')\nif _LINUX:\n    os.pipe2(0)\n",
    "import os\nif hasattr(os, 'pidfd_open'):\n    os.pidfd_open(1)\n",
    "import os, signal\nif hasattr(os, 'P_PIDFD') and 3:\n    os.waitid(os.P_PIDFD, 3, os.WEXITED)\n",
    "import os\ntry:\n    os.pidfd_open(1)\nexcept (AttributeError, OSError):\n    pass\n",
    "def f(pid):\n    try:\n        return open(f'/proc/{pid}/stat')\n    except OSError:\n        return None\n",
    "import os\n_HAVE_PROC = os.path.isdir('/proc/self/task')\n"
    "def f():\n    if not _HAVE_PROC:\n        return None\n    return open('/proc/self/stat')\n",
    "import os\nx = os.listdir('/proc/self/fd' if os.path.isdir('/proc/self/fd') else '/dev/fd')\n",
    "import os, sys\nif sys.platform.startswith('linux'):\n    def f():\n        return os.pipe2(0)\n",
    "LINUX_ONLY = True\nPATH = '/proc/self/mountinfo'\n",
    "def f():\n    '''Reads /proc/<pid>/stat.'''\n",
    "import os\nfd = os.pidfd_open(1) if hasattr(os, 'pidfd_open') else None\n",
    "import os\nok = hasattr(os, 'pidfd_open') and os.pidfd_open(1)\n",
    "import os\nf = getattr(os, 'pipe2', None)\n",
    "import os, sys\n_LINUX = sys.platform.startswith('linux')\n"
    "for x in range(3):\n    if not _LINUX:\n        continue\n    os.pipe2(0)\n",
]


@pytest.mark.parametrize("source", FLAGGED)
def test_scanner_flags(source):
    assert scan_source(source), source


@pytest.mark.parametrize("source", GUARDED)
def test_scanner_accepts_guards(source):
    assert scan_source(source) == [], source
