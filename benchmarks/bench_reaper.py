"""Benchmark for the orphan reaper's read side, measured side by side in one run.

    python benchmarks/bench_reaper.py [--rounds N] [--leftovers N,N,...] [--markdown] [--profile]

With 2,000 extra processes (500 carrying the PROCTREE_OWNER marker of a live
owner, this benchmark itself; 1,500 without), three ways to find who carries
a marker, interleaved round by round:

  (a) a minimal C floor: opendir /proc, then open/read/close of each
      process's stat and environ (one read each), nothing else;
  (b) proctree.find_orphans(), machine-wide (a pure read: no signal is sent);
  (c) the seed's way: `ps -A -o pid=,ppid=,args=` plus one Python read of
      /proc/<pid>/environ per listed process, searching for the marker.

All three are measured at each count of --leftovers (0, 100 and 1,000 by
default) empty leftover proctree cgroups of dead owners (half with
today's names, half with the legacy ones), as a busy CI machine collects
them beside its processes: the reaper's cost must stay linear in processes +
cgroups. They are made in this run's own cgroup and removed before the next
count (and in the finally block).

Prints medians, the ratios with their targets (PASS/GAP), and whether
find_orphans() named any of the extra processes (it must not: they have a
live owner or no marker). With --profile, also a cProfile of find_orphans().

The extra processes are sleepers forked by a small C helper this script
builds with gcc, like the floor (as in bench_core.py). Every helper process
has PR_SET_PDEATHSIG, and the script ends them (SIGTERM, then SIGKILL) in a
finally block, so nothing outlives it, even on Ctrl-C. It never signals
anything it did not start, and never reaps. Linux only.
"""

import argparse
import cProfile
import ctypes
import io
import os
import pstats
import signal
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from _harness import Crowd, build, side_by_side, table  # noqa: E402

import proctree  # noqa: E402

MARKER = "PROCTREE_OWNER"
MARKED, UNMARKED = 500, 1500
LEFTOVERS = (0, 100, 1000)


def _dead_pid():
    """A pid nothing holds now (kill(pid, 0) says ESRCH)."""
    for pid in range(30000, 300, -1):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except OSError:
            pass
    raise RuntimeError("no free pid")


def make_leftovers(n):
    """n empty leftover tree cgroups of a dead owner, beside this run's own processes; their parents (None: no cgroup).

    They go where leftovers collect: in the cgroup of the processes that made
    them, so the reaper's reading of that cgroup holds all 2,000 of ours.
    """
    from proctree._containment import cgroup

    try:
        base = cgroup.base_dir()
    except cgroup.Unavailable:
        return None
    ns = f"{os.stat('/proc/self/ns/pid').st_ino}-{os.stat('/proc/self/ns/time').st_ino}"
    dead = _dead_pid()
    made = []
    for i in range(n):
        parent = os.path.join(base, f"proctree-{dead}-{i + 1}" + (f"-{ns}" if i % 2 else ""))
        os.mkdir(parent)
        made.append(parent)
        os.mkdir(os.path.join(parent, f"tree-1-{i:08x}"))
    return made


def remove_leftovers(made):
    """Remove the leftovers made; return how many were still there (a reaper elsewhere on the machine may have
    removed some: they are real leftovers of a dead owner)."""
    still = 0
    for parent in made or ():
        try:
            for d in os.listdir(parent):
                if d.startswith("tree-"):
                    os.rmdir(os.path.join(parent, d))
            os.rmdir(parent)
            still += 1
        except FileNotFoundError:
            pass
    return still


FLOOR_C = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static char env[1 << 20];
/* Returns the number of processes whose stat was read: the least a marker scan must do. */
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
        snprintf(path, sizeof path, "/proc/%s/environ", de->d_name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        (void)read(fd, env, sizeof env);
        close(fd);
    }
    closedir(d);
    return n;
}

