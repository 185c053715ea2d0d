"""Benchmarks for the process-table core, measured side by side in one run.

    python benchmarks/bench_core.py [--quick] [--out FILE]

Prints one Markdown table of medians and ratios, with the target and PASS/GAP
for each row:

  (a) snapshot() vs psutil.process_iter(attrs) (cache kept / cleared) vs a
      minimal C floor (opendir /proc + open/read/close of each stat), at 0,
      500 and 2,000 extra processes;
  (b) descendants(pid) of a 50-process subtree among 2,000 others vs
      psutil.Process(pid).children(recursive=True);
  (c) memory per process of a snapshot of 10,000 processes (tracemalloc for
      the Python heap, plus the C row buffer, which tracemalloc cannot see);
  (d) `import proctree` vs `import psutil` in fresh interpreters;
  (e) one environment variable from every process (the reaper's sweep):
      the core's env_scan (one C call) vs reading /proc/<pid>/environ in
      Python vs psutil.Process.environ(), at 0 and 2,000 extra processes
      (`--only env` runs just this).

The extra processes are sleepers forked by a small C helper this script
builds with gcc, like the floor. Every helper process has PR_SET_PDEATHSIG,
and the script ends them (SIGTERM, then SIGKILL) in a finally block, so
nothing outlives it, even on Ctrl-C. It never signals anything it did not
start. Linux only.
"""

import argparse
import gc
import os
import signal
import subprocess
import sys
import tempfile
import tracemalloc

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from _harness import Crowd, build, side_by_side  # noqa: E402

import proctree  # noqa: E402
from proctree._table import binding as _binding  # noqa: E402

try:
    import psutil
except ImportError:  # pragma: no cover
    sys.exit("bench_core needs psutil (pip install psutil)")

PSUTIL_ATTRS = ["pid", "ppid", "create_time", "status", "name"]

