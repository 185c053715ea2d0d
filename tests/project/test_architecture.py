"""The layers and their import rules (docs/architecture.md), checked on the source.

An AST read of every module under proctree/: which proctree modules it imports
(absolute or relative, at any depth in the file), mapped to layers. Nothing
is imported or run. A module named by a string is held to the same rules as
an import: importlib.import_module, __import__, _lazyimport.load and
LazyModule with a literal name (or an f-string's literal package), and
getattr(<a proctree module>, "_private"). A name computed whole (the facade's
table of lazy names) is not followed.
"""

import ast
import os
import subprocess
import sys

import pytest

import proctree

PKG_DIR = os.path.dirname(os.path.abspath(proctree.__file__))
TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/, above the layer folders

# Module-name prefix -> layer number; lower layers never import higher ones.
LAYERS = [
    ("proctree._errors", 0),
    ("proctree._validate", 0),
    ("proctree._fds", 0),
    ("proctree._version", 0),
    ("proctree._lazyimport", 0),
    ("proctree._record", 0),
    ("proctree._core", 1),
    ("proctree._table", 2),
    ("proctree._teardown", 3),
    ("proctree._containment", 4),
    ("proctree._reaper", 5),
    ("proctree._supervisor", 5),
    ("proctree._procfile", 5),
    ("proctree.cli", 6),
    ("proctree.demo", 6),
    ("proctree.pytest_plugin", 6),
    ("proctree._plugin", 6),
]
FACADE = {"proctree", "proctree.__main__", "proctree.subprocess", "proctree.procfile"}  # the public modules
# The containment layer's mechanisms: only the layer itself uses them (the
# reaper reads trees through marker, receipt and leftovers).
MECHANISMS = {
    "proctree._containment.cgroup",
    "proctree._containment.protocol",
}


def layer_of(module):
    for prefix, n in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return n
    return None


def _modules():
    """(dotted name, path, is_package) of every module under proctree/."""
    root = os.path.dirname(PKG_DIR)
    for dirpath, dirnames, files in os.walk(PKG_DIR):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)[:-3].split(os.sep)
                is_pkg = rel[-1] == "__init__"
                if is_pkg:
                    rel = rel[:-1]
                yield ".".join(rel), path, is_pkg


MODULES = {name: (path, is_pkg) for name, path, is_pkg in _modules()}


def _resolve(module, is_pkg, node):
    """The proctree modules an import node names (a `from pkg import sub` names pkg.sub if it is a module)."""
    out = []
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name == "proctree" or a.name.startswith("proctree.")]
    if node.level:
        base = module.split(".") if is_pkg else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not (target == "proctree" or target.startswith("proctree.")):
        return []
    for a in node.names:
        sub = f"{target}.{a.name}"
        out.append(sub if sub in MODULES or sub == "proctree._core" else target)
    return out


def _package_of(module, is_pkg):
    """What `__package__` is inside module."""
    return module if is_pkg else module.rpartition(".")[0]


def _absolute(name, package):
    """name as importlib resolves it against package (".x", "..x" relative; else as it is), or None."""
    level = len(name) - len(name.lstrip("."))
    if not level:
        return name
    parts = package.split(".") if package else []
    if level > len(parts):
        return None
    base = ".".join(parts[: len(parts) - (level - 1)])
    rest = name[level:]
    return f"{base}.{rest}" if rest else base


