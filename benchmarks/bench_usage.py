"""A tree's summed usage (processes, rss, vms, CPU times), measured side by side in one run.

    python benchmarks/bench_usage.py [--quick] [--out FILE]

Prints one Markdown table of medians and ratios, for trees of about 25 and 200 processes (the harness's C
forker: F children with G children each):

  - proctree.usage(procs) over a list taken beforehand (the read alone: one facts pass, stat files only);
  - proctree.usage(proctree.descendants(root)), the walk and the read, as a dashboard refreshes a tree;
  - psutil's recipe: [p, *p.children(recursive=True)], then memory_info() and cpu_times() of each, summed
    (psutil.NoSuchProcess skipped), with the Process objects made fresh, and kept from an earlier pass;
  - a C floor that opens and reads the stat file of each listed pid and parses nothing: the least any reader
    of a listed tree's memory and CPU must do on Linux; and a pinned floor that opens each /proc/<pid>
    directory and reads stat through it, as a read that never mixes two processes under a reused pid must.

The forker's processes have PR_SET_PDEATHSIG and are ended in a finally block. It never signals anything it
did not start. Linux only.
"""

import argparse
import ctypes
import os
import signal
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from _harness import Crowd, build, side_by_side  # noqa: E402

import proctree  # noqa: E402

try:
    import psutil
except ImportError:  # pragma: no cover
    sys.exit("bench_usage needs psutil (pip install psutil)")

# floor_scan() is the harness's required entry (unused here); floor_stats(pids, n) reads each pid's stat.
FLOOR_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
/* Returns the number of pids whose stat was read to its end. */
int floor_stats(const int *pids, int n)
{
    char path[64], buf[1024];
    int read_ok = 0;
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "/proc/%d/stat", pids[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t got;
        while ((got = read(fd, buf, sizeof buf)) > 0)
            ;
        close(fd);
        read_ok += got == 0;
    }
    return read_ok;
}
/* Returns the number of pids whose stat was read to its end through an open /proc/<pid> directory, the way a
   read that must not mix two processes under one reused pid opens it (as the core does). */
int floor_stats_pinned(const int *pids, int n)
{
    char name[16], buf[1024];
    int read_ok = 0;
    int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (procfd < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%d", pids[i]);
        int dirfd = openat(procfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
            continue;
        int fd = openat(dirfd, "stat", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t got;
            while ((got = read(fd, buf, sizeof buf)) > 0)
                ;
            close(fd);
            read_ok += got == 0;
        }
        close(dirfd);
    }
    close(procfd);
    return read_ok;
}
/* Returns 0: the harness builds every floor library with this entry. */
int floor_scan(void) { return 0; }
"""

ROWS = []


def psutil_sum(procs):
    rss = vms = 0
    user = system = 0.0
    n = 0
    for p in procs:
        try:
            m = p.memory_info()
            c = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        n, rss, vms, user, system = n + 1, rss + m.rss, vms + m.vms, user + c.user, system + c.system
    return n, rss, vms, user, system


def measure(lib, root, rounds):
    """{name: median seconds} of every way of reading root's tree's usage, interleaved."""
    procs = [proctree.proc(root), *proctree.descendants(root)]
    pids = (ctypes.c_int * len(procs))(*[p.pid for p in procs])
    kept = psutil.Process(root)
    kept_all = [kept, *kept.children(recursive=True)]
    assert proctree.usage(procs).processes == len(procs) == psutil_sum(kept_all)[0]

    def fresh_psutil():
        p = psutil.Process(root)
        return psutil_sum([p, *p.children(recursive=True)])

    return len(procs), side_by_side(
        {
            "floor": lambda: lib.floor_stats(pids, len(procs)),
            "pinned floor": lambda: lib.floor_stats_pinned(pids, len(procs)),
            "usage": lambda: proctree.usage(procs),
            "walk+usage": lambda: proctree.usage([proctree.proc(root), *proctree.descendants(root)]),
            "psutil fresh": fresh_psutil,
            "psutil kept": lambda: psutil_sum([kept, *kept.children(recursive=True)]),
        },
        rounds,
    )


def bench(lib, crowd, shapes, rounds):
    lib.floor_stats.restype = lib.floor_stats_pinned.restype = ctypes.c_int
    for fan, grand in shapes:
        n, m = measure(lib, crowd.start("tree", fan, grand), rounds)
        crowd.stop()
        who = f"tree of {n}"
        ms = {k: f"{v * 1e3:.3f} ms" for k, v in m.items()}
        ROWS.extend(
            [
                (f"{who}: C floor, stat of each listed pid", ms["floor"], "", ""),
                (f"{who}: C floor, stat through each /proc/<pid> directory", ms["pinned floor"], "", ""),
                (f"{who}: proctree.usage(procs)", ms["usage"], "", ""),
                (f"{who}: proctree.usage(descendants(root))", ms["walk+usage"], "", ""),
                (f"{who}: psutil children(recursive) + memory_info + cpu_times", ms["psutil fresh"], "", ""),
                (f"{who}: the same, Process objects kept", ms["psutil kept"], "", ""),
                (f"{who}: usage / floor", f"{m['usage'] / m['floor']:.2f}x", "", ""),
                (f"{who}: usage / pinned floor", f"{m['usage'] / m['pinned floor']:.2f}x", "", ""),
                (f"{who}: psutil fresh / walk+usage", f"{m['psutil fresh'] / m['walk+usage']:.1f}x", "", ""),
                (f"{who}: psutil kept / walk+usage", f"{m['psutil kept'] / m['walk+usage']:.1f}x", "", ""),
            ]
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--out", help="also write the table to this file")
    args = ap.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("bench_usage is Linux only")
    rounds = 7 if args.quick else 21

    def bail(sig, frame):  # SIGTERM/SIGHUP end us through the finally below, like Ctrl-C does
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, bail)
    signal.signal(signal.SIGHUP, bail)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        lib, forker = build(tmp, FLOOR_C)
        crowd = Crowd(forker)
        try:
            bench(lib, crowd, ((5, 4), (20, 9)), rounds)
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
