"""pytest plugin (loaded with -p): subprocess.Popen is proctree.Popen from here on.

-p plugins load before conftest files, entry-point plugins and test modules,
so every module of the project under test that imports subprocess later, and
every `from subprocess import Popen` in it, gets proctree's class: the global
swap a user would make at the top of their program.
"""

import subprocess
from typing import Any

import proctree

subprocess.Popen = proctree.Popen  # type: ignore[misc]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    # A test that restores subprocess.Popen (monkeypatch's undo, a mock) would end the swap for the tests after it.
    held = subprocess.Popen is proctree.Popen
    terminalreporter.write_line(f"outside_suites swap: subprocess.Popen is proctree.Popen at the end: {held}")
