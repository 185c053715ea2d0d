import os
import subprocess

import proctree


def test_own_process_is_found():
    me = proctree.proc(os.getpid())
    assert me.pid == os.getpid()
    assert me.ppid == os.getppid()


def test_child_is_found_and_cleaned_up():
    p = subprocess.Popen(["sleep", "30"])
    try:
        assert [c.pid for c in proctree.children(os.getpid())] == [p.pid]
    finally:
        p.kill()
        p.wait()
