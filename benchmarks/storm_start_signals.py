"""Starts under group signal storms: proctree.run against subprocess.run, side by side, every status counted.

Each worker is a fresh Python process leading a session (and process group)
of its own, so the storm reaches nothing else. In it, two threads loop
``run(["sh", "-c", "exit 7"])`` while the main thread, whose handler for the
signal does nothing (the owner survives it), sends the signal to its own
group every 2 ms. A status is right when it is 7 (the command ran) or
minus the signal (the command got it, as the stdlib's child can). Anything
else is wrong: 0 above all (a status not read from the command). An
exception is counted by name; KeeperLost from the worker's first start is
the holding keeper's start lost to the storm.

Rows: each signal (SIGINT, SIGHUP, SIGUSR1), with and without
start_new_session, for proctree and the stdlib (and with --marked,
proctree's marked fallback, which has no exec step), interleaved per worker.
Every worker is fresh, so each one's first proctree start (the holding
keeper's) also meets the storm.

Usage: python benchmarks/storm_start_signals.py [--starts 10000] [--workers 5] [--markdown FILE]
(--starts: proctree's starts in all, split evenly over the rows and workers; the stdlib gets as many.)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time

SIGNALS = ("SIGINT", "SIGHUP", "SIGUSR1")
HERE = os.path.dirname(os.path.abspath(__file__))


def worker(impl: str, signame: str, new_session: bool, starts: int) -> dict[str, int]:
    """One storm in this process (which leads its own group): the outcomes by name."""
    if impl in ("proctree", "marked"):
        sys.path.insert(0, os.environ.get("STORM_PROCTREE") or os.path.dirname(HERE))  # another checkout: before/after
        import proctree
        from proctree._containment import popenhold

        popenhold._force_session = impl == "marked"  # the fallback without cgroups: no exec step
        run = proctree.run
    else:
        run = subprocess.run
    sig = getattr(signal, signame)
    signal.signal(sig, lambda *_: None)
    outcomes: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()
    left = [starts]
    first = [True]

    def loop() -> None:
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
                was_first, first[0] = first[0], False
            try:
                rc = run(["sh", "-c", "exit 7"], start_new_session=new_session).returncode
                key = "7" if rc == 7 else f"-{signame}" if rc == -sig else f"WRONG {rc}"
            except Exception as exc:  # noqa: BLE001 - counted, by name
                key = f"{'first ' if was_first else ''}{type(exc).__name__}"
            with lock:
                outcomes[key] += 1

    threads = [threading.Thread(target=loop) for _ in range(2)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        os.killpg(0, sig)
        time.sleep(0.002)
    for t in threads:
        t.join()
    return dict(outcomes)


def run_worker(impl: str, signame: str, new_session: bool, starts: int) -> dict[str, int]:
    args = [sys.executable, os.path.abspath(__file__), "--worker", impl, signame, str(int(new_session)), str(starts)]
    out = subprocess.run(args, start_new_session=True, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        return {f"worker exit {out.returncode}: {out.stderr.strip().splitlines()[-1:]}": starts}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=10000)
    ap.add_argument("--workers", type=int, default=5, help="fresh worker processes per row")
    ap.add_argument("--markdown")
    ap.add_argument("--marked", action="store_true", help="also proctree's marked fallback (no cgroups, no step)")
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        impl, signame, new_session, starts = a.worker
        print(json.dumps(worker(impl, signame, new_session == "1", int(starts))))
        return
    rows = [(s, ns) for s in SIGNALS for ns in (False, True)]
    per_worker = max(1, a.starts // (len(rows) * a.workers))
    totals: dict[tuple[str, str, bool], collections.Counter[str]] = collections.defaultdict(collections.Counter)
    impls = ("proctree", "marked", "subprocess") if a.marked else ("proctree", "subprocess")
    t0 = time.monotonic()
    for _ in range(a.workers):
        for signame, ns in rows:
            for impl in impls:
                totals[impl, signame, ns].update(run_worker(impl, signame, ns, per_worker))
    lines = [
        f"{per_worker * a.workers * len(rows)} starts each for proctree.run and subprocess.run, "
        f"{a.workers} fresh workers per row, {time.monotonic() - t0:.0f} s; Python {sys.version.split()[0]}.",
        "",
        "| signal | start_new_session | how | starts | 7 | -signal | wrong | exceptions |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    wrong_all = 0
    for signame, ns in rows:
        for impl in impls:
            c = totals[impl, signame, ns]
            wrong = sum(v for k, v in c.items() if k.startswith("WRONG"))
            wrong_all += wrong if impl != "subprocess" else 0
            exc = ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if k not in ("7", f"-{signame}"))
            name = {"proctree": "proctree.run", "marked": "proctree.run (marked)"}.get(impl, "subprocess.run")
            lines.append(
                f"| {signame} | {ns} | {name} | {sum(c.values())} | {c['7']} | {c[f'-{signame}']} | {wrong} | "
                f"{exc or '-'} |"
            )
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")
    sys.exit(1 if wrong_all else 0)


if __name__ == "__main__":
    main()
