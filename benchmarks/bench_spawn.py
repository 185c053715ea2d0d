"""Contained spawning against plain subprocess.Popen, side by side in one run: medians and ratios.

1. `spawn(["true"]).wait()` per mode and `proctree.Popen(["true"]).wait()`
   against `subprocess.Popen(["true"]).wait()`, and the same for `python -c
   pass`: what containment adds to a whole short command (issue 11's targets:
   within 3 ms of Popen; within 10% for python; issue 20's: proctree.Popen
   within 1.5 ms of Popen, in every mode: the marked fallback too). And
   proctree.Popen's memory per live child (this process's growth plus its
   holding tree, shared by all) against subprocess.Popen's.
2. The keeper's resident memory: 100 live contained trees per mode, each
   keeper's VmRSS and PSS read from /proc, against a Python interpreter
   sleeping (what a keeper written in Python would hold at least).
3. Teardown of a cooperative 100-process tree (sh + 99 sleeps): Tree.terminate()
   and Tree.kill() per mode, against cgroup.kill on the same tree in a bare
   cgroup (cgroup mode) and terminate_tree() on it started uncontained.
4. Owner SIGKILL: an owner spawns a tree holding a TERM-ignoring command and a
   double-forked setsid daemon that ignores TERM too; the owner is SIGKILLed;
   the time until every member is gone, against the tree's grace.

Rounds are interleaved so machine noise hits every row alike. Every process
started here is ended here (the harness checks by pid and start time).
Linux only. Usage: python benchmarks/bench_spawn.py [--rounds N] [--markdown FILE]
"""

import argparse
import os
import platform
import select
import signal
import statistics
import subprocess
import sys
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import proctree  # noqa: E402
from proctree._containment import cgroup as _cgroup  # noqa: E402
from proctree._containment.spawn import spawn  # noqa: E402

TREE_CMD = ["sh", "-c", "for i in $(seq 99); do sleep 60 & done; echo ready; wait"]
GRACE = 1.0  # the owner-death scenario's grace


def available_modes():
    modes = []
    for m in ("cgroup", "subreaper", "session"):
        try:
            t = spawn(["true"], contain=m)
        except OSError as exc:
            print(f"# mode {m} unavailable here: {exc}", file=sys.stderr)
            continue
        t.wait(10)
        t.terminate()
        modes.append(m)
    return modes


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_whole_commands(modes, rounds):
    """{command: {how: median seconds}} for true and python -c pass, Popen vs proctree.Popen and spawn per mode."""
    commands = {"true": ["true"], "python -c pass": [sys.executable, "-c", "pass"]}
    rows = {c: {"Popen": [], "proctree.Popen": [], **{f"spawn({m})": [] for m in modes}} for c in commands}
    proctree.Popen(["true"]).wait()  # its holding keeper starts once per process, with the first one
    for _ in range(rounds):
        for c, argv in commands.items():
            rows[c]["Popen"].append(_timed(lambda argv=argv: subprocess.Popen(argv).wait()))
            rows[c]["proctree.Popen"].append(_timed(lambda argv=argv: proctree.Popen(argv).wait()))
            for m in modes:
                rows[c][f"spawn({m})"].append(_timed(lambda argv=argv, m=m: spawn(argv, contain=m).wait()))
    return {c: {k: statistics.median(v) for k, v in r.items()} for c, r in rows.items()}


MARKED_CHILD = r"""
import json, statistics, subprocess, sys, time
import proctree
from proctree._containment import popenhold
popenhold._force_session = True  # the marked fallback, as on a machine without a writable cgroup v2
rounds = int(sys.argv[1])
commands = {"true": ["true"], "python -c pass": [sys.executable, "-c", "pass"]}
proctree.Popen(["true"]).wait()
rows = {c: {"Popen": [], "marked": []} for c in commands}
for _ in range(rounds):
    for c, argv in commands.items():
        for how, cls in (("Popen", subprocess.Popen), ("marked", proctree.Popen)):
            t = time.perf_counter()
            cls(argv).wait()
            rows[c][how].append(time.perf_counter() - t)
popenhold.release()
print(json.dumps({c: {k: statistics.median(v) for k, v in r.items()} for c, r in rows.items()}))
"""


