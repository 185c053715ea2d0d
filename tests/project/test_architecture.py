"""The layers and their import rules (docs/architecture.md), checked on the source.

An AST read of every module under proctree/: which proctree modules it imports
(absolute or relative, at any depth in the file), mapped to layers. Nothing
is imported or run. Dynamic imports (importlib with a computed name) are the
facade's and the command table's, and are not followed.
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
FACADE = {"proctree", "proctree.__main__", "proctree.subprocess"}  # proctree.subprocess: the public subprocess stand-in
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


def imports(module):
    """[(imported module, lineno, at module level)] for module."""
    path, is_pkg = MODULES[module]
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    top = {id(n) for n in tree.body}
    # Imports inside a module-level try/if still run at import time.
    for n in tree.body:
        if isinstance(n, (ast.Try, ast.If)):
            for sub in ast.walk(n):
                if not isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    top.add(id(sub))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in _resolve(module, is_pkg, node):
                found.append((target, node.lineno, id(node) in top))
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_has_a_layer(module):
    assert module in FACADE or layer_of(module) is not None, f"{module}: add it to LAYERS and docs/architecture.md"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m not in FACADE))
def test_layers_import_only_from_layers_above(module):
    mine = layer_of(module)
    bad = [
        f"{module}:{line} imports {target} (layer {layer_of(target)} > {mine})"
        for target, line, _ in imports(module)
        if target not in FACADE and (layer_of(target) or 0) > mine
    ]
    assert not bad, "\n".join(bad)


def test_only_the_binding_imports_the_compiled_module():
    users = sorted({m for m in MODULES for t, _, _ in imports(m) if t == "proctree._core"})
    assert users == ["proctree._table.binding"]


def test_nothing_outside_containment_imports_its_mechanisms():
    bad = [
        f"{m}:{line} imports {t}"
        for m in MODULES
        if not m.startswith("proctree._containment")
        for t, line, _ in imports(m)
        if t in MECHANISMS
    ]
    assert not bad, "\n".join(bad)


# The one exception to the public-API rule: `proctree up` (and `proctree check`, which reads the plan up
# reads, cli/_plan.py) runs the Procfile runner's pure package (foreman's exit rule, honcho's options, the
# plan's ServiceSpecs), which is no public API of the library.
CLI_PRIVATE_USES = {m: {"_procfile"} for m in ("proctree.cli.up", "proctree.cli._plan", "proctree.cli.check")}
# And the pytest plugin's: its entry point runs its own package, and its helpers ask proctree.Popen's holding
# tree which processes are the holder's (popenhold.held_pids), never a test's leak.
CLI_PRIVATE_USES["proctree.pytest_plugin"] = {"_plugin"}
CLI_PRIVATE_USES["proctree._plugin.helpers"] = {"_containment"}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer_of(m) == 6))
def test_cli_and_demo_use_the_public_api(module):
    # Their own package, the public API, the base layer; and the CLI runs the demo.
    allowed = {module.split(".")[1]} | ({"demo"} if module.startswith("proctree.cli") else set())
    allowed |= CLI_PRIVATE_USES.get(module, set())
    bad = [
        f"{module}:{line} imports {t}"
        for t, line, _ in imports(module)
        if t not in FACADE and layer_of(t) != 0 and t.split(".")[1] not in allowed
    ]
    assert not bad, "\n".join(bad)


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


def test_the_reaper_imports_of_containment_only_its_evidence():
    bad = [
        f"{m}:{line} imports {t}"
        for m in MODULES
        if m.startswith("proctree._reaper")
        for t, line, _ in imports(m)
        if t.startswith("proctree._containment") and not t.startswith("proctree._containment.evidence")
    ]
    assert not bad, "\n".join(bad)


def _import_time_edges(module):
    """The proctree modules module imports when it is imported (not in functions, not under TYPE_CHECKING)."""
    path, is_pkg = MODULES[module]
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    edges = set()

    def walk(nodes):
        for n in nodes:
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                edges.update(t for t in _resolve(module, is_pkg, n) if t in MODULES)
            elif isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
                walk(n.orelse)
            elif isinstance(n, (ast.If, ast.Try)):
                walk(n.body)
                walk(n.orelse)
                walk(getattr(n, "finalbody", []))
                for h in getattr(n, "handlers", []):
                    walk(h.body)

    walk(tree.body)
    return edges


def test_no_circle_of_imports():
    graph = {m: _import_time_edges(m) - {m} for m in MODULES}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    circles = []

    def visit(m, path):
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                circles.append(" -> ".join(path[path.index(t) :] + [t]))
            elif t not in state:
                visit(t, path + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not circles, "import circles (at import time):\n" + "\n".join(circles)
