"""A library error or an OSError that a subcommand does not handle itself is said in one line (or one JSON
document under --json), with status 2, never a traceback: /proc mounted with hidepid=, a process short of
descriptors."""

import errno
import json
import os
import shutil
import subprocess
import sys

import pytest

import proctree
from proctree.cli import main


@pytest.mark.parametrize(
    "exc, words",
    [
        (proctree.AccessDenied(), "the process table cannot be read: access denied (is /proc mounted with hidepid=?)"),
        (OSError(errno.EMFILE, "Too many open files"), "[Errno 24] Too many open files"),
    ],
)
def test_an_error_the_command_let_through_is_one_line(monkeypatch, capsys, exc, words):
    def refuse(*args, **kwargs):
        raise exc

    monkeypatch.setattr(proctree, "snapshot", refuse)
    assert main(["tree"]) == 2
    out, err = capsys.readouterr()
    assert not out and err == f"proctree tree: {words}\n"

    assert main(["tree", "--json"]) == 2
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc == {"ok": False, "error": {"type": type(exc).__name__, "message": words, "pid": None}} and not err


def test_a_programming_error_still_shows_its_traceback(monkeypatch):
    monkeypatch.setattr(proctree, "snapshot", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        main(["tree"])


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root to mount a /proc")
def test_proctree_tree_under_hidepid_as_another_user():
    # A fresh mount namespace: the /proc with hidepid=1 is this test's only, and nothing outside sees it.
    script = (
        "mount -t proc -o hidepid=1 proc /proc && exec setpriv --reuid 65534 --regid 65534 --clear-groups "
        f'"{sys.executable}" -m proctree tree --json'
    )
    nobody = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    probe = subprocess.run([*nobody, sys.executable, "-c", "import proctree"], capture_output=True, timeout=60)
    if probe.returncode != 0:  # a private (mode 700) directory above the interpreter or its site-packages
        pytest.skip(f"nobody cannot run {sys.executable} with proctree")
    r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode in (0, 2), r.stderr
    doc = json.loads(r.stdout)
    if r.returncode == 2:
        assert doc["ok"] is False and "hidepid" in doc["error"]["message"]
    else:
        assert doc["ok"] is True
