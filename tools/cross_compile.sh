#!/usr/bin/env bash
# Compile-checks the C core for platforms this machine cannot run, with zig's
# bundled clang and libc headers (PyPI package `ziglang`), so that every
# _Static_assert on a kernel struct layout is evaluated against the macOS SDK
# headers on every CI run. Nothing is linked or run: `-c -o /dev/null` (zig's
# -fsyntax-only is broken, and a full compile evaluates the asserts anyway).
#
# Checks, each with -std=c11 -Wall -Wextra -Werror:
#   csrc/core/macos_*.c        aarch64-macos.11.0, x86_64-macos.10.13
#   cffi's generated _core.c       the same two macOS targets
#   csrc/core/linux_*.c        aarch64-linux-gnu.2.17, x86_64-linux-musl
#   csrc/core/walk.c           every target above (it is shared)
#   csrc/core/args.c           every target above (the shared block parsers)
#   csrc/core/facts_parse.c    every target above (the facts' shared parsers); facts_linux.c on the Linux
#                                  targets, facts_macos.c and facts_macos_row.c on the macOS ones
#   csrc/keeper/*.c            the native keeper, file by file: the shared files
#                                  and keeper_macos.c/events_macos.c on both macOS
#                                  targets (kqueue, session mode only), the shared
#                                  files and the *_linux.c ones on both Linux targets
#                                  (build_keeper.keeper_own_sources names each set)
#   three negative controls        copies of csrc/core/macos_proc.c and facts_macos_row.c
#                                  with one offset made wrong (pbi_ppid, kp_proc.p_oppid,
#                                  pti_threadnum) must FAIL to compile
#
# Installs nothing except, if missing, `ziglang` and `cffi` via pip into the
# Python it runs with ($PYTHON, default python3).
set -euo pipefail

cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

"$PY" -c 'import ziglang' 2>/dev/null || "$PY" -m pip install --quiet ziglang
"$PY" -c 'import cffi' 2>/dev/null || "$PY" -m pip install --quiet cffi

ZIG_DIR=$("$PY" -c 'import os, ziglang; print(os.path.dirname(ziglang.__file__))')
echo "zig $("$PY" -m ziglang version) from $ZIG_DIR"

# zig ships the macOS libc headers (from Apple's SDK) for every darwin target
# in one folder; libproc.h and sys/proc_info.h must be among them, or the
# macOS check below would prove nothing.
DARWIN_INC="$ZIG_DIR/lib/libc/include/any-darwin-any"
for h in libproc.h sys/proc_info.h sys/sysctl.h sys/proc.h; do
    if [ ! -f "$DARWIN_INC/$h" ]; then
        echo "error: zig's darwin headers lack $h (looked in $DARWIN_INC)" >&2
        exit 1
    fi
done

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

CFLAGS=(-c -std=c11 -Wall -Wextra -Werror -Icsrc/include)
MAC_TARGETS=(aarch64-macos.11.0 x86_64-macos.10.13)
LINUX_TARGETS=(aarch64-linux-gnu.2.17 x86_64-linux-musl)

zcc() { "$PY" -m ziglang cc "$@"; }

check() { # target file [extra flags...]
    local target=$1 file=$2
    shift 2
    printf '  %-24s %s ... ' "$target" "$file"
    zcc -target "$target" "${CFLAGS[@]}" "$@" "$file" -o /dev/null
    echo ok
}

echo "== macOS core =="
for t in "${MAC_TARGETS[@]}"; do
    check "$t" csrc/core/macos_proc.c
    check "$t" csrc/core/macos_table.c
    check "$t" csrc/core/macos_procargs.c
    check "$t" csrc/core/walk.c
    check "$t" csrc/core/args.c
    check "$t" csrc/core/facts_parse.c
    check "$t" csrc/core/facts_macos.c
    check "$t" csrc/core/facts_macos_row.c
done

