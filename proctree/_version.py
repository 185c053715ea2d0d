"""proctree's version, as the installed distribution states it, without importlib.metadata's import cost.

importlib.metadata.version("proctree") takes the first proctree distribution
on sys.path; its metadata directory is named ``proctree-<version>.dist-info``
(or ``.egg-info``), so the version is read from the first such name, in the
same order. Only where none is found (a zip on sys.path, an odd layout) is
importlib.metadata asked, at its ~20 ms of imports (`proctree --version`
must start as fast as `proctree tree`).
"""

from __future__ import annotations

import os
import re
import sys

_METADATA_DIR = re.compile(r"(?i)^proctree-([^-]+?)(?:-py[0-9.]+)?\.(?:dist|egg)-info$")


def installed_version() -> str:
    """The version of the first proctree distribution on sys.path; PackageNotFoundError if there is none."""
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for name in names:
            found = _METADATA_DIR.match(name)
            if found and os.path.isdir(os.path.join(entry or ".", name)):
                return found.group(1)
    from importlib.metadata import version

    return version("proctree")
