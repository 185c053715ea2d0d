"""descendants() against its C floor and psutil, side by side in one run.

    python benchmarks/bench_descendants.py [--rounds N] [--background N] [--markdown]

A 50-process subtree (a root, 10 children, 4 grandchildren each; 51 with the
root) among BACKGROUND (2,000) sleeping processes, three ways to list the
root's descendants, interleaved round by round:

  (a) a C floor: a breadth-first walk that reads, for the root and each
      member, /proc/<pid>/stat (what a member's identity needs) and
      /proc/<pid>/task/<pid>/children (one open/read/close each), nothing
      else: no verification, no records, no Python objects;
  (b) proctree.descendants(root);
  (c) psutil.Process(root).children(recursive=True).

Prints medians and the ratios with their targets (PASS/GAP).

Every process is forked by the small C helper of benchmarks/_harness.py
(PR_SET_PDEATHSIG on each), and Crowd.stop() ends them in a finally block,
so nothing outlives a run, even on Ctrl-C. It never signals anything it did
not start. Linux only.
"""

import argparse
import os
import signal
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from _harness import Crowd, build, side_by_side, table  # noqa: E402

import proctree  # noqa: E402

try:
    import psutil
except ImportError:  # pragma: no cover
    sys.exit("bench_descendants needs psutil (pip install psutil)")

FANOUT, GRANDKIDS = 10, 4
WANT = FANOUT * (1 + GRANDKIDS)

# floor_scan() is what build() expects of every floor library; floor_descendants() is the floor measured here.
FLOOR_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int floor_scan(void) { return 1; }

/* Returns the bytes read from path (one read), or -1. */
static int read_once(const char *path, char *buf, int cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int n = (int)read(fd, buf, (size_t)cap - 1);
    close(fd);
    return n;
}

/* Returns how many processes are below root: a walk reading each member's stat and children list once. */
int floor_descendants(int root)
{
    static int queue[1 << 16];
    char path[64], buf[4096];
    int n = 0, head = 0;
    queue[n++] = root;
    while (head < n) {
        int pid = queue[head++];
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        if (read_once(path, buf, sizeof buf) <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, pid);
        int got = read_once(path, buf, sizeof buf);
        if (got <= 0)
            continue;
        buf[got] = '\0';
        for (char *p = buf, *end; *p; p = end) {
            long kid = strtol(p, &end, 10);
            if (end == p)
                break;
            if (n < (int)(sizeof queue / sizeof queue[0]))
                queue[n++] = (int)kid;
        }
    }
    return n - 1;
}
"""


def ms(s):
    return f"{s * 1e3:.3f} ms"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=101)
    ap.add_argument("--background", type=int, default=2000, help="sleeping processes beside the subtree")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table (for docs/benchmarks.md)")
    args = ap.parse_args(argv)
    if not sys.platform.startswith("linux"):
        sys.exit("bench_descendants is Linux only")

    def bail(sig, frame):  # SIGTERM/SIGHUP end us through the finally below, like Ctrl-C does
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, bail)
    signal.signal(signal.SIGHUP, bail)

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        lib, forker = build(tmp, FLOOR_C)
        crowd = Crowd(forker)
        try:
            if args.background:
                crowd.start("flat", args.background)
            root = crowd.start("tree", FANOUT, GRANDKIDS)
            n = len(proctree.snapshot())
            got = {
                "floor": lib.floor_descendants(root),
                "descendants": len(proctree.descendants(root)),
                "psutil": len(psutil.Process(root).children(recursive=True)),
            }
            assert set(got.values()) == {WANT}, f"expected {WANT} below the root, got {got}"
            t = side_by_side(
                {
                    "floor": lambda: lib.floor_descendants(root),
                    "descendants": lambda: proctree.descendants(root),
                    "psutil": lambda: psutil.Process(root).children(recursive=True),
                },
                args.rounds,
            )
        finally:
            crowd.stop()

    r_floor = t["descendants"] / t["floor"]
    r_psutil = t["psutil"] / t["descendants"]
    rows = [
        ("C floor: stat + children of each member", ms(t["floor"]), "", ""),
        ("proctree.descendants(root)", ms(t["descendants"]), "", ""),
        ("psutil children(recursive=True)", ms(t["psutil"]), "", ""),
        ("descendants() / floor", f"{r_floor:.2f}x", "<= 1.3x", "PASS" if r_floor <= 1.3 else "GAP"),
        ("psutil / descendants()", f"{r_psutil:.0f}x", "", ""),
        ("psutil / floor", f"{t['psutil'] / t['floor']:.0f}x", "", ""),
    ]
    head = (
        f"proctree {proctree.__version__}, psutil {psutil.__version__}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, Linux {os.uname().release}; {WANT} descendants among {n} processes; "
        f"medians of {args.rounds} interleaved rounds; load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after"
    )
    print(table(head, rows, args.markdown))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the helpers are already ended by main()'s finally
        sys.exit(130)
