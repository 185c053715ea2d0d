#!/usr/bin/env bash
# Runs the macOS core (csrc/core/macos_*.c, facts_macos*.c) on this (Linux) machine against a simulated
# libproc/sysctl (sim_kernel.c, which says which real behaviours it mimics),
# under AddressSanitizer and UBSan. It checks the core's logic and memory
# handling; only the macOS wheel tests say anything about macOS itself.
set -euo pipefail
cd "$(dirname "$0")"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# -D_GNU_SOURCE: on macOS _DARWIN_C_SOURCE exposes strnlen/getsid; glibc
# needs its own feature macro under -std=c11.
${CC:-gcc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -O1 \
    -fsanitize=address,undefined -fno-sanitize-recover=all \
    -Iinclude -I../../csrc/include \
    ../../csrc/core/macos_proc.c ../../csrc/core/macos_table.c ../../csrc/core/macos_procargs.c \
    ../../csrc/core/walk.c ../../csrc/core/args.c \
    ../../csrc/core/facts_macos.c ../../csrc/core/facts_macos_row.c ../../csrc/core/facts_parse.c \
    sim_kernel.c sim_test.c sim_test_facts.c -o "$out/sim_test"
"$out/sim_test"
