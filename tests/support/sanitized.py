"""C of the core built with gcc under AddressSanitizer and UBSan with a driver of the test's, then run."""

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_and_run(driver, core_files, tmp_path):
    """The stdout of tests/table/csrc/<driver> built with csrc/core/<core_files> under the sanitizers and run; fails
    the test on a build error, a sanitizer report or a non-zero exit, and skips it without gcc or the runtimes."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    exe = str(tmp_path / os.path.splitext(driver)[0])
    sources = [os.path.join(ROOT, "csrc", "core", f) for f in core_files]
    build = subprocess.run(
        ["gcc", "-std=c11", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
        + ["-Wall", "-Wextra", "-Werror", "-I", os.path.join(ROOT, "csrc", "include")]
        + ["-I", os.path.join(ROOT, "csrc", "core"), os.path.join(ROOT, "tests", "table", "csrc", driver)]
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
    return run.stdout
