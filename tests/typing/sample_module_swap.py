"""The one-import swap: code written for the subprocess module, with `from proctree import subprocess`
(checked and run by tests/dropin/test_dropin_typing.py)."""

from __future__ import annotations

import sys

from proctree import subprocess

if sys.version_info >= (3, 11):
    from typing import assert_type
else:
    from typing_extensions import assert_type


def git_like() -> str:
    done = subprocess.run(["echo", "main"], capture_output=True, text=True, check=True)
    assert_type(done, subprocess.CompletedProcess[str])
    return done.stdout.strip()


def shell() -> tuple[int, str]:
    status = subprocess.getstatusoutput("echo out; exit 4")
    assert_type(status, tuple[int, str])
    assert_type(subprocess.getoutput("echo x"), str)
    assert_type(subprocess.call(["true"]), int)
    assert_type(subprocess.check_call(["true"], keep_orphans=True), int)
    return status


def piped() -> bytes:
    proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert_type(proc, subprocess.Popen[bytes])
    try:
        out, _ = proc.communicate(b"through", timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return out


def quoted() -> str:
    return subprocess.list2cmdline(["a b", "c"])


def errors() -> bool:
    try:
        subprocess.check_output(["false"])
    except subprocess.SubprocessError as exc:
        return isinstance(exc, subprocess.CalledProcessError)
    return False


def typos_are_errors() -> None:
    subprocess.run(["true"], stdot=subprocess.PIPE)  # type: ignore[call-overload]
    subprocess.check_call(["true"], chek=True)  # type: ignore[call-arg]
    subprocess.PIPES  # type: ignore[attr-defined]  # noqa: B018


if __name__ == "__main__":
    assert git_like() == "main"
    assert shell() == (4, "out")
    assert piped() == b"through"
    assert quoted() == '"a b" c'
    assert errors()
    print("ok")
