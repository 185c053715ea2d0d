"""`proctree demo` run from a source checkout whose package is not built (the Quick start's case).

`python -c` puts the working directory first on sys.path, so a scene's child
script would import the checkout's uncompiled sources instead of the
installed package. The demo's scripts import the package the demo itself
runs from: here the working directory holds a proctree/ that cannot import.
"""

import os
import subprocess
import sys
import textwrap

import proctree

RUN = textwrap.dedent("""
    import sys
    sys.path = [p for p in sys.path if p not in ("", ".")]  # the demo itself: the real package
    from proctree.cli import main
    sys.exit(main(["demo"]))
""")


def test_demo_from_a_directory_holding_an_unbuilt_proctree(tmp_path):
    fake = tmp_path / "proctree"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('the uncompiled checkout, not the installed package')\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(proctree.__file__)))
    r = subprocess.run([sys.executable, "-c", RUN], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "All scenes done; nothing left running." in r.stdout
