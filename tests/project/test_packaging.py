"""Packaging: the wheel tag and module flavour on free-threaded CPython, the
installed distribution's metadata, and README links that work on PyPI.

setup.py and build_ffi.py are run here with sysconfig answering for a
free-threaded interpreter (Py_GIL_DISABLED=1) and for a regular one, since
no free-threaded CPython is on the CI machines; setuptools is replaced by a
recorder, so nothing is built. These tests start no processes.
"""

import importlib.metadata
import pathlib
import re
import runpy
import sys
import sysconfig
import types

import pytest

import proctree

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
needs_build_scripts = pytest.mark.skipif(
    not (ROOT / "setup.py").is_file() or not (ROOT / "build_ffi.py").is_file(),
    reason="the tests are not next to setup.py and build_ffi.py (not a checkout or sdist)",
)


def _pretend_gil_disabled(monkeypatch: pytest.MonkeyPatch, value: object) -> None:
    real = sysconfig.get_config_var

    def get_config_var(name: str) -> object:
        return value if name == "Py_GIL_DISABLED" else real(name)

    monkeypatch.setattr(sysconfig, "get_config_var", get_config_var)


def _setup_kwargs(monkeypatch: pytest.MonkeyPatch) -> dict:
    recorded: dict = {}
    fake = types.ModuleType("setuptools")
    fake.setup = lambda **kwargs: recorded.update(kwargs)
    fake.__path__ = []  # a package, for the submodules below
    command = types.ModuleType("setuptools.command")
    command.__path__ = []
    build_ext_module = types.ModuleType("setuptools.command.build_ext")
    build_ext_module.build_ext = type("build_ext", (), {})
    # build_keeper.py takes build_scripts from a Distribution (setuptools has none of its own).
    dist_module = types.ModuleType("setuptools.dist")
    commands = {"build_scripts": type("build_scripts", (), {})}
    dist_module.Distribution = type("Distribution", (), {"get_command_class": lambda self, name: commands[name]})
    monkeypatch.setitem(sys.modules, "setuptools", fake)
    monkeypatch.setitem(sys.modules, "setuptools.command", command)
    monkeypatch.setitem(sys.modules, "setuptools.command.build_ext", build_ext_module)
    monkeypatch.setitem(sys.modules, "setuptools.dist", dist_module)
    monkeypatch.delitem(sys.modules, "build_keeper", raising=False)  # bound to the fake on this run only
    monkeypatch.setattr(sys, "path", list(sys.path))
    runpy.run_path(str(ROOT / "setup.py"), run_name="__main__")
    return recorded


@needs_build_scripts
@pytest.mark.parametrize(
    "gil_disabled, wheel_options",
    [
        (None, {"bdist_wheel": {"py_limited_api": "cp310"}}),  # regular CPython (no such variable)
        (0, {"bdist_wheel": {"py_limited_api": "cp310"}}),
        (1, {}),  # free-threaded: setuptools refuses py_limited_api, the wheel is cp31Xt
    ],
)
def test_setup_tags_abi3_only_where_the_limited_api_exists(monkeypatch, gil_disabled, wheel_options):
    _pretend_gil_disabled(monkeypatch, gil_disabled)
    kwargs = _setup_kwargs(monkeypatch)
    assert kwargs["options"] == wheel_options
    assert kwargs["cffi_modules"] == ["build_ffi.py:ffibuilder"]
    assert kwargs["cmdclass"]["build_ext"].__name__ == "build_ext_with_keeper"  # builds the keeper too
    assert kwargs["cmdclass"]["build_scripts"].__name__ == "build_scripts_with_init"  # proctree-init on the PATH


@needs_build_scripts
@pytest.mark.parametrize("gil_disabled, limited", [(None, True), (0, True), (1, False)])
def test_build_ffi_uses_the_limited_api_only_where_it_exists(monkeypatch, gil_disabled, limited):
    pytest.importorskip("cffi")
    _pretend_gil_disabled(monkeypatch, gil_disabled)
    namespace = runpy.run_path(str(ROOT / "build_ffi.py"), run_name="build_ffi")
    *_, source_kwargs = namespace["ffibuilder"]._assigned_source
    assert source_kwargs["py_limited_api"] is limited


