"""A newcomer's first minutes: the checkout without its build, the public namespace, the version.

The checkout test imports proctree from a copy of the source tree that has no
compiled core (as `python -c` does inside a fresh clone) in a subprocess.
"""

import os
import shutil
import subprocess
import sys

import pytest

import proctree

PKG_DIR = os.path.dirname(os.path.abspath(proctree.__file__))
# Run the installed package (or the in-place build), never bare sources.
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(PKG_DIR))


def _copy_sources(dest):
    """dest/proctree (the .py files only: no _core, no keeper), dest/setup.py and dest/csrc, as a clone has."""
    shutil.copytree(
        PKG_DIR, os.path.join(dest, "proctree"), ignore=shutil.ignore_patterns("*.so", "__pycache__", "proctree-keeper")
    )
    with open(os.path.join(dest, "setup.py"), "w") as f:
        f.write("# a checkout's setup.py\n")
    os.mkdir(os.path.join(dest, "csrc"))


def _import_in(cwd, code):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60, env=env)


def test_a_checkout_without_its_core_says_why_and_the_ways_out(tmp_path):
    _copy_sources(tmp_path)
    r = _import_in(tmp_path, "import proctree; proctree.snapshot()")
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: proctree was imported from a source checkout")
    assert str(tmp_path / "proctree") in last
    for way_out in ("run from another directory", "pip install -e .", "python setup.py build_ext --inplace"):
        assert way_out in last
    assert "cannot import name" not in r.stderr  # the original error is replaced, not chained


def test_the_missing_core_error_is_an_import_error_naming_the_module(tmp_path):
    _copy_sources(tmp_path)
    code = "import proctree\ntry:\n    proctree.proc(1)\nexcept ImportError as e:\n    print(e.name)\n"
    r = _import_in(tmp_path, code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "proctree._core"


def test_a_broken_installation_says_reinstall(tmp_path):
    # No setup.py or csrc beside it: an installed package that lost its core.
    shutil.copytree(PKG_DIR, tmp_path / "proctree", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    r = _import_in(tmp_path, "import proctree; proctree.snapshot()")
    assert r.returncode == 1
    assert "the installation is broken; reinstall it" in r.stderr


def test_import_alone_still_works_without_the_core(tmp_path):
    # `import proctree` loads no compiled code: a tool can read __all__ or the docs without a build.
    _copy_sources(tmp_path)
    r = _import_in(tmp_path, "import proctree; print(len(proctree.__all__))")
    assert r.returncode == 0, r.stderr


# -- the public namespace ------------------------------------------------------------

NAMESPACE_CHECK = """
import proctree
for name in proctree.__all__:
    getattr(proctree, name)  # every lazy name loaded: none may bring a stray global with it
stray = sorted(n for n in vars(proctree) if not n.startswith("_") and n not in proctree.__all__)
listed = sorted(n for n in dir(proctree) if not n.startswith("__"))
print(stray, listed == sorted(proctree.__all__))
"""


def test_the_public_namespace_holds_only_the_public_api():
    r = subprocess.run([sys.executable, "-c", NAMESPACE_CHECK], capture_output=True, text=True, timeout=60, env=ENV)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["[]", "True"]


def test_dir_lists_the_version():
    assert "__version__" in dir(proctree)
    for helper in ("TYPE_CHECKING", "annotations", "importlib", "_LAZY"):
        assert helper not in dir(proctree)


# -- snap[pid] ----------------------------------------------------------------------


def _free_pid():
    with open("/proc/sys/kernel/pid_max") as f:
        return int(f.read())  # never assigned: pids are below pid_max


def test_a_missing_pid_raises_no_such_process_that_is_also_a_key_error():
    snap = proctree.snapshot()
    pid = _free_pid()
    with pytest.raises(proctree.NoSuchProcess) as caught:
        snap[pid]
    assert isinstance(caught.value, KeyError)
    assert caught.value.pid == pid
    # Mapping semantics hold: membership and get() never raise.
    assert pid not in snap and snap.get(pid) is None and snap.get(pid, "x") == "x"


@pytest.mark.parametrize("key", ["1", 1.0, None, True, (1,)])
def test_a_key_that_is_not_a_pid_is_a_plain_key_error(key):
    snap = proctree.Snapshot([proctree.Proc(1, 0, 1, 1, 0, "S", 1, "init")])
    with pytest.raises(KeyError) as caught:
        snap[key]
    assert not isinstance(caught.value, proctree.NoSuchProcess)


def test_the_missing_pid_error_pickles():
    import pickle

    try:
        proctree.snapshot()[_free_pid()]
    except proctree.NoSuchProcess as exc:
        again = pickle.loads(pickle.dumps(exc))
        assert type(again) is type(exc) and again.pid == exc.pid and isinstance(again, KeyError)


# -- the version and the changelog --------------------------------------------------

ROOT = os.path.dirname(PKG_DIR)


def _checkout_file(name):
    path = os.path.join(ROOT, name)
    if not os.path.isfile(path):
        pytest.skip(f"no {name} next to the package (an installed wheel)")
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_the_version_is_written_once_and_read_back_everywhere():
    import re

    pyproject = _checkout_file("pyproject.toml")
    (written,) = re.findall(r'(?m)^version = "([^"]+)"$', pyproject)
    r = subprocess.run(
        [sys.executable, "-m", "proctree", "--version"], capture_output=True, text=True, timeout=60, env=ENV
    )
    assert r.stdout == f"proctree {proctree.__version__}\n"
    if proctree.__version__ != written:
        pytest.skip("the installed metadata is from another build of the checkout")
    for path, _, files in os.walk(PKG_DIR):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(path, f), encoding="utf-8") as src:
                    assert f'"{written}"' not in src.read(), f  # never written twice


def test_the_changelog_has_an_unreleased_section_and_the_current_version():
    import re

    changelog = _checkout_file("CHANGELOG.md")
    (written,) = re.findall(r'(?m)^version = "([^"]+)"$', _checkout_file("pyproject.toml"))
    headings = re.findall(r"(?m)^## \[([^\]]+)\]", changelog)
    assert headings[0] == "Unreleased"
    assert written in headings  # a release renames Unreleased to the version it sets
    for section in re.findall(r"(?m)^### (.+)$", changelog):
        assert section in {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_the_command_in_a_checkout_without_its_core_says_so_without_a_traceback(tmp_path):
    _copy_sources(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(
        [sys.executable, "-m", "proctree", "tree", "1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert (
        r.stderr.startswith("proctree: proctree was imported from a source checkout") and "pip install -e ." in r.stderr
    )


@pytest.mark.parametrize(
    "argv", [["--version"], ["--help"], ["tree", "1"], ["kill", "--help"], ["reap", "--help"], ["kill", "SLEEPER"]]
)
def test_a_quick_command_imports_neither_asyncio_nor_the_metadata_machinery(argv):
    # `proctree --version`, `tree` and `kill` start in tens of milliseconds: only the command
    # that runs is imported (`up` brings asyncio), and the version is read from the
    # installed metadata's directory name, not through importlib.metadata.
    sleeper = subprocess.Popen(["sleep", "60"])
    argv = [str(sleeper.pid) if a == "SLEEPER" else a for a in argv]
    probe = (
        "import sys, contextlib, io\n"
        "import proctree.cli as c\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        c.main({argv!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in ('asyncio', 'importlib.metadata', 'proctree._procfile') "
        "if m in sys.modules))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.dirname(PKG_DIR))
    try:
        r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", f"{argv} imported {r.stdout.strip()}"
