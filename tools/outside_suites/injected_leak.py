"""The leaking test that plugin-leak mode copies into a project's tests.

It leaves two processes behind: a child started and forgotten (no Popen
object, so no ResourceWarning can fail some later test under
filterwarnings=error), and a daemon that left its parent and session (the
shell that started it exits at once). Nothing else in the suite changes.
"""

import os
import subprocess


def test_proctree_injected_leak():
    os.posix_spawnp("sleep", ["sleep", "600"], dict(os.environ))
    subprocess.run(["sh", "-c", "setsid sleep 601 </dev/null >/dev/null 2>&1 &"], check=True)
