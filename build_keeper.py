"""Builds the native keeper, proctree/proctree-keeper, beside the extension module.

setup.py runs this as part of build_ext, so every wheel, sdist build and
editable install has the keeper next to proctree._core. It is compiled from
csrc/keeper/ (the shared files and the platform's) and the core's own sources (the same ones build_ffi.py
compiles into the module), with the compiler setuptools chose for the module
(so CC, CFLAGS and macOS's ARCHFLAGS apply alike) and warnings as errors.

On Linux the keeper is linked statically where the C library allows it: a
dynamic glibc maps ~1.5 MB of shared pages into every keeper's resident set,
static it is ~0.8 MB. PROCTREE_KEEPER_STATIC=0 forces a dynamic link.
"""

from __future__ import annotations

import os
import sys

from setuptools.command.build_ext import build_ext
from setuptools.dist import Distribution

# setuptools has no build_scripts of its own: the one it runs is distutils' (its vendored copy).
build_scripts = Distribution().get_command_class("build_scripts")

KEEPER_NAME = "proctree-keeper"  # spawn() looks for this file in the package directory
INIT_NAME = "proctree-init"  # `proctree run` in native code (Linux only), beside the keeper; cli/_native.py finds it
ENTER_NAME = "proctree-enter"  # proctree.Popen's exec step (Linux only), beside the keeper
ENTER_SOURCES = {"linux": ["csrc/popen/enter_linux.c"]}
# The step without glibc (x86_64 and aarch64): its own system calls, no start-up cost (csrc/popen/nolibc_linux.c).
ENTER_NOLIBC = "csrc/popen/nolibc_linux.c"
NOLIBC_FLAGS = ["-ffreestanding", "-fno-stack-protector", "-fno-builtin", "-U_FORTIFY_SOURCE"]
FLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror"]


KEEPER_SHARED = ["keeper.c", "args.c", "status.c", "send.c", "members.c", "events.c", "teardown.c", "start.c"]
KEEPER_PLATFORM = {
    "linux": ["keeper_linux.c", "events_linux.c", "cgroup_linux.c"],
    "darwin": ["keeper_macos.c", "events_macos.c"],
}


# The runner is the keeper's sources but its main (keeper.c) and owner events (events.c), plus its own init*.c.
INIT_OWN = [
    "init.c",
    "init_keep.c",
    "init_report.c",
    "init_args.c",
    "init_help.c",
    "init_receipt.c",
    "init_cgroup.c",
    "init_events.c",
]


def init_sources(platform: str = sys.platform) -> list[str]:
    """The C files proctree-init is built from (Linux only: it needs a signalfd, subreapers and cgroup v2)."""
    keeper = [s for s in keeper_sources(platform) if s.rsplit("/", 1)[-1] not in ("keeper.c", "events.c")]
    return [f"csrc/keeper/{name}" for name in INIT_OWN] + keeper


def keeper_own_sources(platform: str = sys.platform) -> list[str]:
    """The keeper's own C files (csrc/keeper/), shared and platform ones, for this platform."""
    if platform.startswith("linux"):
        own = KEEPER_PLATFORM["linux"]
    elif platform == "darwin":
        own = KEEPER_PLATFORM["darwin"]
    else:
        raise RuntimeError(f"proctree supports Linux and macOS, not {platform}")
    return [f"csrc/keeper/{name}" for name in [*KEEPER_SHARED, *own]]


def keeper_sources(platform: str = sys.platform) -> list[str]:
    """The C files the keeper is built from: its own and the core's, for this platform."""
    if platform.startswith("linux"):
        core = ["csrc/core/linux_proc.c", "csrc/core/linux_table.c", "csrc/core/linux_procargs.c"]
    elif platform == "darwin":
        core = ["csrc/core/macos_proc.c", "csrc/core/macos_table.c", "csrc/core/macos_procargs.c"]
    else:
        raise RuntimeError(f"proctree supports Linux and macOS, not {platform}")
    return [*keeper_own_sources(platform), *core, "csrc/core/walk.c", "csrc/core/args.c"]


def want_static(platform: str = sys.platform) -> bool:
    """Whether to try a static link first (Linux only; macOS has no static libc)."""
    return platform.startswith("linux") and os.environ.get("PROCTREE_KEEPER_STATIC", "1") != "0"


