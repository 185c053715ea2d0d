"""Teardown benchmarks: terminate_tree against psutil's kill-tree recipe and a floor, side by side.

    /tmp/venv/bin/python benchmarks/bench_teardown.py [--rounds N] [--markdown]

Every method runs on a freshly built tree of the same shape, interleaved round
by round (so machine noise spreads over all of them), and the table shows
medians and ratios measured in this one run. Absolute times depend on the
machine; read the ratios.

  1. cooperative 100-process tree (every member exits on SIGTERM), wall time:
     terminate_tree; psutil's recipe (children(recursive=True), terminate()
     each, wait_procs, kill() the rest); both with and without the caller as
     a child subreaper; and a floor: killpg(SIGKILL) with pidfds opened
     beforehand, until every member is gone or a zombie.
  2. one SIGTERM-ignorer, grace 0.5 s: terminate_tree's elapsed beyond the grace.
  3. a 1,000-member tree: CPU time spent by the caller (user + system).

It only signals trees it built (pid + start time recorded from their own
reports) and ends whatever a method leaves behind before the next round.
"""

import argparse
import ctypes
import os
import resource
import select
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import proctree  # noqa: E402
from proctree._teardown import signals as _signals  # noqa: E402

try:
    import psutil
except ImportError:  # pragma: no cover
    psutil = None

GRACE = 5.0  # long enough that a cooperative tree never reaches it

# The root forks about sqrt(n) children, which fork the rest as grandchildren (so
# the tree has depth and, when the root dies, orphans); it reports all n pids,
# then "ready". With IGNORE the grandchildren ignore SIGTERM and SIGHUP.
_TREE = r"""
import os, signal, sys, time
FD, N, IGNORE = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
def idle():
    while True:
        time.sleep(1000)
pids = [os.getpid()]
r, w = os.pipe()
kids = max(1, int((N - 1) ** 0.5))
made = 1
for k in range(kids):
    if made >= N:
        break
    below = min((N - made - 1) // (kids - k), N - made - 1)
    pid = os.fork()
    if pid == 0:
        os.close(r)
        mine = [os.getpid()]
        gr, gw = os.pipe()
        for _ in range(below):
            g = os.fork()
            if g == 0:
                if IGNORE:
                    signal.signal(signal.SIGTERM, signal.SIG_IGN)
                    signal.signal(signal.SIGHUP, signal.SIG_IGN)
                os.write(gw, b"%d\n" % os.getpid())  # in place, handlers set
                idle()
        got = b""
        while got.count(b"\n") < below:
            got += os.read(gr, 65536)
        mine += [int(x) for x in got.split()]
        os.write(w, ("%s\n" % " ".join(map(str, mine))).encode())
        idle()
    made += 1 + below
os.close(w)
with os.fdopen(r) as f:
    for line in f:
        pids.extend(int(x) for x in line.split())
        if len(pids) >= made:
            break
os.write(FD, ("%s\nready\n" % " ".join(map(str, pids))).encode())
idle()
"""


def build(n, ignore=False):
    """Start an n-process tree in its own session; return (Popen, {pid: start_time})."""
    r, w = os.pipe()
    p = subprocess.Popen(
        [sys.executable, "-c", _TREE, str(w), str(n), "1" if ignore else "0"], pass_fds=(w,), start_new_session=True
    )
    os.close(w)
    data = b""
    with os.fdopen(r, "rb") as f:
        while not data.endswith(b"ready\n"):
            chunk = f.read1(65536)
            if not chunk:
                raise RuntimeError("tree did not start")
            data += chunk
    pids = [int(x) for x in data.split(b"\n")[0].split()]
    ids = {}
    for pid in pids:
        try:
            ids[pid] = proctree.proc(pid).start_time
        except proctree.NoSuchProcess:
            pass
    assert len(pids) == n, (len(pids), n)
    return p, ids


def cleanup(p, ids):
    """End whatever of the tree is still the same process; reap the root."""
    for pid, st in ids.items():
        try:
            if proctree.proc(pid).start_time == st:
                os.kill(pid, signal.SIGKILL)
        except (proctree.NoSuchProcess, ProcessLookupError):
            pass
    try:
        p.wait(timeout=5)
    except (subprocess.TimeoutExpired, ChildProcessError):
        pass


