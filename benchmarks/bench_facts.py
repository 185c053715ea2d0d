"""Process facts for every process, measured side by side in one run.

    python benchmarks/bench_facts.py [--quick] [--out FILE]

Prints one Markdown table of medians and ratios, at 0 and 2,000 extra processes:

  - proctree.all_facts(ATTRS) (one C pass, then Facts records) and the core's pass alone (the rows as
    tuples, before records are built);
  - psutil.process_iter(attrs=[cmdline, memory_info, cpu_times, create_time, username]), its cache kept
    and cleared;
  - a C floor that reads exactly the files those facts need (cmdline, stat and status of every /proc entry),
    and a second floor that also reads statm, the file psutil takes memory from (proctree reads memory from
    stat, which carries the same counters).

Targets (issue #31): all_facts <= 1.3x the floor and >= 5x psutil over 2,000 processes. The extra processes
are sleepers forked by the harness's C helper; every one has PR_SET_PDEATHSIG and the script ends them in a
finally block. It never signals anything it did not start. Linux only.
"""

import argparse
import os
import signal
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from _harness import Crowd, build, side_by_side  # noqa: E402

import proctree  # noqa: E402
from proctree._table import binding as _binding  # noqa: E402
from proctree._table import facts as _facts  # noqa: E402

try:
    import psutil
except ImportError:  # pragma: no cover
    sys.exit("bench_facts needs psutil (pip install psutil)")

ATTRS = ["cmdline", "memory_info", "cpu_times", "create_time", "username"]

# floor_scan(): cmdline (to its end), stat and status of every process, nothing parsed: the least any reader
# of those facts must do. floor_statm(): the same plus statm, the file set psutil reads.
FLOOR_C = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
/* Returns 1 if <dir>/<name> was read to its end, 0 if not. */
static int slurp(int dirfd, const char *name)
{
    char buf[8192];
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t got;
    while ((got = read(fd, buf, sizeof buf)) > 0)
        ;
    close(fd);
    return got == 0;
}
/* Returns the number of processes whose files were read. */
static int scan(int statm)
{
    char path[300];
    int n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    struct dirent *de;
    int pfd = dirfd(d);
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "%s/cmdline", de->d_name);
        int ok = slurp(pfd, path);
        snprintf(path, sizeof path, "%s/stat", de->d_name);
        ok &= slurp(pfd, path);
        snprintf(path, sizeof path, "%s/status", de->d_name);
        ok &= slurp(pfd, path);
        if (statm) {
            snprintf(path, sizeof path, "%s/statm", de->d_name);
            ok &= slurp(pfd, path);
        }
        n += ok;
    }
    closedir(d);
    return n;
}
int floor_scan(void) { return scan(0); }
int floor_statm(void) { return scan(1); }
"""

ROWS = []


def row(what, value, target="", ok=None):
    ROWS.append((what, value, target, "" if ok is None else ("PASS" if ok else "GAP")))


def ms(s):
    return f"{s * 1e3:.3f} ms"


def psutil_cached():
    return list(psutil.process_iter(ATTRS))


def psutil_cleared():
    psutil.process_iter.cache_clear()
    return list(psutil.process_iter(ATTRS))


WANT = _facts.want_of(ATTRS)


def core_pass():
    return _binding.facts_table(WANT)


def all_facts():
    return proctree.all_facts(ATTRS)


def bench(lib, crowd, extras, rounds):
    import ctypes

    lib.floor_statm.restype = ctypes.c_int
    for extra in extras:
        if extra:
            crowd.start("flat", extra)
        n = len(all_facts())
        assert lib.floor_scan() > 0 and lib.floor_statm() > 0
        psutil_cached()  # fill the cache once
        t = side_by_side(
            {
                "floor": lib.floor_scan,
                "floor+statm": lib.floor_statm,
                "core": core_pass,
                "all_facts": all_facts,
                "psutil cached": psutil_cached,
                "psutil cleared": psutil_cleared,
            },
            rounds,
        )
        crowd.stop()
        tag = f"+{extra} ({n} procs)"
        last = extra == max(extras)
        row(f"{tag} C floor: cmdline, stat, status", ms(t["floor"]))
        row(f"{tag} C floor with statm (psutil's files)", ms(t["floor+statm"]))
        row(f"{tag} the core's pass (rows as tuples)", ms(t["core"]))
        row(f"{tag} proctree.all_facts(ATTRS)", ms(t["all_facts"]))
        row(f"{tag} psutil.process_iter(ATTRS), cache kept", ms(t["psutil cached"]))
        row(f"{tag} psutil.process_iter(ATTRS), cache cleared", ms(t["psutil cleared"]))
        r = t["core"] / t["floor"]
        row(f"{tag} core pass / floor", f"{r:.2f}x")
        r = t["all_facts"] / t["floor"]
        row(f"{tag} all_facts / floor", f"{r:.2f}x", "<= 1.3x" if last else "", r <= 1.3 if last else None)
        r = t["psutil cached"] / t["all_facts"]
        row(f"{tag} psutil cached / all_facts", f"{r:.1f}x", ">= 5x" if last else "", r >= 5 if last else None)
        r = t["psutil cleared"] / t["all_facts"]
        row(f"{tag} psutil cleared / all_facts", f"{r:.1f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--out", help="also write the table to this file")
    args = ap.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("bench_facts is Linux only")
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
            bench(lib, crowd, (0, 2000), rounds)
        finally:
            crowd.stop()
    lines = [
        f"proctree {proctree.__version__}, psutil {psutil.__version__}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, {os.uname().release}; ATTRS = {ATTRS}; medians of {rounds} interleaved rounds; "
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
