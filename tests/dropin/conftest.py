"""The drop-in tests' holding keeper (one per process, spawned by the first proctree.Popen) ends with each module.

Tests after these count pytest's own children; the holder is one until released.
"""

import pytest

from proctree._containment import popenhold


@pytest.fixture(autouse=True, scope="module")
def _release_the_holder():
    yield
    popenhold.release(grace=0)
