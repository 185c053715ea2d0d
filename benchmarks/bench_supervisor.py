"""`proctree up` beside honcho, supervisord and circus on one Procfile, in the same run; and start() -> ready.

1. Stop: the five-entry Procfile of issue #12, each entry a shell running a script:
     server    a server (python -m http.server)
     pair      a shell with two server grandchildren
     daemon    a shell that starts a setsid server, then waits
     stubborn  a shell + python that ignores SIGTERM, SIGINT and SIGHUP
     printer   a printing loop
   Each runner starts it (in a session of its own); once all four ports answer
   and the stubborn and printing entries have said they run, the runner gets
   one SIGINT. Measured: the time until the runner exits (given up after
   --patience seconds), the processes of the run still alive one second
   later, and the ports still answering. Every runner gets the same grace
   between SIGTERM and SIGKILL (--grace, 5 s: honcho's fixed one).
2. Ready: time from Supervisor.start() to the `ready` event for
   `python -m http.server` on a free loopback port, against the server's own
   startup (Popen to the first accepted connection: the floor).
3. CPU per line: a service that prints 100,000 log lines as fast as it can
   (well over 100k lines/s); the supervisor's own CPU time (this process,
   all its threads) per line, readiness detection running on every line,
   against a bare asyncio reader of the same output (readline in a loop: the
   floor of reading lines in Python at all).
4. Throughput to a file: a one-entry Procfile (`seq 1 N`, 1,000,000 lines by
   default) run by `proctree up` and by honcho with stdout redirected to a
   file; lines per second from start to exit, and whether every line arrived
   in order (a runner that skips lines is reported as such, not ranked).

Rounds are interleaved, so machine noise hits every runner alike; medians and
ratios are printed (and written as Markdown with --markdown FILE).

Safety: every process a run starts carries PROCTREE_BENCH_RUN=<nonce of this
run>; after each run exactly those processes (pid and start time checked) and
the runner are killed, nothing else. Linux only.

Peers: honcho, supervisord and circusd from --peers DIR (a venv), else beside
this Python (`pip install '.[bench]'`), else pip-installed into a temporary
venv (skip with --no-install; a peer that cannot be had is reported, not faked).
process-compose and overmind are not on PyPI or Debian's archive here, so they
are not measured.

Usage: python benchmarks/bench_supervisor.py [--rounds N] [--ready-rounds N] [--grace S]
                                            [--peers DIR] [--no-install] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import resource
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import proctree  # noqa: E402

MARKER = "PROCTREE_BENCH_RUN"
PY = sys.executable

SCRIPTS = {
    "server": "{py} -m http.server {p1} --bind 127.0.0.1\n",
    "pair": "{py} -m http.server {p2} --bind 127.0.0.1 &\n{py} -m http.server {p3} --bind 127.0.0.1 &\nwait\n",
    # A daemon lets go of the runner's pipes, as daemons do (honcho waits forever on a held pipe).
    "daemon": "setsid {py} -m http.server {p4} --bind 127.0.0.1 </dev/null >{d}/daemon.log 2>&1 &\n"
    "while :; do sleep 1; done\n",
    "stubborn": textwrap.dedent(
        """\
        {py} -c '
        import signal, time
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        open("{d}/stubborn.ready", "w").close()
        while True:
            time.sleep(1)
        '
        """
    ),
    "printer": 'touch "{d}/printer.ready"\nwhile :; do echo tick; sleep 0.2; done\n',
}


# -- processes of a run ----------------------------------------------------------------


def free_ports(n):
    """n distinct free loopback ports (bound, read, released)."""
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def answers(port, timeout=0.2):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def marked(nonce, d):
    """Live (non-zombie) processes of this run: their environment carries MARKER=nonce, or their
    working directory is the run's own fresh folder (d) in case a runner scrubbed the environment."""
    needle = f"{MARKER}={nonce}".encode()
    me = os.getpid()
    found = []
    for p in proctree.snapshot().values():
        if p.pid == me or p.is_zombie:
            continue
        try:
            with open(f"/proc/{p.pid}/environ", "rb") as f:
                mine = needle in f.read().split(b"\0")
            mine = mine or os.readlink(f"/proc/{p.pid}/cwd") in (d, d + " (deleted)")
        except OSError:
            continue
        if mine:
            found.append(p)
    return found


