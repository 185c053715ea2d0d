# Only the build hooks and the wheel tag live here: setuptools still needs
# setup() for cffi_modules and the command class that builds the keeper
# program (build_keeper.py). Everything else is in pyproject.toml.
import os
import sys
import sysconfig

from setuptools import setup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # build_keeper.py, beside this file
from build_keeper import INIT_NAME, build_ext_with_keeper, build_scripts_with_init  # noqa: E402

# Free-threaded CPython (3.13t, 3.14t) has no limited API, and setuptools
# refuses py_limited_api there: such a build gets a wheel for its own
# interpreter version instead of abi3. build_ffi.py makes the same choice for
# the module itself.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

# proctree-init on the PATH beside the `proctree` script (Linux: the only place it is built); build_scripts_with_init
# copies the compiled program in place of a script of this name.
SCRIPTS = [INIT_NAME] if sys.platform.startswith("linux") else []

setup(
    cffi_modules=["build_ffi.py:ffibuilder"],
    cmdclass={"build_ext": build_ext_with_keeper, "build_scripts": build_scripts_with_init},
    scripts=SCRIPTS,
    options={} if FREE_THREADED else {"bdist_wheel": {"py_limited_api": "cp310"}},
)