echo "== proctree.Popen's exec step, freestanding (aarch64 and x86_64 system calls) =="
for t in aarch64-linux-gnu.2.17 x86_64-linux-gnu.2.17; do
    check "$t" csrc/popen/enter_linux.c -ffreestanding -fno-stack-protector -fno-builtin
    check "$t" csrc/popen/nolibc_linux.c -ffreestanding -fno-stack-protector -fno-builtin
done
# Linked and run too where qemu-user is here (.ci/apt-packages): its entry point, argument parsing, system calls
# and exit status on a CPU this machine is not.
if command -v qemu-aarch64 >/dev/null; then
    mkdir -p "$WORK/step"
    for f in enter_linux nolibc_linux; do
        zcc -target aarch64-linux-gnu.2.17 "${CFLAGS[@]}" -O2 -fno-sanitize=undefined -ffreestanding -fno-stack-protector -fno-builtin \
            -c "csrc/popen/$f.c" -o "$WORK/step/$f.o"
    done
    zcc -target aarch64-linux-gnu.2.17 -nostdlib -static -s "$WORK/step/enter_linux.o" "$WORK/step/nolibc_linux.o" \
        -o "$WORK/step/enter"
    printf '  %-24s %s ... ' aarch64 "run under qemu-aarch64"
    rc=0; qemu-aarch64 "$WORK/step/enter" || rc=$?
    [ "$rc" = 127 ] || { echo "FAIL: an empty command line exits $rc, not 127" >&2; exit 1; }
    # <err fd> <pid fd> <cgroup dir> <setsid> <pgid> <uid> <gid> <groups> <mask> <n> <exe> -- <argv> (enter_linux.c),
    # with a cgroup directory that cannot exist: the step makes a missing one, so its parent is missing too.
    missing="$WORK/step/no-such-parent/cgroup"
    out=$(qemu-aarch64 "$WORK/step/enter" 2 1 "$missing" 0 - - - - 0 1 /bin/true -- true 2>&1) && rc=0 || rc=$?
    case "$rc:$out" in
    "255:SubprocessError:0:proctree.Popen could not start the command in its cgroup ($missing): No such file"*) echo ok ;;
    *) echo "FAIL: a missing cgroup gave $rc: $out" >&2; exit 1 ;;
    esac
else
    echo "  (qemu-aarch64 not installed: the aarch64 step is compiled, not run)"
fi

echo "== native keeper =="
# The file sets build_keeper.py compiles, so that a file added there is checked here too.
keeper_files() { # platform
    "$PY" -c 'import sys, build_keeper; print(" ".join(build_keeper.keeper_own_sources(sys.argv[1])))' "$1"
}
read -r -a MAC_KEEPER <<< "$(keeper_files darwin)"
read -r -a LINUX_KEEPER <<< "$(keeper_files linux)"
for t in "${MAC_TARGETS[@]}"; do
    for f in "${MAC_KEEPER[@]}"; do
        check "$t" "$f"
    done
done
for t in "${LINUX_TARGETS[@]}"; do
    for f in "${LINUX_KEEPER[@]}"; do
        check "$t" "$f"
    done
done

echo "== cffi-generated module C for macOS =="
# The C that `pip wheel` would compile on a Mac: build_ffi.py's own ffibuilder
# (its cdef and set_source preamble), emitted without compiling.
"$PY" - "$WORK/_core.c" <<'PYEOF'
import runpy, sys
ffibuilder = runpy.run_path("build_ffi.py")["ffibuilder"]
ffibuilder.emit_c_code(sys.argv[1])
PYEOF
# The generated C includes Python.h. There are no macOS CPython headers here,
# so this machine's are used. Python's headers are the same on every POSIX
# platform except pyconfig.h, and under the limited API (3.10, the wheel's
# abi3 floor) what pyconfig.h contributes to the module's ABI is type sizes
# and byte order. Both macOS targets are LP64 and little-endian like the
# build host, and the wrapper below asserts exactly that against the target
# compiler, so a host whose pyconfig.h differs in anything that matters
# fails here instead of passing vacuously.
PY_INC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
cat > "$WORK/core_check.c" <<'CEOF'
#include "_core.c"
#include <wchar.h>
_Static_assert(SIZEOF_INT == sizeof(int), "pyconfig.h: int size differs on target");
_Static_assert(SIZEOF_LONG == sizeof(long), "pyconfig.h: long size differs on target");
_Static_assert(SIZEOF_VOID_P == sizeof(void *), "pyconfig.h: pointer size differs on target");
_Static_assert(SIZEOF_SIZE_T == sizeof(size_t), "pyconfig.h: size_t size differs on target");
_Static_assert(SIZEOF_WCHAR_T == sizeof(wchar_t), "pyconfig.h: wchar_t size differs on target");
#if defined(WORDS_BIGENDIAN) != (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
#error "pyconfig.h: byte order differs on target"
#endif
CEOF
for t in "${MAC_TARGETS[@]}"; do
    check "$t" "$WORK/core_check.c" -I"$WORK" -I"$PY_INC" -DPy_LIMITED_API=0x030A0000
