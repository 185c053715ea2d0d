"""proctree's drop-ins are typed as typeshed types subprocess and asyncio's.

The sample programs in tests/typing/ (a script's uses of Popen, run,
check_output, communicate, text modes, the asyncio drop-ins, through
`from proctree import ...`, `import proctree as subprocess` and
`from proctree import subprocess`) must check clean under mypy --strict and
pyright strict, with assert_type on what each call returns; each keyword
typo they hold is marked as an expected error, and an expected error that
vanishes fails too (warn_unused_ignores, reportUnnecessaryTypeIgnoreComment).
The checkers are found in $PROCTREE_TYPING_VENV (.ci/run installs them
there, and there a missing one fails), beside this interpreter, or on PATH;
without them those tests skip. The checkout's proctree is checked as source;
an installed one (CI's wheel runs) from site-packages, as users' checkers
find it. The samples also run, for real. The stub
(_containment/dropintypes.pyi) is compared with what tools/gen_dropin_types.py
makes from the typeshed of the mypy .ci/run pins, and with the running
interpreter's own signatures.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import proctree
from proctree._containment import dropintypes

ROOT = Path(__file__).resolve().parents[2]  # the checkout (or the sdist), above tests/dropin/
TYPING = ROOT / "tests" / "typing"
SAMPLES = sorted(TYPING.glob("sample_*.py"))
GENERATOR = ROOT / "tools" / "gen_dropin_types.py"
STUB = Path(dropintypes.__file__).with_suffix(".pyi")  # the one the imported package ships
CI_SCRIPT = ROOT / ".ci" / "run"
PINNED_MYPY = re.compile(r"^MYPY_VERSION=(\S+)$", re.MULTILINE)
OURS = {"keep_orphans", "detach"}  # proctree's own keywords, beyond typeshed's
CHECKER_TIMEOUT = 300


def checker(*names: str) -> str:
    """The path of the first of names (one type checker's commands) found; skip, or fail where CI put them."""
    venv = os.environ.get("PROCTREE_TYPING_VENV")
    for name in names:
        if venv:  # CI's typing venv: there it must be, or the typing test proves nothing
            place = Path(venv) / "bin" / name
            if place.exists():
                return str(place)
            continue
        place = Path(sys.executable).parent / name
        found = str(place) if place.exists() else shutil.which(name)
        if found is not None:
            return found
    if venv:
        pytest.fail(f"none of {names} in $PROCTREE_TYPING_VENV ({venv})")
    pytest.skip(f"{names[0]} is not installed (.ci/run installs it into $PROCTREE_TYPING_VENV)")


def pyright() -> str:
    return checker("basedpyright", "pyright")


def test_there_are_samples():
    assert len(SAMPLES) >= 4, SAMPLES


# The checkout's proctree is checked as its source; an installed one (the wheel CI tests) as a user's
# checker finds it: in site-packages, by its py.typed and the stub the wheel ships.
INSTALLED = not Path(proctree.__file__).resolve().is_relative_to(ROOT)


def _samples_in(place: Path) -> list[str]:
    """The samples where the checkers will read them: in place, or copied away from the sources."""
    if not INSTALLED:
        return [str(s) for s in SAMPLES]
    place.mkdir()
    for s in SAMPLES:
        shutil.copy(s, place / s.name)
    return [str(place / s.name) for s in SAMPLES]


@pytest.mark.parametrize("version", ["3.10", "{}.{}".format(*sys.version_info[:2])])
def test_samples_check_clean_under_mypy_strict(version, tmp_path):
    mypy = checker("mypy")
    samples = _samples_in(tmp_path / "samples")
    where = ["--python-executable", sys.executable] if INSTALLED else []
    done = subprocess.run(
        [mypy, "--config-file", str(TYPING / "mypy.ini"), "--python-version", version, "--cache-dir", str(tmp_path)]
        + where
        + samples,
        capture_output=True,
        text=True,
        cwd=tmp_path if INSTALLED else ROOT,
        env={**os.environ, "MYPYPATH": "" if INSTALLED else str(ROOT)},
        timeout=CHECKER_TIMEOUT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"Success: no issues found in {len(SAMPLES)} source files"), done.stdout


def test_samples_check_clean_under_pyright_strict(tmp_path):
    config = TYPING / "pyrightconfig.json"
    if INSTALLED:
        _samples_in(tmp_path / "samples")
        settings = json.loads(config.read_text())
        del settings["extraPaths"]  # the installed package, from site-packages
        settings["include"] = ["samples"]
        config = tmp_path / "pyrightconfig.json"
        config.write_text(json.dumps(settings))
    done = subprocess.run(
        [pyright(), "-p", str(config), "--pythonpath", sys.executable, "--outputjson"],
        capture_output=True,
        text=True,
        cwd=config.parent,
        timeout=CHECKER_TIMEOUT,
    )
    report = json.loads(done.stdout)
    found = [f"{d['file']}:{d['range']['start']['line'] + 1}: {d['message']}" for d in report["generalDiagnostics"]]
    assert (done.returncode, found) == (0, []), done.stderr
    assert report["summary"]["filesAnalyzed"] == len(SAMPLES)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_samples_run(sample):
    if sys.version_info < (3, 11) and importlib.util.find_spec("typing_extensions") is None:
        pytest.skip("the samples' assert_type comes from typing_extensions before 3.11")
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("the samples start contained commands: cgroup v2 (root, Linux)")
    done = subprocess.run([sys.executable, str(sample)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["ok"]


def test_the_stub_is_what_the_generator_makes_from_typeshed():
    if not GENERATOR.exists():
        pytest.skip("tools/ is not here")
    python = Path(checker("mypy")).parent / "python"
    if not python.exists():
        pytest.skip("mypy's interpreter is not beside it: its typeshed cannot be found")
    where, version = subprocess.run(
        [
            str(python),
            "-c",
            "import mypy, mypy.version, os; print(os.path.dirname(mypy.__file__), mypy.version.__version__)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    pinned = PINNED_MYPY.search(CI_SCRIPT.read_text()).group(1) if CI_SCRIPT.exists() else None  # type: ignore[union-attr]
    if not os.environ.get("PROCTREE_TYPING_VENV") and version != pinned:
        # The stub follows the typeshed of the mypy CI pins; another mypy's typeshed may be newer or older.
        pytest.skip(f"mypy {version} is not the one .ci/run pins ({pinned})")
    spec = importlib.util.spec_from_file_location("gen_dropin_types", GENERATOR)
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    made = generator.generate(os.path.join(where, "typeshed", "stdlib"))
    # Compared as syntax trees, so formatting is not the question.
    assert ast.dump(ast.parse(made)) == ast.dump(ast.parse(STUB.read_text())), (
        "dropintypes.pyi is not typeshed's: run `python tools/gen_dropin_types.py` with the pinned mypy installed"
    )


# -- the stub against the running interpreter ----------------------------------------------------


def _branch(body: list[ast.stmt]) -> list[ast.stmt]:
    """body with each sys.version_info test resolved for the running interpreter (typeshed's `>=` tests)."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If) and "sys.version_info" in ast.unparse(node.test):
            compare = node.test
            assert isinstance(compare, ast.Compare) and isinstance(compare.ops[0], ast.GtE), ast.unparse(compare)
            wanted = ast.literal_eval(compare.comparators[0])
            out += _branch(node.body if sys.version_info >= wanted else node.orelse)
        else:
            out.append(node)
    return out


def _stub_signatures() -> dict[str, list[list[str]]]:
    """name -> the parameter names of each of its overloads in the stub (Popen.__init__ as 'Popen')."""
    tree = ast.parse(STUB.read_text())
    found: dict[str, list[list[str]]] = {}
    for node in _branch(tree.body):
        if isinstance(node, ast.ClassDef) and node.name == "Popen":
            for method in _branch(node.body):
                if isinstance(method, ast.FunctionDef) and method.name == "__init__":
                    found.setdefault("Popen", []).append(_names(method.args)[1:])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(node.name, []).append(_names(node.args))
    return found


def _names(args: ast.arguments) -> list[str]:
    every = [*args.posonlyargs, *args.args, *([args.vararg] if args.vararg else []), *args.kwonlyargs]
    return [a.arg for a in every]


def _runtime(fn: Any) -> list[str]:
    return [
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD and p.name != "self"
    ]


STUBS = _stub_signatures()
POPEN_NAMES = set(_runtime(subprocess.Popen.__init__))


def test_the_stub_types_every_drop_in():
    assert sorted(STUBS) == sorted(dropintypes.__all__)
    assert len(STUBS["Popen"]) == 6 and len(STUBS["run"]) == 6 and len(STUBS["check_output"]) == 6


@pytest.mark.parametrize("name", ["Popen", "run", "call", "check_call", "check_output"])
def test_every_overload_takes_popen_s_arguments_and_proctree_s(name):
    own = {"run": {"capture_output", "check", "input", "timeout"}, "check_output": {"input", "timeout"}}
    own["call"] = own["check_call"] = {"timeout"}
    # What typeshed leaves out (check_output sets stdout itself; call's errors= is a gap typeshed has):
    # kept as typeshed has it, so proctree's types are exactly subprocess's.
    left_out = {"check_output": {"stdout"}, "call": {"errors"}, "check_call": {"errors"}}
    for params in STUBS[name]:
        assert params[-2:] == ["keep_orphans", "detach"]
        assert set(params) == (POPEN_NAMES - left_out.get(name, set())) | OURS | own.get(name, set())
    runtime = set(_runtime(getattr(subprocess, name)))  # run's own keywords; the rest goes to Popen
    assert runtime - {"popenargs", "args"} <= own.get(name, set()) | POPEN_NAMES


def test_popen_s_runtime_signature_is_a_stub_overload_s():
    runtime = _runtime(proctree.Popen.__init__)
    assert runtime[: len(POPEN_NAMES)] == _runtime(subprocess.Popen.__init__)
    assert set(runtime) <= set(STUBS["Popen"][-1])  # detach may not be taken yet where another change adds it
    assert "keep_orphans" in runtime


@pytest.mark.parametrize("name", ["getoutput", "getstatusoutput"])
def test_the_shell_helpers_match_the_running_interpreter(name):
    assert STUBS[name] == [_runtime(getattr(subprocess, name))]


@pytest.mark.parametrize("name", ["create_subprocess_exec", "create_subprocess_shell"])
def test_the_asyncio_drop_ins_take_asyncio_s_arguments_and_popen_s(name):
    (params,) = STUBS[name]
    assert params[-2:] == ["keep_orphans", "detach"]
    asyncio_own = set(_runtime(getattr(asyncio, name)))  # program/cmd, *args, the std streams, limit
    assert asyncio_own <= set(params)
    assert set(params) - asyncio_own - OURS == POPEN_NAMES - {"args", "stdin", "stdout", "stderr"}
