"""`import proctree as subprocess`: where a script's subprocess names are all of proctree's own
(checked and run by tests/dropin/test_dropin_typing.py)."""

from __future__ import annotations

import sys

import proctree as subprocess

if sys.version_info >= (3, 11):
    from typing import assert_type
else:
    from typing_extensions import assert_type


def lines() -> list[str]:
    proc = subprocess.Popen(["printf", "a\\nb\\n"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert_type(proc, subprocess.Popen[str])
    out, _ = proc.communicate()
    return out.splitlines()


def status() -> int:
    try:
        return subprocess.check_call(["sh", "-c", "exit 2"], stdout=subprocess.DEVNULL)
    except subprocess.CalledProcessError as exc:
        return exc.returncode


def completed() -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["true"], check=True)


if __name__ == "__main__":
    assert lines() == ["a", "b"]
    assert status() == 2
    assert completed().returncode == 0
    print("ok")