done

echo "== Linux core =="
for t in "${LINUX_TARGETS[@]}"; do
    check "$t" csrc/core/linux_proc.c
    check "$t" csrc/core/linux_table.c
    check "$t" csrc/core/linux_procargs.c
    check "$t" csrc/core/walk.c
    check "$t" csrc/core/args.c
    check "$t" csrc/core/facts_parse.c
    check "$t" csrc/core/facts_linux.c
done

echo "== negative controls: a wrong struct offset must fail the macOS check =="
# If the asserts were not evaluated (a header not found, a preprocessor branch
# skipped), every check above would pass vacuously. Break one offset in a
# copy and require the compile to fail on that assert: one libproc struct
# (proc_bsdinfo) and one sysctl struct (kinfo_proc).
negative() { # label sed-expression assert-name [file, default macos_proc.c]
    local label=$1 expr=$2 name=$3 file=${4:-macos_proc.c}
    rm -rf "$WORK/neg" && mkdir -p "$WORK/neg"
    # The file holds the asserts; the headers it includes (macos.h, facts_macos.h, platform.h, proctree.h) beside it.
    cp csrc/include/proctree.h csrc/core/macos.h csrc/core/facts_macos.h csrc/core/platform.h "$WORK/neg/"
    sed "$expr" "csrc/core/$file" > "$WORK/neg/$file"
    if cmp -s "csrc/core/$file" "$WORK/neg/$file"; then
        echo "error: the negative control found no $name assert to break" >&2
        exit 1
    fi
    for t in "${MAC_TARGETS[@]}"; do
        printf '  %-24s %s ... ' "$t" "$label"
        if zcc -target "$t" -c -std=c11 -Wall -Wextra -Werror -I"$WORK/neg" \
            "$WORK/neg/$file" -o /dev/null 2> "$WORK/neg/err.txt"; then
            echo "compiled: the layout asserts are NOT being evaluated" >&2
            exit 1
        fi
        if ! grep -q "static assertion failed.*$name" "$WORK/neg/err.txt"; then
            echo "failed, but not on the $name assert:" >&2
            cat "$WORK/neg/err.txt" >&2
            exit 1
        fi
        echo "fails as it must:"
        grep -A3 'error:' "$WORK/neg/err.txt" | sed 's/^/      /'
    done
}
negative "pbi_ppid asserted at 20" \
    's/offsetof(struct proc_bsdinfo, pbi_ppid) == 16/offsetof(struct proc_bsdinfo, pbi_ppid) == 20/' pbi_ppid
negative "kp_proc.p_oppid asserted at 48" \
    's/offsetof(struct kinfo_proc, kp_proc.p_oppid) == 44/offsetof(struct kinfo_proc, kp_proc.p_oppid) == 48/' \
    'kp_proc.p_oppid'
negative "pti_threadnum asserted at 88" \
    's/offsetof(struct proc_taskinfo, pti_threadnum) == 84/offsetof(struct proc_taskinfo, pti_threadnum) == 88/' \
    pti_threadnum facts_macos_row.c

echo "cross-compile checks passed"
