"""Sizes a reader can hold in mind: no function in proctree/ over 120 lines, no source file over 600 (issue #32)."""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_FUNCTION_LINES = 120
MAX_FILE_LINES = 600  # a file past this holds more than one job: cut it along its seams rather than raise the bound


def _sources(top, suffixes):
    for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in sorted(files):
            if name.endswith(suffixes):
                yield os.path.join(folder, name)


def _long_functions(source, limit):
    """(qualified name, lines) of each function in source longer than limit lines."""
    found = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}."
                if not isinstance(child, ast.ClassDef):
                    lines = child.end_lineno - child.lineno + 1
                    if lines > limit:
                        found.append((name[:-1], lines))
            visit(child, name)

    visit(ast.parse(source), "")
    return found


def test_no_function_in_proctree_is_over_120_lines():
    long = []
    for path in _sources("proctree", (".py",)):
        with open(path, encoding="utf-8") as f:
            long += [(os.path.relpath(path, ROOT), *entry) for entry in _long_functions(f.read(), MAX_FUNCTION_LINES)]
    assert not long, long


def test_no_source_file_is_over_600_lines():
    long = []
    for path in [*_sources("proctree", (".py",)), *_sources("csrc", (".c", ".h"))]:
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > MAX_FILE_LINES:
            long.append((os.path.relpath(path, ROOT), n))
    assert not long, long


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n" + "    x = 1\n" * 5, []),
        ("def f():\n" + "    x = 1\n" * 7, [("f", 8)]),
        ("class C:\n    def m(self):\n" + "        x = 1\n" * 7, [("C.m", 8)]),
        ("async def g():\n    def inner():\n" + "        x = 1\n" * 7, [("g", 9), ("g.inner", 8)]),
    ],
)
def test_the_length_check_finds_long_functions_and_methods(source, expected):
    assert _long_functions(source, 7) == expected