def set_subreaper(on):
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def reap_orphans():
    """As a subreaper we inherit the tree's orphans: reap them between rounds."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# -- the methods: each takes (Popen, ids) of a fresh tree and ends it ---------------


def m_terminate_tree(p, ids):
    proctree.terminate_tree(p.pid, grace=GRACE)


def m_psutil(p, ids):
    parent = psutil.Process(p.pid)
    procs = parent.children(recursive=True) + [parent]
    for q in procs:
        try:
            q.terminate()
        except psutil.NoSuchProcess:
            pass
    gone, alive = psutil.wait_procs(procs, timeout=GRACE)
    for q in alive:
        try:
            q.kill()
        except psutil.NoSuchProcess:
            pass


_floor_fds = {}


def floor_setup(p, ids):
    _floor_fds[p.pid] = [os.pidfd_open(pid) for pid in ids]


def m_floor(p, ids):
    fds = _floor_fds.pop(p.pid)
    os.killpg(p.pid, signal.SIGKILL)
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    left = len(fds)
    while left:
        for fd, _ in poller.poll():
            poller.unregister(fd)
            left -= 1
    for fd in fds:
        os.close(fd)


def timed(method, p, ids):
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    method(p, ids)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return wall, cpu


def run_table(rows, n, rounds, measure="wall"):
    """rows: [(label, method, subreaper, setup)] -> {label: [values]}, interleaved by round."""
    results = {label: [] for label, *_ in rows}
    for _ in range(rounds):
        for label, method, subreaper, setup in rows:
            set_subreaper(subreaper)
            p, ids = build(n)
            try:
                if setup:
                    setup(p, ids)
                wall, cpu = timed(method, p, ids)
                left = [pid for pid, st in ids.items() if _alive(pid, st)]
                if left:
                    raise RuntimeError(f"{label} left {len(left)} processes running")
                results[label].append(wall if measure == "wall" else cpu)
            finally:
                cleanup(p, ids)
                set_subreaper(False)
                reap_orphans()
    return results


def _alive(pid, st):
    try:
        q = proctree.proc(pid)
    except proctree.NoSuchProcess:
        return False
    return q.start_time == st and not q.is_zombie


def fmt_ms(x):
    return f"{x * 1e3:8.1f} ms"


def print_table(title, results, base_label, out, md):
    base = statistics.median(results[base_label])
    if md:
        out.write(
            f"\n### {title}\n\n| method | median | min | max | ratio to {base_label} |\n|---|---:|---:|---:|---:|\n"
        )
    else:
        out.write(f"\n{title}\n{'method':<44}{'median':>11}{'min':>11}{'max':>11}   ratio to {base_label}\n")
    for label, vals in results.items():
        med = statistics.median(vals)
        if md:
            out.write(
                f"| {label} | {fmt_ms(med).strip()} | {fmt_ms(min(vals)).strip()} | {fmt_ms(max(vals)).strip()} | {med / base:.2f}x |\n"
            )
        else:
            out.write(
                f"{label:<44}{fmt_ms(med):>11}{fmt_ms(min(vals)):>11}{fmt_ms(max(vals)):>11}   {med / base:6.2f}x\n"
            )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables (for docs/benchmarks.md)")
    args = ap.parse_args(argv)
    if psutil is None:
        sys.exit("psutil is needed: pip install psutil")
    out = sys.stdout
    md = args.markdown
    n_cpu = os.cpu_count()
    out.write(
        f"{'## ' if md else ''}proctree teardown benchmark: {args.rounds} rounds, {n_cpu} CPUs, "
        f"Linux {os.uname().release}, Python {sys.version.split()[0]}, psutil {psutil.__version__}, "
        f"pidfds {'on' if _signals.pidfds_available() else 'off'}, "
        f"load average {os.getloadavg()[0]:.1f} at the start\n"
    )

    # 1. Cooperative 100-process tree, wall time.
    rows = [
        ("floor: killpg(SIGKILL) + pidfd poll", m_floor, False, floor_setup),
        ("terminate_tree", m_terminate_tree, False, None),
        ("terminate_tree, caller is a subreaper", m_terminate_tree, True, None),
        ("psutil recipe", m_psutil, False, None),
        ("psutil recipe, caller is a subreaper", m_psutil, True, None),
    ]
    res = run_table(rows, 100, args.rounds)
    print_table(
        "1. cooperative 100-process tree: wall time until every member is gone",
        res,
        "floor: killpg(SIGKILL) + pidfd poll",
        out,
        md,
    )

    # 2. One SIGTERM-ignorer: how far past the grace terminate_tree returns.
    over = []
    for _ in range(args.rounds):
        p, ids = build(3, ignore=True)  # root -> child -> the ignorer
        try:
            rep = proctree.terminate_tree(p.pid, grace=0.5)
            assert rep.ok and len(rep.killed) == 1, rep
            over.append(rep.elapsed - 0.5)
        finally:
            cleanup(p, ids)
    med = statistics.median(over)
    if md:
        out.write(
            f"\n### 2. one SIGTERM-ignorer, grace 0.5 s\n\nelapsed beyond the grace: median {med * 1e3:.1f} ms, max {max(over) * 1e3:.1f} ms (target: < 50 ms)\n"
        )
    else:
        out.write(
            f"\n2. one SIGTERM-ignorer, grace 0.5 s: elapsed beyond the grace: median {med * 1e3:.1f} ms, max {max(over) * 1e3:.1f} ms (target < 50 ms)\n"
        )

    # 3. 1,000-member tree: CPU time of the caller.
    rows = [
        ("floor: killpg(SIGKILL) + pidfd poll", m_floor, False, floor_setup),
        ("terminate_tree", m_terminate_tree, False, None),
        ("psutil recipe", m_psutil, False, None),
    ]
    res = run_table(rows, 1000, max(3, args.rounds // 3), measure="cpu")
    print_table(
        "3. 1,000-member tree: CPU time spent by the caller", res, "floor: killpg(SIGKILL) + pidfd poll", out, md
    )
    out.write(f"\n{'' if md else ''}load average {os.getloadavg()[0]:.1f} at the end\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