def test_installed_metadata_carries_the_license_expression_and_file():
    dist = importlib.metadata.distribution("proctree")
    assert dist.metadata["License-Expression"] == "MIT"
    assert "LICENSE" in (dist.metadata.get_all("License-File") or [])
    assert not [c for c in dist.metadata.get_all("Classifier") or [] if c.startswith("License ::")]


def test_the_package_version_is_the_distribution_version():
    # pyproject.toml's [project] version is the only place the version is written.
    assert proctree.__version__ == importlib.metadata.version("proctree")
    assert "__version__" not in open(proctree.__file__, encoding="utf-8").read().split("def __getattr__")[0]


@pytest.mark.skipif(not (ROOT / "README.md").is_file(), reason="no README.md next to the tests")
def test_readme_links_are_absolute_so_they_work_on_pypi():
    # PyPI renders README.md with no repository around it: a relative link
    # such as (docs/teardown.md) is a dead link there.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    relative = re.findall(r"\]\((?!https?://|#)([^)]+)\)", readme)
    assert relative == []


@needs_build_scripts
def test_the_cdef_is_the_headers_declarations():
    """cffi reads proctree.h itself: every function it declares, and the struct with its real size, nothing else."""
    cffi = pytest.importorskip("cffi")
    namespace = runpy.run_path(str(ROOT / "build_ffi.py"), run_name="build_ffi")
    header = (ROOT / "csrc" / "include" / "proctree.h").read_text(encoding="utf-8")
    cdef = namespace["cdef_from_header"](header)
    assert "#" not in cdef and "/*" not in cdef and "_Static_assert" not in cdef
    ffi = cffi.FFI()
    ffi.cdef(cdef)  # a declaration cffi cannot parse fails here, not at build time
    declared = set(re.findall(r"^int (pt_\w+)\(", header, re.M))
    assert declared and declared == set(re.findall(r"\b(pt_\w+)\(", cdef))
    assert "char name[64];" in cdef and "#define PT_NAME_MAX 64" in header
    assert ffi.sizeof("struct pt_proc") == 96  # the header's _Static_assert, which the cdef drops


@needs_build_scripts
@pytest.mark.parametrize(
    "platform, core",
    [
        ("linux", ["csrc/core/linux_proc.c", "csrc/core/linux_table.c", "csrc/core/linux_procargs.c"]),
        ("darwin", ["csrc/core/macos_proc.c", "csrc/core/macos_table.c", "csrc/core/macos_procargs.c"]),
    ],
)
def test_the_keeper_is_built_from_the_cores_own_sources(monkeypatch, platform, core):
    monkeypatch.syspath_prepend(str(ROOT))
    import build_keeper

    sources = build_keeper.keeper_sources(platform)
    own = build_keeper.keeper_own_sources(platform)
    assert own[0] == "csrc/keeper/keeper.c"
    assert all(s.startswith("csrc/keeper/") and s.endswith(".c") for s in own)
    assert sources == [*own, *core, "csrc/core/walk.c", "csrc/core/args.c"]
    assert all((ROOT / s).is_file() for s in sources)
    assert {"-Wall", "-Wextra", "-Werror"} <= set(build_keeper.FLAGS)
    assert build_keeper.want_static(platform) == (platform == "linux")
    with pytest.raises(RuntimeError, match="Linux and macOS"):
        build_keeper.keeper_sources("win32")


def test_the_installed_package_holds_an_executable_keeper():
    import os

    from proctree._containment import launch as _launch

    assert pathlib.Path(_launch._KEEPER).parent == pathlib.Path(proctree.__file__).parent
    assert os.path.isfile(_launch._KEEPER) and os.access(_launch._KEEPER, os.X_OK), _launch._KEEPER


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or __import__("platform").machine() not in ("x86_64", "aarch64"),
    reason="the freestanding exec step is built for x86_64 and aarch64 Linux",
)
def test_the_exec_step_is_freestanding_where_it_can_be():
    # Without glibc it starts in microseconds instead of ~0.5 ms: a third of what proctree.Popen adds to a start.
    step = pathlib.Path(proctree.__file__).parent / "proctree-enter"
    data = step.read_bytes()
    assert data[:4] == b"\x7fELF"
    assert len(data) < 64 * 1024, f"{step} is {len(data)} bytes: the glibc build (build_keeper.py fell back)"
    assert b"GLIBC" not in data and b"/ld-linux" not in data
