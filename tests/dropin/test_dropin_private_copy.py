"""The last resort when no genuine subprocess.Popen class can be found: a private copy of the subprocess module,
run from its source, or loaded by importlib's own loader where the source cannot be read (a zipped stdlib)."""

import subprocess

import pytest

from proctree._containment import realpopen


@pytest.fixture
def no_genuine_class(monkeypatch):
    monkeypatch.setattr(realpopen, "_is_genuine", lambda cls: False)
    monkeypatch.setattr(realpopen, "_private", None)


@pytest.mark.parametrize("source", ["readable", "missing"])
def test_the_private_copy_starts_commands(no_genuine_class, monkeypatch, source):
    if source == "missing":
        monkeypatch.setattr(realpopen, "_FILE", "/nonexistent/subprocess.py")
    popen = realpopen.genuine_popen()
    assert popen is not subprocess.Popen and popen.__name__ == "Popen"
    p = popen(["true"])
    assert p.wait(timeout=30) == 0
