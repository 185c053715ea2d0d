"""Other modules use a Tree through its front doors: its names without a leading underscore, and tree.parts.

An AST read of proctree/ (nothing is imported or run): the private names
class Tree defines (its methods and the attributes it assigns on self), and
every place outside tree.py that reads one of them off something other than
self. Each such place is listed below with why no front door fits; there may
be at most five.
"""

import ast
import os

import pytest

import proctree

PKG_DIR = os.path.dirname(os.path.abspath(proctree.__file__))
TREE_PY = os.path.join(PKG_DIR, "_containment", "tree.py")
MAX_REACH_INS = 5

# (module, Tree's private name) -> why it is used there. Keep it short.
REACH_INS_ALLOWED = {
    ("proctree._containment.keeperloss", "_finish"): "a keeper loss ends in the Tree's own finish (keeper reaped, "
    "cgroup and receipt removed), as its wait() and terminate() do",
    ("proctree._containment.start", "_abandon"): "the start sequence is the other half of the Tree's constructor; "
    "a start that failed undoes the Tree nobody received",
    ("proctree._containment.spawn", "_discard"): "spawn_async's cancelled start ends a Tree its caller never saw",
}
# (module, name) -> the object it is read from, which is no Tree.
NOT_A_TREE = {
    ("proctree._plugin.held", "_popen"): "multiprocessing.Process._popen",
}


def tree_privates(source):
    """The private names (one leading underscore) class Tree in source defines: methods and self attributes."""
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Tree")
    names = set()
    for n in ast.walk(cls):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(n.name)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and ast.unparse(n.value) == "self":
            names.add(n.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def reach_ins(source, privates):
    """[(line, expression)] where source reads one of privates off anything but self or cls."""
    return [
        (n.lineno, ast.unparse(n))
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Attribute) and n.attr in privates and ast.unparse(n.value) not in ("self", "cls")
    ]


def _modules():
    """(dotted name, path) of every module under proctree/ but tree.py."""
    root = os.path.dirname(PKG_DIR)
    for folder, dirs, files in os.walk(PKG_DIR):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in sorted(files):
            path = os.path.join(folder, f)
            if f.endswith(".py") and path != TREE_PY:
                name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                yield name.removesuffix(".__init__"), path


def _all_reach_ins():
    with open(TREE_PY, encoding="utf-8") as f:
        privates = tree_privates(f.read())
    found = []
    for module, path in _modules():
        with open(path, encoding="utf-8") as f:
            for line, expr in reach_ins(f.read(), privates):
                found.append((module, expr.rpartition(".")[2], line, expr))
    return found


def test_other_modules_use_a_tree_through_its_front_doors():
    found = [r for r in _all_reach_ins() if r[:2] not in NOT_A_TREE]
    unexplained = [f"{m}:{line} {expr}" for m, name, line, expr in found if (m, name) not in REACH_INS_ALLOWED]
    assert not unexplained, "a Tree's private name used outside tree.py: use a front door, or say why here"
    assert len(found) <= MAX_REACH_INS, found


def test_every_allowance_is_used():
    used = {r[:2] for r in _all_reach_ins()}
    assert set(REACH_INS_ALLOWED) | set(NOT_A_TREE) <= used, "an allowance nothing needs any more: remove it"


def test_the_private_names_are_read_from_the_class():
    source = "class Tree:\n    def __init__(self):\n        self._a = 1\n        self.b = 2\n    def _m(self): ...\n"
    assert tree_privates(source) == {"_a", "_m"}
    assert "_finish" in tree_privates(open(TREE_PY, encoding="utf-8").read())


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("tree._finish()", [(1, "tree._finish")]),
        ("x = tree.parts.keeper\nself._finish()", []),
        ("old._mode.leftovers(old)", [(1, "old._mode")]),
        ("cls._abandon\nself._tree._abandon(patience=0)", [(2, "self._tree._abandon")]),
        ("getattr(tree, 'x')._mode", [(1, "getattr(tree, 'x')._mode")]),
    ],
)
def test_the_check_finds_a_planted_reach_in(source, expected):
    assert reach_ins(source, {"_finish", "_mode", "_abandon"}) == expected