def _literal_name(node):
    """The module name a string argument gives: a literal, or an f-string's literal head up to its last dot
    (`f"proctree.cli.{name}"` names something in proctree.cli); None when nothing is literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        head = str(node.values[0].value)
        return head.rpartition(".")[0] or None
    return None


def _package_argument(node, module, is_pkg):
    """The package a relative name is resolved against: a literal, `__package__` or `__name__`."""
    if node is None:
        return ""
    if isinstance(node, ast.Name) and node.id == "__package__":
        return _package_of(module, is_pkg)
    if isinstance(node, ast.Name) and node.id == "__name__":
        return module
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _callee(node):
    """The name a call is made through: `import_module` for both `importlib.import_module` and a bare name."""
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _module_aliases(module, is_pkg, tree):
    """Local name -> the proctree module it is bound to by an import in this file."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "proctree" or a.name.startswith("proctree."):
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            for a, target in zip(node.names, _resolve(module, is_pkg, node)):
                if target.endswith("." + a.name):
                    aliases[a.asname or a.name] = target
    return aliases


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _string_lookup(module, is_pkg, node, aliases):
    """The proctree module (or private name) a call names by a string, or None: importlib.import_module,
    __import__, _lazyimport.load, LazyModule with a literal name, and getattr(<proctree module>, "_name")."""
    name = _callee(node)
    args = node.args
    keywords = {k.arg: k.value for k in node.keywords}
    if name == "getattr" and len(args) >= 2:
        base = _dotted(args[0])
        owner = None if base is None else aliases.get(base.split(".")[0])
        attr = args[1].value if isinstance(args[1], ast.Constant) else None
        if owner is None or not isinstance(attr, str) or not attr.startswith("_") or attr.startswith("__"):
            return None
        return ".".join([owner, *base.split(".")[1:], attr])
    if name == "load" and not (
        isinstance(node.func, ast.Attribute) and aliases.get(str(_dotted(node.func.value))) == "proctree._lazyimport"
    ):
        return None  # a load() of something else
    if name not in ("import_module", "__import__", "load", "LazyModule") or not args:
        return None
    target = _literal_name(args[0])
    if target is None:
        return None
    if target.startswith("."):
        package_node = args[1] if len(args) > 1 and name != "__import__" else keywords.get("package")
        package = _package_argument(package_node, module, is_pkg)
        target = None if package is None else _absolute(target, package)
    return target if target and (target == "proctree" or target.startswith("proctree.")) else None