def bench_marked_popen(rounds):
    """{command: {"Popen": s, "marked": s}}: proctree.Popen's marked fallback against Popen, in a process of its own
    (the fallback is chosen once per process), interleaved there as above."""
    import json

    out = subprocess.run(
        [sys.executable, "-c", MARKED_CHILD, str(rounds)],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))),
    )
    return json.loads(out.stdout)


def bench_popen_memory(n):
    """{how: kB per child}: this process's VmRSS growth, plus what proctree.Popen's holding tree holds, over n live
    children, for subprocess.Popen and proctree.Popen (cgroup mode where it works)."""
    from proctree._containment import popenhold

    proctree.Popen(["true"]).wait()  # the holding tree exists before the first reading
    holder = popenhold.holder()
    held = [holder.keeper_pid, holder.pid] if holder is not None else []
    out = {}
    for how, cls in (("subprocess.Popen", subprocess.Popen), ("proctree.Popen", proctree.Popen)):
        kids = []
        try:
            before = _kib(os.getpid(), "VmRSS") + sum(_kib(p, "VmRSS") for p in held if how != "subprocess.Popen")
            for _ in range(n):
                kids.append(cls(["sleep", "600"]))
            time.sleep(0.2)
            after = _kib(os.getpid(), "VmRSS") + sum(_kib(p, "VmRSS") for p in held if how != "subprocess.Popen")
        finally:
            for k in kids:
                k.kill()
                k.wait()
        out[how] = (after - before) / n
    out["holding tree, all children (keeper + hold step)"] = sum(_kib(p, "VmRSS") for p in held)
    return out


def _kib(pid, field, path="status"):
    with open(f"/proc/{pid}/{path}") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def bench_memory(modes, n):
    """{how: (median VmRSS kB, median Pss kB, sum VmRSS kB, sum Pss kB)} over n live keepers (or interpreters)."""
    out = {}
    for m in modes:
        trees = []
        try:
            for _ in range(n):
                trees.append(spawn(["sleep", "600"], contain=m))
            rss = [_kib(t.keeper_pid, "VmRSS") for t in trees]
            pss = [_kib(t.keeper_pid, "Pss", "smaps_rollup") for t in trees]
        finally:
            for t in trees:
                t.terminate(grace=0)
        out[f"keeper ({m})"] = (statistics.median(rss), statistics.median(pss), sum(rss), sum(pss))
    pys = []
    try:
        for _ in range(10):
            pys.append(subprocess.Popen([sys.executable, "-I", "-S", "-c", "import time; time.sleep(600)"]))
        time.sleep(0.5)
        rss = [_kib(p.pid, "VmRSS") for p in pys]
        pss = [_kib(p.pid, "Pss", "smaps_rollup") for p in pys]
    finally:
        for p in pys:
            p.kill()
            p.wait()
    out["python -I -S sleeping (reference)"] = (statistics.median(rss), statistics.median(pss), None, None)
    return out


def _tree_ready(stream):
    line = stream.readline()
    assert line.strip() in (b"ready", "ready"), line


def _bare_cgroup_kill(path):
    """Start TREE_CMD inside the cgroup at path, then time cgroup.kill until cgroup.events says empty."""
    argv = ["sh", "-c", f'echo $$ > "{path}/cgroup.procs" && exec "$@"', "sh", *TREE_CMD]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE)
    try:
        _tree_ready(p.stdout)
        events = os.open(os.path.join(path, "cgroup.events"), os.O_RDONLY)
        try:
            poller = select.poll()
            poller.register(events, select.POLLPRI)
            t = time.perf_counter()
            with open(os.path.join(path, "cgroup.kill"), "w") as f:
                f.write("1")
            while b"populated 0" not in os.pread(events, 4096, 0):
                poller.poll(1000)
            took = time.perf_counter() - t
        finally:
            os.close(events)
        return took
    finally:
        p.wait()
        p.stdout.close()