/* Returns 1 if the directory at <dirfd>/<name> is populated by cgroup.events (a failed read: 1, as the reaper). */
static int populated(int dirfd, const char *name)
{
    char path[512], buf[256];
    snprintf(path, sizeof path, "%s/cgroup.events", name);
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 1;
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0)
        return 1;
    buf[got] = '\0';
    return strstr(buf, "populated 0\n") == NULL;
}

/* Returns the number of cgroup directories at and below the open directory fd, reading what the reaper reads:
 * cgroup.events of each proctree-* directory, and cgroup.procs of the tree cgroups below a populated one. */
static int walk_cgroups(int fd, int in_proctree)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return 0;
    }
    int n = 1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_type != DT_DIR || de->d_name[0] == '.')
            continue;
        int leftover = !in_proctree && strncmp(de->d_name, "proctree-", 9) == 0;
        if (leftover && !populated(dirfd(d), de->d_name)) {
            n++;
            continue;
        }
        if (in_proctree) {
            char path[512];
            snprintf(path, sizeof path, "%s/cgroup.procs", de->d_name);
            int procs = openat(dirfd(d), path, O_RDONLY | O_CLOEXEC);
            if (procs >= 0) {
                (void)read(procs, env, sizeof env);
                close(procs);
            }
        }
        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sub >= 0)
            n += walk_cgroups(sub, in_proctree || leftover);
    }
    closedir(d);
    return n;
}

