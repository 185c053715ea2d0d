# Only the cffi hook and the wheel tag live here: setuptools still needs
# setup() for cffi_modules. Everything else is in pyproject.toml.
import sysconfig

from setuptools import setup

# Free-threaded CPython (3.13t, 3.14t) has no limited API, and setuptools
# refuses py_limited_api there: such a build gets a wheel for its own
# interpreter version instead of abi3. build_ffi.py makes the same choice for
# the module itself.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

setup(
    cffi_modules=["build_ffi.py:ffibuilder"],
    options={} if FREE_THREADED else {"bdist_wheel": {"py_limited_api": "cp310"}},
)
