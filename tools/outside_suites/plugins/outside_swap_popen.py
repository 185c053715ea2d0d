"""pytest plugin (loaded with -p): subprocess.Popen is proctree.Popen from here on.

-p plugins load before conftest files, entry-point plugins and test modules,
so every module of the project under test that imports subprocess later, and
every `from subprocess import Popen` in it, gets proctree's class: the global
swap a user would make at the top of their program.
"""

import subprocess

import proctree

subprocess.Popen = proctree.Popen  # type: ignore[misc]
