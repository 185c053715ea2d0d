"""Run CPython's own test suite for subprocess (or asyncio's subprocess tests) with proctree's drop-ins.

    python tests/dropin/run_cpython_subprocess.py [--stock] [--suite test_subprocess|asyncio] [--json FILE]

The interpreter's installed test package is used (test.test_subprocess,
test.test_asyncio.test_subprocess). subprocess.Popen is replaced by
proctree.Popen before the test module is imported, and so is every name the
test module took from subprocess (so run(), call(), check_output() and
asyncio's transports, which look Popen up in subprocess at call time, start
proctree.Popen too). With --suite asyncio, asyncio.create_subprocess_exec and
_shell are also replaced by proctree's (the tests that call the loop's
subprocess_exec directly get proctree.Popen through asyncio's transport).
--stock runs the same suite unpatched: the baseline.

After each test, the runner checks that nothing the test started is left
running: no command cgroup of proctree.Popen's holding tree is still
populated (a leftover is reported, then ended), and no child of this process
but the holding tree's keeper is alive and unreaped.

It prints one JSON object: the counts, the ids of the tests that failed or
errored (with the first line of why), and the leaks.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import time
import traceback
import unittest

SUITES = {"test_subprocess": "test.test_subprocess", "asyncio": "test.test_asyncio.test_subprocess"}


def _children() -> set[int]:
    """Live, unreaped children of this process (zombies excluded: their owner reaps them)."""
    me = os.getpid()
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:  # bytes: any process's name may be any bytes
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        if int(fields[1]) == me and fields[0] != b"Z":
            out.add(int(entry))
    return out


class LeakCheck:
    """After each test: what it started that still runs."""

    def __init__(self, patched: bool) -> None:
        self.patched = patched
        self.leaks: list[str] = []

    def check(self, test_id: str, before: set[int]) -> None:
        deadline = time.monotonic() + 2.0  # a test's last child may take a moment to be reaped or to exit
        while True:
            extra, cgroups = self._left(before)
            if not extra and not cgroups or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        if extra:
            self.leaks.append(f"{test_id}: children still running: {sorted(extra)}")
        if cgroups:
            self.leaks.append(f"{test_id}: proctree.Popen cgroups still populated: {cgroups}")
            if self.patched:
                from proctree._containment import popenhold

                for path in cgroups:
                    popenhold.end_now(path, 0.0)

    def _left(self, before: set[int]) -> tuple[set[int], list[str]]:
        held = set()
        cgroups: list[str] = []
        if self.patched:
            from proctree._containment import cgroup, popenhold

            held = popenhold.held_pids()
            tree = popenhold._holder
            if tree is not None and tree.cgroup is not None and popenhold.held_pids():
                for entry in os.scandir(tree.cgroup):
                    if entry.is_dir() and entry.name.startswith(cgroup.COMMAND_PREFIX) and cgroup.populated(entry.path):
                        cgroups.append(entry.name)
        return _children() - before - held, cgroups


class Result(unittest.TextTestResult):
    check: LeakCheck

    def startTest(self, test: unittest.TestCase) -> None:
        self._before = _children()
        super().startTest(test)

    def stopTest(self, test: unittest.TestCase) -> None:
        super().stopTest(test)
        self.check.check(test.id(), self._before)


class NaivePopen(subprocess.Popen):
    """A subclass that changes nothing: what being a subclass alone costs in the suite (--naive)."""


def patch_popen(module_name: str, cls: type) -> None:
    genuine = subprocess.Popen
    subprocess.Popen = cls  # type: ignore[misc]
    module = importlib.import_module(module_name)
    for name, value in list(vars(module).items()):  # `from subprocess import Popen` in the test module
        if value is genuine:
            setattr(module, name, cls)


def patch_asyncio(module_name: str) -> None:
    """asyncio.create_subprocess_exec/_shell (where the tests look them up) -> proctree's."""
    import asyncio
    import asyncio.subprocess

    import proctree

    for owner in (asyncio, asyncio.subprocess, importlib.import_module(module_name)):
        for name in ("create_subprocess_exec", "create_subprocess_shell"):
            if hasattr(owner, name):
                setattr(owner, name, getattr(proctree, name))


# The report goes to a copy of stdout made before any test runs: the tests close and restore fds 0-2.
_REPORT_FD = os.dup(1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stock", action="store_true", help="run unpatched (the baseline)")
    ap.add_argument("--naive", action="store_true", help="patch in a subclass that changes nothing")
    ap.add_argument("--marked", action="store_true", help="proctree.Popen's marked fallback, as without cgroups")
    ap.add_argument("--suite", choices=sorted(SUITES), default="test_subprocess")
    ap.add_argument("--json", help="also write the result here")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    module_name = SUITES[args.suite]
    if args.naive:
        patch_popen(module_name, NaivePopen)
    elif not args.stock:
        import proctree

        if args.marked:
            from proctree._containment import popenhold

            popenhold._force_session = True

        patch_popen(module_name, proctree.Popen)
        if args.suite == "asyncio":
            patch_asyncio(module_name)
    module = importlib.import_module(module_name)
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    check = LeakCheck(patched=not (args.stock or args.naive))
    Result.check = check
    stream = sys.stderr if args.verbose else open(os.devnull, "w")
    t0 = time.monotonic()
    result = unittest.TextTestRunner(stream=stream, verbosity=2 if args.verbose else 0, resultclass=Result).run(suite)
    took = time.monotonic() - t0

    def why(err: str) -> str:
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        return lines[-1] if lines else ""

    out = {
        "suite": module_name,
        "mode": "stock"
        if args.stock
        else "naive subclass"
        if args.naive
        else "proctree.Popen" + (" (marked fallback)" if args.marked else ""),
        "python": sys.version.split()[0],
        "run": result.testsRun,
        "failures": len(result.failures),
        "errors": len(result.errors),
        "skipped": len(result.skipped),
        "expected_failures": len(result.expectedFailures),
        "unexpected_successes": len(result.unexpectedSuccesses),
        "failed": {t.id(): why(e) for t, e in result.failures + result.errors},
        "leaks": check.leaks,
        "seconds": round(took, 1),
    }
    text = json.dumps(out, indent=2)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    os.write(_REPORT_FD, (text + "\n").encode())
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.exit(2)
