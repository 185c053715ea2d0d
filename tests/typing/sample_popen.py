"""Popen and the helpers as a typical script uses them, with `from proctree import ...` (checked and run by
tests/dropin/test_dropin_typing.py: mypy --strict and pyright strict must find nothing but the errors marked)."""

from __future__ import annotations

import sys
from typing import IO

from proctree import PIPE, STDOUT, CalledProcessError, CompletedProcess, Popen, TimeoutExpired, check_output, run

if sys.version_info >= (3, 11):
    from typing import assert_type
else:
    from typing_extensions import assert_type


def count_lines(path: str) -> int:
    with Popen(["wc", "-l", path], stdout=PIPE, text=True) as proc:
        assert_type(proc, Popen[str])
        out, _ = proc.communicate(timeout=10)
        assert_type(out, str)
    return int(out.split()[0])


def raw_bytes() -> bytes:
    proc = Popen(["printf", "a\\0b"], stdout=PIPE)
    assert_type(proc, Popen[bytes])
    out, err = proc.communicate()
    assert_type(err, bytes)
    assert_type(proc.wait(), int)
    return out


def decoded(encoding: str) -> str:
    proc = Popen(["echo", "hé"], stdout=PIPE, encoding=encoding, errors="strict", keep_orphans=True)
    assert_type(proc, Popen[str])
    stream: IO[str] | None = proc.stdout
    assert stream is not None
    text = stream.read()
    proc.wait()
    return text


def captured() -> tuple[str, bytes, int]:
    text = run(["echo", "text"], capture_output=True, text=True, check=True)
    assert_type(text, CompletedProcess[str])
    data = run(["echo", "data"], stdout=PIPE, stderr=STDOUT)
    assert_type(data, CompletedProcess[bytes])
    assert_type(data.returncode, int)
    return text.stdout, data.stdout, data.returncode


def output() -> tuple[bytes, str]:
    raw = check_output(["echo", "raw"])
    assert_type(raw, bytes)
    line = check_output(["echo", "line"], universal_newlines=True, timeout=10)
    assert_type(line, str)
    return raw, line


def failing() -> int:
    try:
        run(["sh", "-c", "exit 3"], check=True, timeout=10)
    except TimeoutExpired:
        return -1
    except CalledProcessError as exc:
        return exc.returncode
    return 0


def typos_are_errors() -> None:
    # Each of these is a keyword typo that subprocess's types reject; proctree's must reject them too.
    Popen(["true"], stdot=PIPE)  # type: ignore[call-overload]
    run(["true"], chek=True)  # type: ignore[call-overload]
    check_output(["true"], timout=1)  # type: ignore[call-overload]
    run(["true"], keep_orphan=True)  # type: ignore[call-overload]


def wrong_types_are_errors() -> None:
    proc: Popen[str] = Popen(["true"])  # type: ignore[assignment]
    proc.wait()
    run(["true"], keep_orphans="yes")  # type: ignore[call-overload]


if __name__ == "__main__":
    assert count_lines(__file__) > 10
    assert raw_bytes() == b"a\0b"
    assert decoded("utf-8") == "hé\n"
    assert captured() == ("text\n", b"data\n", 0)
    assert output() == (b"raw\n", "line\n")
    assert failing() == 3
    print("ok")
