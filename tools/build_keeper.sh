#!/usr/bin/env bash
# Builds the native keeper (csrc/keeper/keeper.c) with the core's own sources
# and the core's flags: tools/build_keeper.sh [out] (default build/proctree-keeper).
# Not part of the wheel yet: tests/test_native_keeper.py builds it this way and
# runs the keeper conformance suite against it (PROCTREE_KEEPER).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/proctree-keeper}
CC=${CC:-gcc}
case $(uname -s) in
Linux) CORE=csrc/core/linux.c ;;
Darwin) CORE=csrc/core/macos.c ;;
*) echo "error: no C core for $(uname -s)" >&2; exit 1 ;;
esac
mkdir -p "$(dirname "$OUT")"
SRCS=(csrc/keeper/keeper.c "$CORE" csrc/core/walk.c csrc/core/args.c)
FLAGS=(-std=c11 -Wall -Wextra -Werror -O2 -Icsrc/include)
# Static where the libc allows it (Linux with libc.a): a dynamic glibc maps
# ~1.5 MB of shared pages into the keeper's VmRSS; static, it is ~0.8 MB.
# KEEPER_STATIC=0 forces a dynamic build. Warnings fail both ways.
if [ "${KEEPER_STATIC:-1}" = 1 ] && [ "$(uname -s)" = Linux ] &&
    "$CC" "${FLAGS[@]}" -static "${SRCS[@]}" -o "$OUT" 2>/dev/null; then
    echo "$OUT (static)"
else
    "$CC" "${FLAGS[@]}" "${SRCS[@]}" -o "$OUT"
    echo "$OUT (dynamic)"
fi
