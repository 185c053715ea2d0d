"""The error for a missing compiled core, saying why it is missing and the ways out.

The usual cause is a source checkout on sys.path ahead of the installed
package (Python puts the current directory first for `python -c` and
`python -m`): its proctree/ holds the Python sources only, until the core is
built in place. Must never import the compiled module itself.
"""

from __future__ import annotations

import os


def _is_checkout(package_dir: str) -> bool:
    """Whether package_dir is proctree/ inside a source tree (setup.py and the C sources beside it)."""
    root = os.path.dirname(package_dir)
    return os.path.isfile(os.path.join(root, "setup.py")) and os.path.isdir(os.path.join(root, "csrc"))


def missing_core_error(package_dir: str, cause: ImportError) -> ImportError:
    """The ImportError to raise when `from proctree import _core` failed with cause."""
    if _is_checkout(package_dir):
        message = (
            f"proctree was imported from a source checkout ({package_dir}) whose compiled core "
            "(proctree/_core) is not built: Python put the checkout ahead of any installed proctree "
            "(the current directory comes first on sys.path for `python -c` and `python -m`). "
            "Either run from another directory, so that the installed proctree is imported "
            "(`pip install .` in the checkout installs it), or build the core in place in the checkout: "
            "`pip install -e .` (or `python setup.py build_ext --inplace`, which needs setuptools>=77 "
            "and cffi installed)."
        )
    else:
        message = (
            f"proctree's compiled core (proctree/_core) is missing or unloadable in {package_dir} ({cause}): "
            "the installation is broken; reinstall it (`pip install --force-reinstall proctree`)."
        )
    error = ImportError(message, name="proctree._core")
    return error
