"""The scenes of `proctree demo`, each in its own module with TITLE and run(out) -> bool.

A scene starts its own processes and leaves none behind, even when it fails.
"""

import importlib
import io
import sys

SCENES = ["snapshot_scene", "teardown_scene", "containment_scene", "reaper_scene"]


def run_all(out=None, quiet=False):
    """Run every scene; quiet: one line per scene (a failed scene's whole story is still shown)."""
    out = out or sys.stdout
    ok = True
    for name in SCENES:
        scene = importlib.import_module(f"proctree.demo.{name}")
        if quiet:
            story = io.StringIO()
            passed = scene.run(story)
            out.write(f"{scene.TITLE}: {'ok' if passed else 'FAILED'}\n" + ("" if passed else story.getvalue()))
            out.flush()
            ok = passed and ok
            continue
        out.write(f"\n=== {scene.TITLE} ===\n")
        out.flush()
        ok = scene.run(out) and ok
    end = "All scenes done; nothing left running.\n" if ok else "A scene failed (see above).\n"
    out.write(end if quiet else "\n" + end)
    return 0 if ok else 1
