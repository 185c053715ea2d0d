"""The facts' C (csrc/core/facts_parse.c and facts_linux.c) built with gcc under AddressSanitizer and UBSan,
then run: mutated stat and status texts through the parsers, and the readers over this machine's /proc with
string buffers of every size from none up (tests/table/csrc/facts_sanitized.c). Skips without gcc or the
sanitizer runtimes."""

import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux reader")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_facts_c_is_clean_under_asan_and_ubsan(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    exe = str(tmp_path / "facts_sanitized")
    sources = [os.path.join(ROOT, "csrc", "core", f) for f in ("facts_parse.c", "facts_linux.c")]
    build = subprocess.run(
        ["gcc", "-std=c11", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
        + ["-Wall", "-Wextra", "-Werror", "-I", os.path.join(ROOT, "csrc", "include")]
        + ["-I", os.path.join(ROOT, "csrc", "core"), os.path.join(ROOT, "tests", "table", "csrc", "facts_sanitized.c")]
        + sources
        + ["-o", exe],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if build.returncode != 0 and "asan" in build.stderr.lower():
        pytest.skip(f"no sanitizer runtime: {build.stderr[-300:]}")
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run([exe], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert run.stdout.startswith("ok "), run.stdout
