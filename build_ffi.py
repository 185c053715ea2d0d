"""Builds proctree._core, the cffi extension over csrc/ (out-of-line API mode).

The cdef comes verbatim from csrc/include/proctree_cdef.h; the platform picks the
implementation file. The module is built against the limited API (abi3),
except on free-threaded CPython, which has none (setup.py tags the wheel to
match).
"""

import pathlib
import sys
import sysconfig

from cffi import FFI

HERE = pathlib.Path(__file__).resolve().parent
CSRC = HERE / "csrc"
INCLUDE = CSRC / "include"

if sys.platform.startswith("linux"):
    SOURCES = ["csrc/core/linux.c", "csrc/core/walk.c", "csrc/core/args.c"]
elif sys.platform == "darwin":
    SOURCES = ["csrc/core/macos.c", "csrc/core/walk.c", "csrc/core/args.c"]
else:
    raise RuntimeError(f"proctree supports Linux and macOS, not {sys.platform}")

# Py_GIL_DISABLED is set on free-threaded builds (3.13t, 3.14t), where
# Py_LIMITED_API cannot be used.
LIMITED_API = not sysconfig.get_config_var("Py_GIL_DISABLED")

ffibuilder = FFI()
ffibuilder.cdef((INCLUDE / "proctree_cdef.h").read_text())
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
