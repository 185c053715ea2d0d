"""The reaper scene of `proctree demo`: it succeeds and leaves nothing (the autouse leak check proves the latter)."""

import io
import os
import sys

import pytest

from proctree.demo import reaper_scene
from support.treekit import run_as_nobody


def test_reaper_scene_finds_and_ends_the_orphaned_tree_only():
    out = io.StringIO()
    assert reaper_scene.run(out) is True, out.getvalue()
    text = out.getvalue()
    assert "3 orphan(s)" in text and "the orphaned tree is gone" in text
    assert "the second tree was untouched" in text and "0 survived" in text


def test_reaper_scene_as_a_non_root_user():
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to nobody (the scene runs as this user in the test above)")

    def as_nobody():
        if not os.access(sys.executable, os.X_OK):
            return b"", 77
        out = io.StringIO()
        ok = reaper_scene.run(out)
        return out.getvalue().encode(), 0 if ok else 1

    data, code = run_as_nobody(as_nobody)
    if code == 77:
        pytest.skip(f"nobody cannot run {sys.executable}")
    assert code == 0, data.decode()
