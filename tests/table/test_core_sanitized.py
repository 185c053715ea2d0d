"""The Linux process-table core (csrc/core/linux_proc.c, linux_table.c, linux_procargs.c, with walk.c and args.c)
built with gcc under AddressSanitizer and UBSan, then run over this machine's /proc: the table, each row, its
children by every read, its argv and environment with every small cap, and a child of the driver's own that the
reads must find (tests/table/csrc/core_sanitized.c). Skips without gcc or the sanitizer runtimes."""

import sys

import pytest

from support.sanitized import build_and_run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux reader")

CORE = ["linux_proc.c", "linux_table.c", "linux_procargs.c", "walk.c", "args.c"]


def test_the_linux_core_is_clean_under_asan_and_ubsan(tmp_path):
    out = build_and_run("core_sanitized.c", CORE, tmp_path)
    assert out.startswith("ok ") and int(out.split()[1]) > 1, out