def bench_teardown(modes, rounds):
    rows = {"terminate_tree (uncontained Popen)": []}
    if "cgroup" in modes:
        rows["cgroup.kill (bare cgroup)"] = []
    for m in modes:
        rows[f"Tree.terminate ({m})"] = []
        rows[f"Tree.kill ({m})"] = []
    found = {k: [] for k in rows}
    bare = None
    if "cgroup" in modes:
        me = proctree.proc(os.getpid())
        bare = _cgroup.create(me.pid, me.start_time, "bench-bare")
    try:
        for _ in range(rounds):
            p = subprocess.Popen(TREE_CMD, stdout=subprocess.PIPE)
            _tree_ready(p.stdout)
            t = time.perf_counter()
            rep = proctree.terminate_tree(p.pid, grace=5)
            rows["terminate_tree (uncontained Popen)"].append(time.perf_counter() - t)
            found["terminate_tree (uncontained Popen)"].append(len(rep.found))
            p.wait()
            p.stdout.close()
            if bare is not None:
                rows["cgroup.kill (bare cgroup)"].append(_bare_cgroup_kill(bare))
                found["cgroup.kill (bare cgroup)"].append(100)
            for m in modes:
                for how in ("terminate", "kill"):
                    tree = spawn(TREE_CMD, contain=m, stdout=subprocess.PIPE, grace=5)
                    _tree_ready(tree.stdout)
                    t = time.perf_counter()
                    rep = tree.terminate() if how == "terminate" else tree.kill()
                    rows[f"Tree.{how} ({m})"].append(time.perf_counter() - t)
                    found[f"Tree.{how} ({m})"].append(len(rep.found))
                    tree.stdout.close()
    finally:
        if bare is not None:
            _cgroup.remove(bare)
    return {k: statistics.median(v) for k, v in rows.items()}, {k: statistics.median(v) for k, v in found.items()}


OWNER = textwrap.dedent(r"""
    import os, signal, sys, time
    sys.path.insert(0, sys.argv[3])
    import proctree
    w, mode = int(sys.argv[1]), sys.argv[2]
    cmd = '''
    import os, signal, sys, time
    w = int(sys.argv[1])
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, b"%d\\n" % os.getpid())
            time.sleep(300)
        os._exit(0)
    os.wait()
    os.write(w, b"%d\\n" % os.getpid())
    time.sleep(300)
    '''
    t = proctree.spawn([sys.executable, "-c", cmd, str(w)], contain=mode, grace=float(sys.argv[4]), pass_fds=(w,))
    time.sleep(300)
""")


def _alive(pid, start):
    try:
        p = proctree.proc(pid)
    except proctree.NoSuchProcess:
        return False
    return p.start_time == start and not p.is_zombie