/* Returns the number of cgroup directories walked under mount, or -1. */
int floor_cgroups(const char *mount)
{
    int fd = open(mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -1 : walk_cgroups(fd, 0);
}
"""


def _with_sleepers(forker_pid):
    """The forker's pid and its sleepers'."""
    return {forker_pid, *(c.pid for c in proctree.children(forker_pid))}


def seeds_way():
    """ps for the table, then one Python read of each environ: [(pid, ppid, marker value)]."""
    out = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,args="], capture_output=True, check=True).stdout
    key = MARKER.encode() + b"="
    found = []
    for line in out.splitlines():
        fields = line.split(None, 2)
        pid, ppid = int(fields[0]), int(fields[1])
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                data = f.read()
        except OSError:
            continue
        for e in data.split(b"\0"):
            if e.startswith(key):
                found.append((pid, ppid, e[len(key) :]))
                break
    return found


def ms(s):
    return f"{s * 1e3:.2f} ms"


def profile(fn, top=18):
    """cProfile of fn(): the top functions by cumulative time, as text."""
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(top)
    return buf.getvalue()


def _counts(text):
    """--leftovers: comma-separated counts of leftover cgroups, each >= 0."""
    counts = tuple(int(x) for x in text.split(","))
    if any(c < 0 for c in counts):
        raise argparse.ArgumentTypeError("counts must be >= 0")
    return counts


def measure(lib, counts, rounds):
    """{leftover count: medians of the floors, find_orphans, seed}; counts without cgroups (None) are left out."""
    from proctree._containment import cgroup

    mount = cgroup.find_mount()
    lib.floor_cgroups.argtypes = [ctypes.c_char_p]

    def floor():
        lib.floor_scan()
        if mount is not None:
            lib.floor_cgroups(os.fsencode(mount))

    out = {}
    for count in counts:
        made = make_leftovers(count) if count else []
        try:
            if made is None:
                continue  # no writable cgroup here
            times = side_by_side(
                {
                    "procs floor": lib.floor_scan,
                    "floor": floor,
                    "find_orphans": proctree.find_orphans,
                    "seed": seeds_way,
                },
                rounds,
            )
        finally:
            still = remove_leftovers(made)
        times["kept"] = still if count else 0
        out[count] = times
    return out


def rows_for(times):
    """The table's rows: per leftover count, the three medians and the two ratios with their targets."""
    rows = []
    for count, t in times.items():
        kept = f", {t['kept']} still there at the end" if t["kept"] != count else ""
        tag = f"{count} leftover cgroups{kept}"
        r_floor = t["find_orphans"] / t["floor"]
        r_seed = t["seed"] / t["find_orphans"]
        rows += [
            (f"{tag}: C floor, stat + environ of each process", ms(t["procs floor"]), "", ""),
            (f"{tag}: C floor, the same + the cgroup reads (the floor)", ms(t["floor"]), "", ""),
            (f"{tag}: proctree.find_orphans(), machine-wide", ms(t["find_orphans"]), "", ""),
            (f"{tag}: seed's way, ps -A + Python read of each environ", ms(t["seed"]), "", ""),
            (f"{tag}: find_orphans() / floor", f"{r_floor:.2f}x", "<= 1.2x", "PASS" if r_floor <= 1.2 else "GAP"),
            (f"{tag}: seed's way / find_orphans()", f"{r_seed:.1f}x", ">= 4x", "PASS" if r_seed >= 4 else "GAP"),
        ]
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--leftovers", type=_counts, default=LEFTOVERS, help="leftover cgroup counts (0,100,1000)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table (for docs/benchmarks.md)")
    ap.add_argument("--profile", action="store_true", help="also print a cProfile of one find_orphans()")
    args = ap.parse_args(argv)
    if not sys.platform.startswith("linux"):
        sys.exit("bench_reaper is Linux only")
    if args.rounds < 1:
        sys.exit("--rounds must be at least 1")

    # SIGTERM/SIGHUP end us through the finally below, like Ctrl-C does.
    def bail(sig, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, bail)
    signal.signal(signal.SIGHUP, bail)

    me = proctree.proc(os.getpid())
    # The value spawn() writes: the owner's identity, placed in its pid and time namespaces, and its uid.
    owner = f"{me.pid}:{me.start_time}@{os.stat('/proc/self/ns/pid').st_ino}.{os.stat('/proc/self/ns/time').st_ino}.{os.geteuid()}"
    load_before = os.getloadavg()[0]
    prof_text = ""
    with tempfile.TemporaryDirectory() as tmp:
        lib, forker = build(tmp, FLOOR_C)
        crowd = Crowd(forker)
        try:
            # Our own environment stays unmarked: only the crowd names us as its owner.
            env = {k: v for k, v in os.environ.items() if k != MARKER}
            marked = _with_sleepers(
                crowd.start("flat", MARKED - 1, env=dict(env, **{MARKER: owner}))
            )  # the forker carries it too
            unmarked = _with_sleepers(crowd.start("flat", UNMARKED - 1, env=env))
            ours = marked | unmarked
            n = len(proctree.snapshot())
            assert lib.floor_scan() > 0
            seen_marked = {pid for pid, _, v in seeds_way() if v == owner.encode()}
            assert marked <= seen_marked, f"the seed's way missed {len(marked - seen_marked)} marked processes"
            times = measure(lib, args.leftovers, args.rounds)
            found = proctree.find_orphans()
            named = [o for o in found if o.proc.pid in ours]
            if args.profile:
                prof_text = profile(proctree.find_orphans)
        finally:
            crowd.stop()

    rows = rows_for(times)
    rows += [
        (
            f"candidates among our {len(ours)} (live owner or no marker)",
            f"{len(named)} (of {len(found)} machine-wide)",
            "0",
            "PASS" if not named else "GAP",
        ),
    ]
    head = (
        f"proctree {proctree.__version__}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"Linux {os.uname().release}; {n} processes ({len(marked)} extra with a live owner's marker, "
        f"{len(unmarked)} without); medians of {args.rounds} interleaved rounds; "
        f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print(table(head, rows, args.markdown))
    for o in named:
        print(f"UNEXPECTED candidate {o.proc.pid}: {o.reason} ({o.evidence})")
    if prof_text:
        print("\ncProfile of one find_orphans():\n" + ("```\n" if args.markdown else "") + prof_text.rstrip())
        if args.markdown:
            print("```")
    return 0 if not named else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the helpers are already ended by main()'s finally
        sys.exit(130)
