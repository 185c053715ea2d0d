"""Builds proctree._core, the cffi extension over csrc/ (out-of-line API mode).

The cdef is csrc/include/proctree.h itself, read through cdef_from_header()
(cffi's parser runs no preprocessor), so the contract is written once; the
platform picks the implementation file. The module is built against the limited API (abi3),
except on free-threaded CPython, which has none (setup.py tags the wheel to
match).
"""

import pathlib
import re
import sys
import sysconfig

from cffi import FFI

HERE = pathlib.Path(__file__).resolve().parent
CSRC = HERE / "csrc"
INCLUDE = CSRC / "include"

if sys.platform.startswith("linux"):
    SOURCES = [
        "csrc/core/linux_proc.c",
        "csrc/core/linux_table.c",
        "csrc/core/linux_procargs.c",
        "csrc/core/walk.c",
        "csrc/core/args.c",
        "csrc/core/facts_linux.c",
        "csrc/core/facts_parse.c",
    ]
elif sys.platform == "darwin":
    SOURCES = [
        "csrc/core/macos_proc.c",
        "csrc/core/macos_table.c",
        "csrc/core/macos_procargs.c",
        "csrc/core/walk.c",
        "csrc/core/args.c",
        "csrc/core/facts_macos.c",
        "csrc/core/facts_macos_row.c",
        "csrc/core/facts_parse.c",
    ]
else:
    raise RuntimeError(f"proctree supports Linux and macOS, not {sys.platform}")

# Py_GIL_DISABLED is set on free-threaded builds (3.13t, 3.14t), where
# Py_LIMITED_API cannot be used.
LIMITED_API = not sysconfig.get_config_var("Py_GIL_DISABLED")


def cdef_from_header(text: str) -> str:
    """A C header as cffi's cdef: comments, preprocessor lines and _Static_assert lines removed (cffi runs no
    preprocessor), integer macros replaced by their values where they are used (so the module gains no constants)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    integers = dict(re.findall(r"^#define (\w+) (\d+)$", text, flags=re.M))
    kept = [line for line in text.splitlines() if not line.startswith(("#", "_Static_assert"))]
    body = "\n".join(kept)
    for name, value in integers.items():
        body = re.sub(rf"\b{name}\b", value, body)
    return re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"


ffibuilder = FFI()
ffibuilder.cdef(cdef_from_header((INCLUDE / "proctree.h").read_text()))
ffibuilder.set_source(
    "proctree._core",
    '#include "proctree.h"',
    sources=SOURCES,
    include_dirs=["csrc/include"],
    extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra"],
    py_limited_api=LIMITED_API,
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