def bench_owner_death(modes, rounds):
    """{mode: median seconds from the owner's SIGKILL until every member is gone}."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = {}
    for m in modes:
        times = []
        for _ in range(rounds):
            r, w = os.pipe()
            owner = subprocess.Popen([sys.executable, "-c", OWNER, str(w), m, root, str(GRACE)], pass_fds=(w,))
            os.close(w)
            members = []
            try:
                buf = b""
                while buf.count(b"\n") < 2:
                    if not select.select([r], [], [], 30)[0]:
                        raise RuntimeError(f"the owner's tree did not report within 30 s: {buf!r}")
                    chunk = os.read(r, 64)
                    if not chunk:
                        raise RuntimeError("the owner exited before its tree reported")
                    buf += chunk
                members = [(pid, proctree.proc(pid).start_time) for pid in map(int, buf.split())]
                t = time.perf_counter()
                owner.kill()
                owner.wait()
                deadline = t + GRACE + 10
                while any(_alive(*m_) for m_ in members) and time.perf_counter() < deadline:
                    time.sleep(0.002)
                times.append(time.perf_counter() - t)
            finally:
                os.close(r)
                if owner.poll() is None:
                    owner.kill()
                    owner.wait()
                for pid, start in members:
                    if _alive(pid, start):
                        os.kill(pid, signal.SIGKILL)
        out[m] = statistics.median(times)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--teardown-rounds", type=int, default=10)
    ap.add_argument("--owner-rounds", type=int, default=5)
    ap.add_argument("--keepers", type=int, default=100)
    ap.add_argument("--markdown", help="also write the tables to this file")
    ap.add_argument("--only-commands", action="store_true", help="only section 1 (whole short commands)")
    ap.add_argument(
        "--only-popen",
        action="store_true",
        help="only the drop-in's numbers: whole short commands (with the marked fallback) and memory per child",
    )
    a = ap.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("bench_spawn reads /proc: Linux only")
    modes = available_modes()
    whole = bench_whole_commands(modes, a.rounds)
    marked = bench_marked_popen(a.rounds)
    for c, r in marked.items():  # its added time, on the Popen row of this run
        whole[c]["proctree.Popen (marked fallback)"] = whole[c]["Popen"] + (r["marked"] - r["Popen"])
    popen_mem = bench_popen_memory(a.keepers)
    if a.only_commands or a.only_popen:
        mem, td, found, death = {}, {}, {}, {}
    else:
        mem = bench_memory(modes, a.keepers)
        td, found = bench_teardown(modes, a.teardown_rounds)
        death = bench_owner_death(modes, a.owner_rounds)

    out = [
        f"Machine: {platform.system()} {platform.release()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.2f} at the end.\n"
    ]
    for c, rows in whole.items():
        base = rows["Popen"]
        out.append(f"### `{c}` start to finish, contained vs Popen, median of {a.rounds} interleaved rounds\n")
        out.append("| how | median | added vs Popen | ratio vs Popen |")
        out.append("|---|---:|---:|---:|")
        for k, v in rows.items():
            out.append(f"| {k} | {v * 1e3:.2f} ms | {(v - base) * 1e3:+.2f} ms | {v / base:.2f}x |")
        out.append("")
    out.append(
        "(The marked fallback runs in a process of its own, where it is chosen; its row is the Popen row plus the "
        "time it added over Popen there, interleaved the same way.)\n"
    )
    out.append(f"### Memory per contained child, {a.keepers} live `sleep` children\n")
    out.append("| how | per child |")
    out.append("|---|---:|")
    for k, v in popen_mem.items():
        per = f"{v / 1024:.3f} MB" if "holding" not in k else f"{v / 1024:.2f} MB in all"
        out.append(f"| {k} | {per} |")
    out.append("")
    if a.only_commands or a.only_popen:
        _emit(out, a.markdown)
        return
    out.append(f"### Keeper memory, {a.keepers} live contained trees per mode\n")
    out.append(f"| process | VmRSS (median) | PSS (median) | VmRSS, all {a.keepers} | PSS, all {a.keepers} |")
    out.append("|---|---:|---:|---:|---:|")
    for k, (rss, pss, rss_all, pss_all) in mem.items():
        total = "" if rss_all is None else f"{rss_all / 1024:.1f} MB | {pss_all / 1024:.1f} MB"
        out.append(f"| {k} | {rss / 1024:.2f} MB | {pss / 1024:.2f} MB | {total or '- | -'} |")
    out.append(f"\n### Teardown of a cooperative 100-process tree, median of {a.teardown_rounds} rounds\n")
    out.append("| how | members found | median | ratio vs cgroup.kill | ratio vs terminate_tree |")
    out.append("|---|---:|---:|---:|---:|")
    tbase = td["terminate_tree (uncontained Popen)"]
    kbase = td.get("cgroup.kill (bare cgroup)")
    for k, v in td.items():
        vs_kill = f"{v / kbase:.2f}x" if kbase else "-"
        out.append(f"| {k} | {found[k]:.0f} | {v * 1e3:.1f} ms | {vs_kill} | {v / tbase:.2f}x |")
    out.append(
        f"\n### Owner SIGKILL: every member gone (a TERM-ignoring command and setsid daemon), "
        f"grace {GRACE:.1f} s, median of {a.owner_rounds}\n"
    )
    out.append("| mode | all gone after | over the grace |")
    out.append("|---|---:|---:|")
    for m, v in death.items():
        out.append(f"| {m} | {v * 1e3:.0f} ms | {(v - GRACE) * 1e3:+.0f} ms |")
    _emit(out, a.markdown)


def _emit(out, markdown):
    text = "\n".join(out) + "\n"
    print(text)
    if markdown:
        with open(markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
