"""The facts' C (csrc/core/facts_parse.c and facts_linux.c) built with gcc under AddressSanitizer and UBSan,
then run: mutated stat and status texts through the parsers, and the readers over this machine's /proc with
string buffers of every size from none up (tests/table/csrc/facts_sanitized.c). Skips without gcc or the
sanitizer runtimes."""

import sys

import pytest

from support.sanitized import build_and_run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux reader")


def test_facts_c_is_clean_under_asan_and_ubsan(tmp_path):
    out = build_and_run("facts_sanitized.c", ["facts_parse.c", "facts_linux.c"], tmp_path)
    assert out.startswith("ok "), out
