"""The scenes of `proctree demo`, each in its own module with TITLE and run(out) -> bool.

A scene starts its own processes and leaves none behind, even when it fails.
"""

import importlib
import sys

SCENES = ["snapshot_scene", "teardown_scene", "containment_scene", "reaper_scene"]


def run_all(out=None):
    out = out or sys.stdout
    ok = True
    for name in SCENES:
        scene = importlib.import_module(f"proctree.demo.{name}")
        out.write(f"\n=== {scene.TITLE} ===\n")
        out.flush()
        ok = scene.run(out) and ok
    out.write("\nAll scenes done; nothing left running.\n" if ok else "\nA scene failed (see above).\n")
    return 0 if ok else 1
