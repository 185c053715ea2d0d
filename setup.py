# Only the cffi hook lives here: setuptools still needs setup() for cffi_modules.
from setuptools import setup

setup(
    cffi_modules=["build_ffi.py:ffibuilder"],
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