class build_ext_with_keeper(build_ext):
    """build_ext that also builds the keeper program into the package directory."""

    def run(self) -> None:
        super().run()
        self.build_keeper()
        if sys.platform.startswith("linux"):
            self.build_enter()
            self.build_init()

    def keeper_path(self) -> str:
        # Where the extension goes (build/lib.../proctree, or the source tree in place).
        return os.path.join(os.path.dirname(self.get_ext_fullpath("proctree._core")), KEEPER_NAME)

    def enter_path(self) -> str:
        return os.path.join(os.path.dirname(self.keeper_path()), ENTER_NAME)

    def init_path(self) -> str:
        return os.path.join(os.path.dirname(self.keeper_path()), INIT_NAME)

    def build_init(self) -> None:
        """`proctree run` in native code: the keeper's sources with the runner's main."""
        version = [("PROCTREE_VERSION", f'"{self.distribution.get_version()}"')]  # its --version
        self._build_program(init_sources(), self.init_path(), "init", macros=version)

    def build_keeper(self) -> None:
        self._build_program(keeper_sources(), self.keeper_path(), "keeper")

    def build_enter(self) -> None:
        """proctree.Popen's exec step: clones the command into its cgroup, which execs in place.

        Freestanding where that builds and runs (x86_64 and aarch64 with gcc or
        clang; PROCTREE_ENTER_LIBC=1 skips it), else on the C library.
        """
        from setuptools.errors import CompileError, LinkError

        out = self.enter_path()
        if os.environ.get("PROCTREE_ENTER_LIBC", "0") in ("", "0"):
            try:
                objects = self.compiler.compile(
                    [*ENTER_SOURCES["linux"], ENTER_NOLIBC],
                    output_dir=os.path.join(self.build_temp, "enter-nolibc"),
                    include_dirs=["csrc/include"],
                    extra_postargs=[*FLAGS, *NOLIBC_FLAGS],
                )
                os.makedirs(os.path.dirname(out), exist_ok=True)
                self.compiler.link_executable(objects, out, extra_postargs=["-nostdlib", "-static", "-s"])
                if _runs(out):
                    return
                self.announce("proctree: the freestanding exec step does not run here; using the C library", level=2)
            except (CompileError, LinkError):
                self.announce("proctree: no freestanding exec step for this target; using the C library", level=2)
        self._build_program(ENTER_SOURCES["linux"], out, "enter")

    def _build_program(
        self, sources: list[str], out: str, name: str, macros: list[tuple[str, str]] | None = None
    ) -> None:
        from setuptools.errors import LinkError

        objects = self.compiler.compile(
            sources,
            output_dir=os.path.join(self.build_temp, name),
            macros=macros or [],
            include_dirs=["csrc/include"],
            extra_postargs=FLAGS,
        )
        os.makedirs(os.path.dirname(out), exist_ok=True)
        # Stripped on Linux: the wheel carries no debug info for it (macOS's ld has no -s).
        strip = ["-s"] if sys.platform.startswith("linux") else []
        if want_static():
            try:
                self.compiler.link_executable(objects, out, extra_postargs=["-static", *strip])
                return
            except LinkError:
                self.announce(f"proctree: no static libc here; linking the {name} dynamically", level=2)
        self.compiler.link_executable(objects, out, extra_postargs=strip)

    def get_outputs(self) -> list[str]:
        enter = [self.enter_path(), self.init_path()] if sys.platform.startswith("linux") else []
        return [*super().get_outputs(), self.keeper_path(), *enter]


def _runs(step: str) -> bool:
    """Whether the exec step starts and refuses an empty command line as it should (status 127)."""
    import subprocess

    try:
        return subprocess.run([step], stdin=subprocess.DEVNULL, capture_output=True, timeout=10).returncode == 127
    except (OSError, subprocess.SubprocessError):
        return False


class build_scripts_with_init(build_scripts):
    """build_scripts that puts proctree-init, as build_ext compiled it, among the scripts (Linux only).

    setup.py names it as the one script (so that build and install run this step), and the wheel carries it in
    .data/scripts/: pip installs it beside the `proctree` script, on the PATH, as the program itself (not a
    wrapper), so that `ENTRYPOINT ["proctree-init", "--"]` works after `pip install proctree`. A compiled program
    is copied as it is: the base class would read it as text, to rewrite a Python shebang.
    """

    def get_source_files(self) -> list[str]:
        return []  # a build product: never in the sdist

    def run(self) -> None:
        if not self.scripts:
            return
        builder = self.get_finalized_command("build_ext")
        program = builder.init_path()
        if not os.path.exists(program):
            self.run_command("build_ext")
        self.mkpath(self.build_dir)
        out = os.path.join(self.build_dir, INIT_NAME)
        self.copy_file(program, out)
        os.chmod(out, 0o755)