def imports_in_source(module, is_pkg, source):
    """[(imported module, lineno, at module level)] in source, read as module's: import statements and the
    string lookups that name a module (see _string_lookup)."""
    tree = ast.parse(source)
    top = {id(n) for n in tree.body}
    # Imports inside a module-level try/if still run at import time.
    for n in tree.body:
        if isinstance(n, (ast.Try, ast.If)):
            for sub in ast.walk(n):
                if not isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    top.add(id(sub))
    aliases = _module_aliases(module, is_pkg, tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in _resolve(module, is_pkg, node):
                found.append((target, node.lineno, id(node) in top))
        elif isinstance(node, ast.Call):
            target = _string_lookup(module, is_pkg, node, aliases)
            if target is not None:
                found.append((target, node.lineno, False))
    return found


def imports(module):
    """[(imported module, lineno, at module level)] for module."""
    path, is_pkg = MODULES[module]
    with open(path, encoding="utf-8") as f:
        return imports_in_source(module, is_pkg, f.read())


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_has_a_layer(module):
    assert module in FACADE or layer_of(module) is not None, f"{module}: add it to LAYERS and docs/architecture.md"


def _against_layers(module, target):
    mine, theirs = layer_of(module), layer_of(target) or 0
    if module in FACADE or target in FACADE or mine is None or theirs <= mine:
        return None
    return f"imports {target} (layer {theirs} > {mine})"


def _against_the_binding(module, target):
    if target == "proctree._core" and module != "proctree._table.binding":
        return f"imports {target} (only proctree._table.binding does)"
    return None


def _against_mechanisms(module, target):
    if target in MECHANISMS and not module.startswith("proctree._containment"):
        return f"imports {target} (a containment mechanism)"
    return None


def _against_reaper_evidence(module, target):
    if (
        module.startswith("proctree._reaper")
        and target.startswith("proctree._containment")
        and not target.startswith("proctree._containment.evidence")
    ):
        return f"imports {target} (the reaper reads containment's evidence only)"
    return None


# The CLI and the pytest plugin use proctree's public names (no part starting with "_") and their own modules.
OWN_PACKAGE = {
    "proctree.cli": "proctree.cli",
    "proctree.pytest_plugin": "proctree._plugin",
    "proctree._plugin": "proctree._plugin",
}
# (importer, private module it may use) -> why no public name fits. Keep it short.
PRIVATE_ALLOWED = {
    ("proctree.cli", "proctree._validate"): "the one check of each fact (a port, a signal, a pid, the stop grace's "
    "bound) that the library's own arguments are held to: the CLI parses its options by the same rule, and a "
    "public validator API would be surface no program asked for",
    ("proctree.pytest_plugin", "proctree._errors"): "ProcessLeakWarning's public name is proctree.pytest_plugin's "
    "own; every public exception and warning is defined in _errors (a test below checks that)",
    ("proctree._plugin.helpers", "proctree._containment.popenhold"): "held_pids(): the processes of this "
    "process's proctree.Popen holding tree, never a test's leak; which processes a drop-in holds for itself is no "
    "question a program asks",
}


def _under(name, prefix):
    return name == prefix or name.startswith(prefix + ".")


def _against_public_api(module, target):
    own = next((pkg for prefix, pkg in OWN_PACKAGE.items() if _under(module, prefix)), None)
    if own is None or _under(target, own) or not any(p.startswith("_") for p in target.split(".")[1:]):
        return None
    if any(_under(module, m) and _under(target, t) for m, t in PRIVATE_ALLOWED):
        return None
    return f"imports {target} (a private name: use the public API)"


def _against_demo_rule(module, target):
    # The demo: the public API, the base layer and its own package.
    if (
        not _under(module, "proctree.demo")
        or target in FACADE
        or layer_of(target) == 0
        or _under(target, module.split(".")[0] + ".demo")
    ):
        return None
    return f"imports {target} (the demo uses the public API and the base layer)"


RULES = [
    _against_layers,
    _against_the_binding,
    _against_mechanisms,
    _against_reaper_evidence,
    _against_public_api,
    _against_demo_rule,
]


def violations(module, found):
    """Every rule an import or string lookup of module breaks, as `module:line why`."""
    return [f"{module}:{line} {why}" for target, line, _ in found for rule in RULES if (why := rule(module, target))]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_and_string_lookups_keep_the_rules(module):
    bad = violations(module, imports(module))
    assert not bad, "\n".join(bad)


def test_only_the_binding_imports_the_compiled_module():
    users = sorted({m for m in MODULES for t, _, _ in imports(m) if t == "proctree._core"})
    assert users == ["proctree._table.binding"]


def test_every_private_allowance_is_used():
    # An entry nothing needs any more is removed, not kept "just in case".
    used = {
        (m, t)
        for m, t in PRIVATE_ALLOWED
        for module in MODULES
        if _under(module, m)
        for target, _, _ in imports(module)
        if _under(target, t)
    }
    assert used == set(PRIVATE_ALLOWED)


# Planted violations, one of each kind: (importer, its source, what the checker must report).
PLANTED = [
    (
        "proctree._table.binding",
        "import importlib\nimportlib.import_module('proctree._teardown.engine')",
        "layer 3 > 2",
    ),
    (
        "proctree._table.binding",
        "from importlib import import_module\nimport_module('.._teardown', __package__)",
        "layer 3 > 2",
    ),
    ("proctree._table.live", "import_module('.._reaper.reap', package='proctree._table')", "layer 5 > 2"),
    ("proctree._teardown.engine", "__import__('proctree._containment.spawn')", "layer 4 > 3"),
    (
        "proctree._teardown.engine",
        "from .. import _lazyimport\n_lazyimport.load('.._supervisor.spec', __package__)",
        "layer 5 > 3",
    ),
    (
        "proctree._table",
        "from .. import _lazyimport\nm = _lazyimport.LazyModule('.._containment.tree', __name__)",
        "layer 4 > 2",
    ),
    ("proctree._containment.tree", "x = LazyModule('proctree._reaper.select', '')", "layer 5 > 4"),
    ("proctree._supervisor.service", "_lazyimport.LazyModule('.._containment.cgroup', __package__)", "mechanism"),
    ("proctree._reaper.reap", "import_module('proctree._containment.tree')", "evidence only"),
    ("proctree._teardown.world", "import_module('proctree._core')", "only proctree._table.binding"),
    ("proctree.cli.up", "import importlib\nimportlib.import_module('proctree._procfile.exitrule')", "private name"),
    ("proctree.cli.up", "import proctree\ngetattr(proctree, '_procfile')", "proctree._procfile (a private"),
    ("proctree.cli.run", "import proctree\ngetattr(proctree._containment, '_x')", "proctree._containment._x"),
    ("proctree._table.model", "from .. import _lazyimport as lazy\nlazy.load('proctree._teardown', '')", "layer 3 > 2"),
    ("proctree._plugin.guard", "import proctree.subprocess as sp\ngetattr(sp, '_popen')", "proctree.subprocess._popen"),
    ("proctree._plugin.held", "importlib.import_module(f'proctree._containment.{name}')", "proctree._containment (a"),
    ("proctree.pytest_plugin", "__import__('proctree._supervisor')", "private name"),
    ("proctree.demo.tree_scene", "import_module('proctree._reaper')", "the demo uses"),
]
# What is no violation: the public API, a module's own package, an allowance, a name nothing resolves.
CLEAN = [
    ("proctree.cli.up", "import importlib\nimportlib.import_module('proctree.procfile')"),
    ("proctree.cli", "importlib.import_module(f'proctree.cli.{name}')"),
    ("proctree.cli.up", "import proctree\ngetattr(proctree, 'Popen')\ngetattr(other, '_private')"),
    ("proctree.cli.up", "import proctree\ngetattr(proctree, '__version__')"),
    ("proctree.cli._plan", "from proctree._validate import port_from_text"),
    ("proctree._plugin.helpers", "import_module('proctree._containment.popenhold')"),
    ("proctree._plugin.guard", "import_module('.describe', __package__)"),
    ("proctree._containment.tree", "_lazyimport.LazyModule('proctree._teardown.report', '')"),
    ("proctree._containment.tree", "load(name, __package__)\nimport_module(name)\n__import__('json')"),
]


@pytest.mark.parametrize(("module", "source", "expected"), PLANTED)
def test_the_checker_catches_a_planted_violation(module, source, expected):
    is_pkg = module in MODULES and MODULES[module][1]
    found = violations(module, imports_in_source(module, is_pkg, source))
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize(("module", "source"), CLEAN)
def test_the_checker_passes_what_the_rules_allow(module, source):
    is_pkg = module in MODULES and MODULES[module][1]
    assert violations(module, imports_in_source(module, is_pkg, source)) == []


# Loadable as plain files (stdlib only at import): the reaper's seam (marker,
# receipt) and the keeper protocol, which test tools load without the package.
# The test folders mirror the layers; `support` is the shared kit, not tests.
TEST_FOLDERS = {"project", "table", "teardown", "containment", "reaper", "supervisor", "cli", "plugin", "dropin"}


def _test_modules() -> dict[str, str]:
    """Every test module below tests/, by name (unique: pytest's default import mode needs it) -> path."""
    found: dict[str, str] = {}
    for folder, dirs, files in os.walk(TESTS_DIR):
        dirs[:] = [d for d in dirs if d not in ("support", "__pycache__")]
        for f in files:
            if f.startswith("test_") and f.endswith(".py"):
                assert f[:-3] not in found, f"two test modules named {f}: {found.get(f[:-3])} and {folder}"
                found[f[:-3]] = os.path.join(folder, f)
    return found


def test_every_test_module_sits_in_a_folder_that_mirrors_a_layer():
    misplaced = [
        os.path.relpath(p, TESTS_DIR)
        for p in _test_modules().values()
        if os.path.relpath(os.path.dirname(p), TESTS_DIR) not in TEST_FOLDERS
    ]
    assert not misplaced, f"test modules outside the layer folders {sorted(TEST_FOLDERS)}: {misplaced}"


def test_no_test_module_imports_another():
    tests = _test_modules()
    bad = []
    for name, path in sorted(tests.items()):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            bad += [f"{name}:{node.lineno} imports {n}" for n in names if n in tests]
    assert not bad, "\n".join(bad)


def test_the_rules_catch_a_violation():
    # The checker itself: a table module that imported the teardown would be caught.
    assert layer_of("proctree._teardown.engine") > layer_of("proctree._table.binding")
    assert layer_of("proctree._table.model") == 2 and layer_of("proctree.cli.run") == 6
    node = ast.parse("from .. import _teardown").body[0]
    assert _resolve("proctree._table.binding", False, node) == ["proctree._teardown"]
    node = ast.parse("from .._teardown import engine").body[0]
    assert _resolve("proctree._table.binding", False, node) == ["proctree._teardown.engine"]
    node = ast.parse("from . import model as m").body[0]
    assert _resolve("proctree._table.binding", False, node) == ["proctree._table.model"]


def test_the_docs_name_every_layer_package():
    # docs/ sits beside tests/ in the checkout and the sdist (not in an installed wheel).
    path = os.path.join(os.path.dirname(TESTS_DIR), "docs", "architecture.md")
    if not os.path.exists(path):
        pytest.skip("no docs/ beside the tests")
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    packages = {m for m in MODULES if MODULES[m][1] and m != "proctree"}
    missing = [p for p in packages if p.replace(".", "/") + "/" not in doc]
    assert not missing, missing


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


def test_the_build_ships_every_package():
    """pyproject.toml lists every package under proctree/ (a subpackage left out is missing from the wheel)."""
    pyproject = os.path.join(os.path.dirname(TESTS_DIR), "pyproject.toml")
    if not os.path.exists(pyproject):
        pytest.skip("no pyproject.toml beside tests/ (an installed copy of the tests)")
    with open(pyproject, encoding="utf-8") as f:
        text = f.read()
    block = text.split("packages = [", 1)[1].split("]", 1)[0]
    listed = {line.strip().strip(",").strip('"') for line in block.splitlines() if line.strip()}
    # The source tree beside tests/ (the installed package may be the incomplete one).
    root = os.path.dirname(TESTS_DIR)
    packages = {
        os.path.relpath(d, root).replace(os.sep, ".")
        for d, _, files in os.walk(os.path.join(root, "proctree"))
        if "__init__.py" in files
    }
    assert "proctree._reaper" in packages
    assert packages <= listed, f"missing from [tool.setuptools] packages: {sorted(packages - listed)}"


def test_every_public_exception_and_warning_lives_in_errors():
    import proctree
    import proctree.pytest_plugin

    names = [n for n in proctree.__all__ if isinstance(getattr(proctree, n), type)]
    # subprocess's own exceptions, re-exported as themselves for the one-import swap, are subprocess's.
    names = [n for n in names if getattr(proctree, n) is not getattr(subprocess, n, None)]
    raised = [getattr(proctree, n) for n in names if issubclass(getattr(proctree, n), BaseException)]
    raised.append(proctree.pytest_plugin.ProcessLeakWarning)
    assert len(raised) >= 10
    assert [c.__name__ for c in raised if c.__module__ != "proctree._errors"] == []


def _import_time_edges(module, types=False, source=None):
    """The proctree modules module imports when it is imported (not in functions); with types, also those
    imported under TYPE_CHECKING (what a type checker follows). source: read as module's, else its file."""
    path, is_pkg = MODULES.get(module, (None, False))
    if source is None:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    tree = ast.parse(source)
    edges = set()

    def walk(nodes):
        for n in nodes:
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                edges.update(t for t in _resolve(module, is_pkg, n) if t in MODULES)
            elif isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
                walk(n.body if types else [])
                walk(n.orelse)
            elif isinstance(n, (ast.If, ast.Try)):
                walk(n.body)
                walk(n.orelse)
                walk(getattr(n, "finalbody", []))
                for h in getattr(n, "handlers", []):
                    walk(h.body)

    walk(tree.body)
    return edges - {module}


def _circles(graph):
    """Each circle of imports in graph (module -> the modules it imports), as "a -> b -> a"."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    circles = []

    def visit(m, path):
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                circles.append(" -> ".join(path[path.index(t) :] + [t]))
            elif t not in state:
                visit(t, path + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return circles


def test_no_circle_of_imports():
    circles = _circles({m: _import_time_edges(m) for m in MODULES})
    assert not circles, "import circles (at import time):\n" + "\n".join(circles)


# Type-only circles still standing -> why. A new one fails; one that is gone is removed here.
TYPE_CIRCLES_ALLOWED: dict[str, str] = {}


def test_no_circle_of_imports_even_for_types():
    # A module that imports another only for its types still depends on it: a reader of either needs both.
    circles = _circles({m: _import_time_edges(m, types=True) for m in MODULES})
    assert sorted(set(circles) - set(TYPE_CIRCLES_ALLOWED)) == [], "type-only import circles"
    assert sorted(set(TYPE_CIRCLES_ALLOWED) - set(circles)) == [], "an allowed circle is gone: remove it here"


@pytest.mark.parametrize("types", [False, True])
def test_the_circle_check_catches_a_planted_circle(types):
    # tree.py imports keeperloss at import time; a keeperloss that named Tree again, even only for its types.
    planted = "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from .tree import Tree\nelse:\n    import os\n"
    graph = {m: _import_time_edges(m, types=types) for m in MODULES}
    graph["proctree._containment.keeperloss"] = _import_time_edges(
        "proctree._containment.keeperloss", types=types, source=planted
    )
    found = [c for c in _circles(graph) if "keeperloss" in c]
    assert bool(found) is types, found
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a -> b -> c -> a"]
    assert _circles({"a": {"b"}, "b": set()}) == []