def kill_marked(nonce, d, runner):
    """SIGKILL what this run started and left (pid and start time checked), and the runner; wait until gone."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = marked(nonce, d)
        if not left and runner.poll() is not None:
            return
        for p in left:
            try:
                if proctree.proc(p.pid).start_time != p.start_time or p.pid in (0, 1, os.getpid()):
                    continue
                os.kill(p.pid, signal.SIGCONT)
                os.kill(p.pid, signal.SIGKILL)
            except (proctree.NoSuchProcess, ProcessLookupError):
                pass
        if runner.poll() is None:
            runner.kill()
        time.sleep(0.05)
    raise RuntimeError(f"could not end what the run {nonce} left")


# -- the runners ---------------------------------------------------------------------


def write_scripts(d, ports):
    values = {"py": PY, "d": d, "p1": ports[0], "p2": ports[1], "p3": ports[2], "p4": ports[3]}
    for name, body in SCRIPTS.items():
        with open(os.path.join(d, f"{name}.sh"), "w") as f:
            f.write(body.format(**values))
    with open(os.path.join(d, "Procfile"), "w") as f:
        f.writelines(f"{name}: sh {d}/{name}.sh\n" for name in SCRIPTS)


def cmd_proctree(d, grace, peers):
    return [PY, "-m", "proctree", "up", "-f", f"{d}/Procfile", "--grace", str(grace)]


def cmd_honcho(d, grace, peers):
    # honcho's grace is fixed at 5 s (Manager's KILL_WAIT).
    return [peers["honcho"], "-f", f"{d}/Procfile", "-d", d, "start"]


def cmd_supervisord(d, grace, peers):
    conf = [
        "[supervisord]",
        "nodaemon=true",
        f"logfile={d}/supervisord.log",
        f"pidfile={d}/supervisord.pid",
        f"childlogdir={d}",
    ]
    for name in SCRIPTS:
        conf += [
            f"[program:{name}]",
            f"command=sh {d}/{name}.sh",
            f"stopwaitsecs={grace:g}",
            "redirect_stderr=true",
            f"stdout_logfile={d}/{name}.log",
        ]
    path = os.path.join(d, "supervisord.conf")
    with open(path, "w") as f:
        f.write("\n".join(conf) + "\n")
    return [peers["supervisord"], "-n", "-c", path]


def cmd_circus(d, grace, peers):
    control, pubsub = free_ports(2)
    conf = [
        "[circus]",
        f"endpoint = tcp://127.0.0.1:{control}",
        f"pubsub_endpoint = tcp://127.0.0.1:{pubsub}",
        "statsd = false",
    ]
    for name in SCRIPTS:
        # copy_env: circus starts watchers with an empty environment otherwise (no PATH, no marker).
        conf += [
            f"[watcher:{name}]",
            "cmd = sh",
            f"args = {d}/{name}.sh",
            f"working_dir = {d}",
            "copy_env = true",
            f"graceful_timeout = {grace:g}",
        ]
    path = os.path.join(d, "circus.ini")
    with open(path, "w") as f:
        f.write("\n".join(conf) + "\n")
    return [peers["circusd"], path]


RUNNERS = {
    "proctree up": (cmd_proctree, None),
    "honcho": (cmd_honcho, "honcho"),
    "supervisord": (cmd_supervisord, "supervisord"),
    "circus": (cmd_circus, "circusd"),
}


def everything_answers(d, ports):
    return all(answers(p) for p in ports) and all(
        os.path.exists(os.path.join(d, f)) for f in ("stubborn.ready", "printer.ready")
    )


def stop_round(runner, grace, patience, peers):
    """One run of one runner: (seconds to exit or None, processes left, ports left, note)."""
    make, _ = RUNNERS[runner]
    d = tempfile.mkdtemp(prefix="bench-sup-")
    ports = free_ports(4)
    write_scripts(d, ports)
    nonce = secrets.token_hex(8)
    env = {**os.environ, MARKER: nonce, "PYTHONUNBUFFERED": "1"}
    log = open(os.path.join(d, "runner.log"), "wb")
    proc = subprocess.Popen(
        make(d, grace, peers), env=env, cwd=d, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while not everything_answers(d, ports):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = open(os.path.join(d, "runner.log"), "rb").read()[-600:].decode(errors="replace")
                raise RuntimeError(f"{runner} did not bring everything up (exit {proc.poll()}):\n{tail}")
            time.sleep(0.05)
        time.sleep(0.3)  # let the printer print and every entry settle
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(patience)
            took = time.monotonic() - t0
        except subprocess.TimeoutExpired:
            took = None
        time.sleep(1.0)
        left = [p for p in marked(nonce, d) if p.pid != proc.pid]
        open_ports = sum(answers(p) for p in ports)
        return took, len(left), open_ports, sorted(p.name for p in left)
    finally:
        kill_marked(nonce, d, proc)
        proc.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)


# -- peers ------------------------------------------------------------------------------


def find_peers(where, install):
    """{program: path} for honcho, supervisord, circusd; installing into a temp venv if asked."""
    names = [p for _, p in RUNNERS.values() if p]
    dirs = [os.path.join(where, "bin")] if where else [os.path.dirname(PY)]
    found = {n: p for n in names for p in [_which(n, dirs)] if p}
    missing = [n for n in names if n not in found]
    if missing and install and not where:
        venv = os.path.join(tempfile.gettempdir(), "proctree-bench-peers")
        if not os.path.exists(os.path.join(venv, "bin", "pip")):
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        packages = {"honcho": "honcho", "supervisord": "supervisor", "circusd": "circus"}
        result = subprocess.run(
            [os.path.join(venv, "bin", "pip"), "install", "-q", *sorted({packages[n] for n in missing})],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            print(f"# pip could not install the peers: {result.stderr.strip()[-400:]}", file=sys.stderr)
        for n in missing:
            p = _which(n, [os.path.join(venv, "bin")])
            if p:
                found[n] = p
    return found


def _which(name, dirs):
    for d in dirs:
        path = os.path.join(d, name)
        if os.access(path, os.X_OK):
            return path
    return None


def version_of(program):
    try:
        out = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=20)
    except OSError:
        return "?"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[-1] if text else "?"


# -- start() -> ready -------------------------------------------------------------------


def floor_round():
    """Popen of the server to its first accepted connection, in seconds."""
    (port,) = free_ports(1)
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [PY, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not answers(port, timeout=0.05):
            if p.poll() is not None:
                raise RuntimeError("the server did not start")
            time.sleep(0.001)
        return time.perf_counter() - t0
    finally:
        p.terminate()
        p.wait()


async def ready_round_async():
    (port,) = free_ports(1)
    async with proctree.Supervisor(stop_grace=1.0) as sup:
        ready = asyncio.get_running_loop().create_future()

        def listen(event):
            if event.kind in ("ready", "failed", "exited") and not ready.done():
                ready.set_result(event.snapshot)

        sup.subscribe(listen)
        t0 = time.perf_counter()
        await sup.start([PY, "-m", "http.server", str(port), "--bind", "127.0.0.1"], name="web")
        snap = await asyncio.wait_for(ready, 30)
        took = time.perf_counter() - t0
        if snap.status != "ready":
            raise RuntimeError(f"the server did not become ready: {snap}")
        await sup.stop("all")
    return took, snap.ready_by


def ready_rounds(n):
    floors, readies, how = [], [], set()
    for _ in range(n):
        floors.append(floor_round())
        took, by = asyncio.run(ready_round_async())
        readies.append(took)
        how.add(by)
    return floors, readies, how


# -- CPU per line ------------------------------------------------------------------------


def flood_command(n):
    body = (
        "import sys\n"
        "w = sys.stdout.write\n"
        f"for i in range({n}):\n"
        "    w('%d GET /api/items?page=%d 200 OK in 3 ms, user agent curl/8.0\\n' % (i, i % 50))\n"
        "sys.stdout.flush()\n"
    )
    return [PY, "-c", body]


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def bare_round_async(n):
    """(CPU seconds of this process, wall seconds) reading the flood line by line, nothing else."""
    c0, t0 = _cpu(), time.perf_counter()
    p = await asyncio.create_subprocess_exec(*flood_command(n), stdout=asyncio.subprocess.PIPE)
    assert p.stdout is not None
    count = 0
    while await p.stdout.readline():
        count += 1
    await p.wait()
    if count != n:
        raise RuntimeError(f"read {count} lines of {n}")
    return _cpu() - c0, time.perf_counter() - t0


async def supervised_round_async(n):
    """(CPU seconds of this process, wall seconds) for the same flood as a service."""
    async with proctree.Supervisor(stop_grace=1.0) as sup:
        ended = asyncio.get_running_loop().create_future()

        def listen(event):
            if event.kind in ("exited", "failed") and not ended.done():
                ended.set_result(event.snapshot)

        sup.subscribe(listen)
        c0, t0 = _cpu(), time.perf_counter()
        await sup.start(flood_command(n), name="flood")
        snap = await asyncio.wait_for(ended, 120)
        took = _cpu() - c0, time.perf_counter() - t0
        last = sup.read("flood", since=None).next
        if snap.status != "exited" or snap.exit_code != 0 or last < n:
            raise RuntimeError(f"the flood did not run whole: {snap}, {last} rows")
    return took


def cpu_rounds(rounds, n):
    """(median CPU per line bare, supervised; (lines/s bare, supervised))."""
    bare, ours, rate_bare, rate_ours = [], [], [], []
    for _ in range(rounds):
        cpu, wall = asyncio.run(bare_round_async(n))
        bare.append(cpu / n)
        rate_bare.append(n / wall)
        cpu, wall = asyncio.run(supervised_round_async(n))
        ours.append(cpu / n)
        rate_ours.append(n / wall)
    med = statistics.median
    return med(bare), med(ours), (med(rate_bare), med(rate_ours))


# -- throughput to a file ----------------------------------------------------------------


def throughput_round(runner, n, peers):
    """(wall seconds, lines of the entry that arrived, whether they are 1..n in order) for one runner."""
    with tempfile.TemporaryDirectory(prefix="proctree-bench-") as d:
        with open(os.path.join(d, "Procfile"), "w") as f:
            f.write(f"a: seq 1 {n}\n")
        if runner == "proctree up":
            cmd = [PY, "-m", "proctree", "up", "--no-timestamp", "-f", f"{d}/Procfile"]
        else:
            cmd = [peers["honcho"], "-f", f"{d}/Procfile", "-d", d, "--no-colour", "start"]
        env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
        out_path = os.path.join(d, "out.txt")
        with open(out_path, "w") as out:
            t0 = time.perf_counter()
            subprocess.run(
                cmd, stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env, cwd=d, timeout=600
            )
            took = time.perf_counter() - t0
        got = []
        with open(out_path, errors="replace") as f:
            for line in f:
                head, sep, text = line.rstrip("\n").partition("| ")
                if sep and head.split() and head.split()[-1] in ("a.1", "a"):
                    got.append(text)
        in_order = got == [str(i) for i in range(1, n + 1)]
        return took, len(got), in_order


def throughput_rounds(rounds, n, peers):
    runners = ["proctree up"] + (["honcho"] if "honcho" in peers else [])
    results = {r: [] for r in runners}
    for _ in range(rounds):
        for r in runners:
            results[r].append(throughput_round(r, n, peers))
    return results


# -- report ------------------------------------------------------------------------------


def fmt_seconds(values, patience):
    done = [v for v in values if v is not None]
    if len(done) < len(values):
        return f"still waiting at {patience:g} s ({len(values) - len(done)}/{len(values)} runs)"
    return f"{statistics.median(done):.2f} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ready-rounds", type=int, default=15)
    ap.add_argument("--grace", type=float, default=5.0)
    ap.add_argument("--patience", type=float, default=30.0, help="seconds to wait for a runner to exit")
    ap.add_argument("--peers", help="a venv holding honcho, supervisor and circus")
    ap.add_argument("--no-install", action="store_true")
    ap.add_argument("--only", choices=("stop", "ready", "cpu", "throughput"))
    ap.add_argument("--throughput-rounds", type=int, default=3)
    ap.add_argument("--throughput-lines", type=int, default=1_000_000)
    ap.add_argument("--cpu-rounds", type=int, default=5)
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--runners", help="comma-separated subset of: " + ", ".join(RUNNERS))
    ap.add_argument("--markdown")
    args = ap.parse_args()

    out = [f"# {platform.system()} {platform.release()}, Python {platform.python_version()}, {os.cpu_count()} CPUs"]
    if args.only in (None, "stop"):
        peers = find_peers(args.peers, not args.no_install)
        runners = ["proctree up"] + [r for r, (_, prog) in RUNNERS.items() if prog and prog in peers]
        if args.runners:
            runners = [r for r in runners if r in args.runners.split(",")]
        for r, (_, prog) in RUNNERS.items():
            if prog and prog not in peers:
                out.append(f"# {r}: not available ({prog} not found)")
        results = {r: [] for r in runners}
        for i in range(args.rounds):
            for r in runners:
                results[r].append(stop_round(r, args.grace, args.patience, peers))
                took, left, ports, names = results[r][-1]
                print(f"round {i + 1} {r}: exit {took}, left {left} {names}, ports {ports}", file=sys.stderr)
        versions = {r: version_of(peers[prog]) for r, (_, prog) in RUNNERS.items() if prog in peers}
        out.append("")
        out.append(
            f"Stop on SIGINT, five-entry Procfile, grace {args.grace:g} s for every runner, {args.rounds} rounds (medians):"
        )
        out.append("")
        out.append("| runner | exits on SIGINT | vs proctree up | processes left running | ports left open (of 4) |")
        out.append("|---|---|---|---|---|")
        ours = [x[0] for x in results.get("proctree up", []) if x[0] is not None]
        for r in runners:
            rows = results[r]
            version = versions.get(r, "")
            label = r if r == "proctree up" else (version if version.startswith(r) else f"{r} {version}".strip())
            lefts = [x[1] for x in rows]
            names = sorted({n for x in rows for n in x[3]})
            what = f" ({', '.join(names)})" if names else ""
            times = [x[0] for x in rows]
            ratio = "-"
            if ours and None not in times:
                ratio = f"{statistics.median(times) / statistics.median(ours):.2f}"
            out.append(
                f"| {label} | {fmt_seconds(times, args.patience)} | {ratio} | "
                f"{statistics.median(lefts):g}{what} | {statistics.median([x[2] for x in rows]):g} |"
            )
    if args.only in (None, "ready"):
        floors, readies, how = ready_rounds(args.ready_rounds)
        f, r = statistics.median(floors), statistics.median(readies)
        out.append("")
        out.append(f"python -m http.server, {args.ready_rounds} rounds (medians):")
        out.append("")
        out.append("| measure | time | ratio |")
        out.append("|---|---|---|")
        out.append(f"| its own startup (Popen to first accepted connection) | {f * 1000:.1f} ms | 1.00 |")
        out.append(
            f"| Supervisor.start() to `ready` (by {', '.join(sorted(map(str, how)))}) | {r * 1000:.1f} ms | {r / f:.2f} |"
        )
    if args.only in (None, "cpu"):
        bare, ours, rate = cpu_rounds(args.cpu_rounds, args.lines)
        out.append("")
        out.append(f"CPU per line of output, {args.lines:,} lines, {args.cpu_rounds} rounds (medians):")
        out.append("")
        out.append("| reader | CPU per line | lines/s produced | ratio |")
        out.append("|---|---|---|---|")
        out.append(f"| bare asyncio readline loop (the floor) | {bare * 1e6:.2f} µs | {rate[0]:,.0f} | 1.00 |")
        out.append(
            f"| Supervisor (log ring, readiness detection, coalesced output events) | {ours * 1e6:.2f} µs | "
            f"{rate[1]:,.0f} | {ours / bare:.2f} |"
        )
    if args.only in (None, "throughput"):
        peers = find_peers(args.peers, not args.no_install)
        n = args.throughput_lines
        results = throughput_rounds(args.throughput_rounds, n, peers)
        out.append("")
        out.append(f"`seq 1 {n}` as one Procfile entry, stdout to a file, {args.throughput_rounds} rounds (medians):")
        out.append("")
        out.append("| runner | lines/s | lines arrived | all in order | vs proctree up |")
        out.append("|---|---|---|---|---|")
        ours = statistics.median(n / x[0] for x in results["proctree up"])
        for r, rows in results.items():
            rate = statistics.median(n / x[0] for x in rows)
            arrived = min(x[1] for x in rows)
            whole = all(x[2] for x in rows)
            label = r if r == "proctree up" else version_of(peers["honcho"]) or r
            out.append(
                f"| {label} | {rate:,.0f} | {arrived:,} of {n:,} | {'yes' if whole else 'NO'} | {rate / ours:.2f} |"
            )
    text = "\n".join(out)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