FLOOR_C = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
/* Returns the number of stat files read: the least any /proc scan must do. */
int floor_scan(void)
{
    char path[300], buf[2048];
    int n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (read(fd, buf, sizeof buf) > 0)
            n++;
        close(fd);
    }
    closedir(d);
    return n;
}
"""


ROWS = []


def row(what, value, target="", ok=None):
    ROWS.append((what, value, target, "" if ok is None else ("PASS" if ok else "GAP")))


def ms(s):
    return f"{s * 1e3:.3f} ms"


def psutil_cached():
    return list(psutil.process_iter(PSUTIL_ATTRS))


def psutil_cleared():
    psutil.process_iter.cache_clear()
    return list(psutil.process_iter(PSUTIL_ATTRS))


def bench_scan(lib, crowd, extras, rounds):
    for extra in extras:
        if extra:
            crowd.start("flat", extra)
        n = len(proctree.snapshot())
        assert lib.floor_scan() > 0
        psutil_cached()  # fill the cache once
        t = side_by_side(
            {
                "floor": lib.floor_scan,
                "snapshot": proctree.snapshot,
                "snapshot+values": lambda: list(proctree.snapshot().values()),
                "psutil cached": psutil_cached,
                "psutil cleared": psutil_cleared,
            },
            rounds,
        )
        crowd.stop()
        tag = f"(a) +{extra} ({n} procs)"
        last = extra == max(extras)
        row(f"{tag} C floor", ms(t["floor"]))
        row(f"{tag} snapshot()", ms(t["snapshot"]))
        row(f"{tag} snapshot() + every Proc", ms(t["snapshot+values"]))
        row(f"{tag} psutil.process_iter, cache kept", ms(t["psutil cached"]))
        row(f"{tag} psutil.process_iter, cache cleared", ms(t["psutil cleared"]))
        r = t["snapshot"] / t["floor"]
        row(f"{tag} snapshot() / floor", f"{r:.2f}x", "<= 1.3x" if last else "", r <= 1.3 if last else None)
        r = t["psutil cached"] / t["snapshot"]
        row(f"{tag} psutil cached / snapshot()", f"{r:.1f}x", ">= 4x" if last else "", r >= 4 if last else None)
        r = t["psutil cleared"] / t["snapshot"]
        row(f"{tag} psutil cleared / snapshot()", f"{r:.1f}x")


def bench_descendants(crowd, rounds):
    crowd.start("flat", 2000)
    root = crowd.start("tree", 10, 4)
    want = 50
    got = len(proctree.descendants(root))
    assert got == want, f"subtree has {got} processes, expected {want}"
    assert len(psutil.Process(root).children(recursive=True)) == want
    t = side_by_side(
        {
            "live": lambda: proctree.descendants(root),
            "snap": lambda: proctree.snapshot().descendants(root),
            "psutil": lambda: psutil.Process(root).children(recursive=True),
        },
        rounds,
    )
    n = len(proctree.snapshot())
    crowd.stop()
    tag = f"(b) 50 of {n}"
    row(f"{tag} proctree.descendants(pid)", ms(t["live"]))
    row(f"{tag} snapshot().descendants(pid)", ms(t["snap"]))
    row(f"{tag} psutil children(recursive=True)", ms(t["psutil"]))
    r = t["psutil"] / t["live"]
    row(f"{tag} psutil / descendants()", f"{r:.0f}x", ">= 40x", r >= 40)


def _c_bytes(snap):
    """Bytes of C memory (cffi buffers, invisible to tracemalloc) the snapshot keeps alive."""
    total = 0
    for cell in snap._row_at.__closure__ or ():
        obj = cell.cell_contents
        if isinstance(obj, _binding.ffi.CData):
            total += _binding.ffi.sizeof(obj)
    return total


def bench_memory(crowd, target_procs):
    have = len(proctree.snapshot())
    if target_procs > have:
        crowd.start("flat", target_procs - have)
    s = proctree.snapshot()  # warm: cffi module, and the binding's buffer-size guess
    del s
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    s = proctree.snapshot()
    py1 = tracemalloc.get_traced_memory()[0] - base
    s.descendant_pids(1)  # builds the children index
    py2 = tracemalloc.get_traced_memory()[0] - base
    c = _c_bytes(s)
    n = len(s)
    procs = list(s.values())
    py3 = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del procs, s
    crowd.stop()
    tag = f"(c) {n} procs"
    row(f"{tag} Python heap after snapshot()", f"{py1 / n:.0f} B/proc")
    row(f"{tag} C row buffer (not seen by tracemalloc)", f"{c / n:.0f} B/proc")
    row(f"{tag} total after snapshot()", f"{(py1 + c) / n:.0f} B/proc", "<= 300 B", (py1 + c) / n <= 300)
    row(f"{tag} total after first tree query", f"{(py2 + c) / n:.0f} B/proc", "<= 300 B", (py2 + c) / n <= 300)
    row(f"{tag} total with every Proc built", f"{(py3 + c) / n:.0f} B/proc")


def bench_import(rounds):
    env = dict(os.environ, PYTHONPATH=REPO)

    def run(code):
        return lambda: subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd="/")

    t = side_by_side(
        {
            "bare": run("pass"),
            "proctree": run("import proctree"),
            "psutil": run("import psutil"),
            "proctree+scan": run("import proctree; proctree.snapshot()"),
            "psutil+scan": run(f"import psutil; list(psutil.process_iter({PSUTIL_ATTRS!r}))"),
        },
        rounds,
    )
    bare = t["bare"]
    row("(d) python -c pass", ms(bare))
    row("(d) import proctree (minus bare start)", ms(t["proctree"] - bare))
    row("(d) import psutil (minus bare start)", ms(t["psutil"] - bare))
    row("(d) import + first snapshot(), proctree", ms(t["proctree+scan"] - bare))
    row("(d) import + first process_iter, psutil", ms(t["psutil+scan"] - bare))
    ok = t["proctree"] < t["psutil"]
    row("(d) import proctree / import psutil", f"{(t['proctree'] - bare) / (t['psutil'] - bare):.2f}x", "< 1x", ok)


def _py_env_scan(key, pids):
    """The same sweep in Python: read each /proc/<pid>/environ whole and split it."""
    prefix = key + b"="
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                data = f.read()
        except OSError:
            out[pid] = None
            continue
        out[pid] = next((e[len(prefix) :] for e in data.split(b"\0") if e.startswith(prefix)), None)
    return out


def _psutil_env_scan(key, pids):
    out = {}
    for pid in pids:
        try:
            out[pid] = psutil.Process(pid).environ().get(key)
        except psutil.Error:
            out[pid] = None
    return out


def bench_env(crowd, rounds):
    key = "PROCTREE_BENCH_MARK"
    os.environ[key] = "1"  # the crowd inherits it (execve puts it in their blocks)
    try:
        for extra in (0, 2000):
            if extra:
                crowd.start("flat", extra)
            pids = list(proctree.snapshot())
            found = sum(isinstance(v, bytes) for v in _binding.env_scan(key, pids).values())
            t = side_by_side(
                {
                    "core": lambda pids=pids: _binding.env_scan(key, pids),
                    "python": lambda pids=pids: _py_env_scan(key.encode(), pids),
                    "psutil": lambda pids=pids: _psutil_env_scan(key, pids),
                },
                rounds,
            )
            crowd.stop()
            tag = f"(e) +{extra} ({len(pids)} procs, {found} carry the variable)"
            row(f"{tag} env_scan (one C call)", ms(t["core"]))
            row(f"{tag} Python reading /proc/<pid>/environ", ms(t["python"]))
            row(f"{tag} psutil.Process.environ()", ms(t["psutil"]))
            row(f"{tag} Python / env_scan", f"{t['python'] / t['core']:.1f}x")
            row(f"{tag} psutil / env_scan", f"{t['psutil'] / t['core']:.1f}x")
    finally:
        del os.environ[key]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds, 2,000 instead of 10,000 for memory")
    ap.add_argument("--out", help="also write the table to this file")
    ap.add_argument("--only", choices=["env"], help="run only this part")
    args = ap.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("bench_core is Linux only")
    rounds = 7 if args.quick else 31

    # SIGTERM/SIGHUP end us through the finally below, like Ctrl-C does.
    def bail(sig, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, bail)
    signal.signal(signal.SIGHUP, bail)

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        lib, forker = build(tmp, FLOOR_C)
        crowd = Crowd(forker)
        try:
            if args.only != "env":
                bench_scan(lib, crowd, (0, 500, 2000), rounds)
                bench_descendants(crowd, rounds)
                bench_memory(crowd, 2000 if args.quick else 10000)
                bench_import(max(7, rounds // 2))
            bench_env(crowd, rounds)
        finally:
            crowd.stop()

    lines = [
        f"proctree {proctree.__version__}, psutil {psutil.__version__}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, {os.uname().release}; medians of {rounds} interleaved rounds; "
        f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after",
        "",
        "| measurement | value | target | |",
        "|---|---|---|---|",
    ]
    lines += [f"| {w} | {v} | {t} | {ok} |" for w, v, t, ok in ROWS]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the helpers are already ended by main()'s finally
        sys.exit(130)
