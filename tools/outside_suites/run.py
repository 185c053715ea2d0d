"""Run real projects' own test suites stock and with proctree swapped in, and compare them test by test.

    python tools/outside_suites/run.py                      # every project, every mode
    python tools/outside_suites/run.py --required           # what CI requires (projects.REQUIRED)
    python tools/outside_suites/run.py --projects plumbum --modes stock,swap

Exit status 1 when a proctree mode has a failure or error its baseline has
not (or a worse exit status, a timeout, tests that did not run, processes
left behind), or when plugin-leak's report names anything but its own
leaking test. See README.md beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

from compare import LEAK_TEST_FILE, Verdict, compare, compare_leak, counts
from projects import MODES, PROJECTS, Project, required_modes, with_baselines
from sessions import SuiteRun, run_suite
from suite_env import build_proctree_wheel, ensure_venv, fetch_sdist, install_proctree, unpack

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SHOWN = 25  # worse tests listed per mode


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--projects", default=",".join(PROJECTS), help="comma-separated (default: all)")
    parser.add_argument("--modes", default="", help="comma-separated (default: each project's modes)")
    parser.add_argument("--required", action="store_true", help="only the modes CI requires, with their baselines")
    parser.add_argument(
        "--cache", type=Path, default=Path(os.environ.get("OUTSIDE_SUITES_CACHE", "/tmp/outside-suites"))
    )
    parser.add_argument("--proctree-wheel", type=Path, help="test this wheel (default: build one from the checkout)")
    parser.add_argument("--test-timeout", type=int, default=120, help="pytest-timeout per test, seconds")
    parser.add_argument("--run-timeout", type=int, default=900, help="one suite run's limit, seconds")
    parser.add_argument("--json", type=Path, help="write every run's results here")
    parser.add_argument("--markdown", type=Path, help="write the results table here (docs/outside_suites.md's form)")
    parser.add_argument(
        "--rejudge", type=Path, nargs="+", metavar="JSON", help="run nothing: judge and report earlier --json files"
    )
    return parser.parse_args(argv)


def modes_for(project: Project, args: argparse.Namespace) -> list[str]:
    if args.required:
        return required_modes(project)
    chosen = [m for m in args.modes.split(",") if m] or list(project.modes)
    unknown = [m for m in chosen if m not in MODES]
    if unknown:
        raise SystemExit(f"unknown mode(s) {unknown}; modes: {', '.join(MODES)}")
    return with_baselines([m for m in chosen if m in project.modes])


def suite_env(python: Path, project: Project, mode: str, results: Path) -> dict[str, str]:
    """A small fixed environment, the same on a laptop and in CI, so runs compare."""
    env = {
        "PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(HERE / "plugins"),
        "OUTSIDE_SUITES_RESULTS": str(results),
    }
    if "TMPDIR" in os.environ:
        env["TMPDIR"] = os.environ["TMPDIR"]
    env.update(project.env.get(mode, {}))
    return env


def run_mode(project: Project, mode: str, python: Path, sdist: Path, work: Path, args: argparse.Namespace) -> dict:
    spec = MODES[mode]
    src = unpack(sdist, work / project.name / mode)
    if spec.leak:
        assert project.leak_dir, f"{project.name} has no leak_dir"
        shutil.copy(HERE / "injected_leak.py", src / project.leak_dir / LEAK_TEST_FILE)
    results = work / project.name / f"{mode}.json"
    results.unlink(missing_ok=True)
    tests = list(project.tests)
    if spec.leak and tests and project.leak_dir not in tests:  # a selection of files: add the leak's
        tests.append(f"{project.leak_dir}/{LEAK_TEST_FILE}")
    cmd = [str(python), "-m", "pytest", "-p", "outside_results", "-p", "no:cacheprovider"]
    cmd += [f"--timeout={args.test_timeout}", *spec.pytest_args, *tests]
    log = work / project.name / f"{mode}.log"
    print(f"--- {project.name} {project.version} {mode}: {' '.join(cmd[1:])}", flush=True)
    run: SuiteRun = run_suite(cmd, src, suite_env(python, project, mode, results), args.run_timeout, log)
    data = json.loads(results.read_text()) if results.exists() else {"exitstatus": None, "outcomes": {}}
    tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
    print(f"    exit {run.returncode} in {run.wall:.1f} s: {tail[0]}", flush=True)
    for left in run.leftovers:
        print(f"    LEFT RUNNING (now ended): pid {left.pid}: {left.cmdline[:150]}", flush=True)
    return {
        "project": project.name,
        "version": project.version,
        "mode": mode,
        "returncode": run.returncode,
        "wall": round(run.wall, 2),
        "timed_out": run.timed_out,
        "leftovers": [asdict(x) for x in run.leftovers],
        "outcomes": data["outcomes"],
        "counts": counts(data["outcomes"]),
        "log": str(log),
        "env": project.env.get(mode, {}),
    }


def judge(result: dict, base: dict) -> Verdict:
    common = {
        "leftovers": len(result["leftovers"]),
        "base_leftovers": len(base["leftovers"]),
        "timed_out": result["timed_out"],
        "flaky": PROJECTS[result["project"]].flaky,
    }
    if MODES[result["mode"]].leak:
        text = Path(result["log"]).read_text(errors="replace")
        return compare_leak(result["outcomes"], base["outcomes"], log_text=text, **common)
    return compare(result["outcomes"], base["outcomes"], rc=result["returncode"], base_rc=base["returncode"], **common)


def report(results: list[dict]) -> bool:
    """Print the comparison table and each mode's new failures; True when every proctree mode is as good."""
    by_key = {(r["project"], r["mode"]): r for r in results}
    all_ok = True
    print("\n=== outside suites: results per mode (each proctree mode against its baseline) ===")
    print(f"{'project':<9} {'mode':<13} {'exit':>4} {'wall s':>7} {'ratio':>6}  {'verdict':<8} counts")
    for r in results:
        base_name = MODES[r["mode"]].baseline
        base = by_key.get((r["project"], base_name)) if base_name else None
        verdict = judge(r, base) if base else None
        r["verdict"] = None if verdict is None else asdict(verdict)
        ratio = f"{r['wall'] / base['wall']:.2f}" if base and base["wall"] > 0 else "-"
        mark = "baseline" if verdict is None else ("ok" if verdict.ok else "WORSE")
        shown = ", ".join(f"{n} {k}" for k, n in sorted(r["counts"].items()))
        print(f"{r['project']:<9} {r['mode']:<13} {r['returncode']:>4} {r['wall']:>7.1f} {ratio:>6}  {mark:<8} {shown}")
        all_ok = all_ok and (verdict is None or verdict.ok)
    for r in results:
        v = r["verdict"]
        for note in [] if v is None else v["notes"]:
            print(f"{r['project']} {r['mode']}: {note}")
        if v is None or v["ok"]:
            continue
        print(f"\n{r['project']} {r['mode']}: worse than {MODES[r['mode']].baseline} ({r['log']})")
        shown_bad = list(v["new_bad"].items())
        for test_id, outcome in shown_bad[:SHOWN]:
            print(f"    {outcome.upper():<6} {test_id}")
        if len(shown_bad) > SHOWN:
            print(f"    ... and {len(shown_bad) - SHOWN} more (the --json file has them all)")
        for problem in v["problems"]:
            print(f"    {problem}")
    return all_ok


def markdown_table(results: list[dict]) -> str:
    """The report's table as docs/outside_suites.md shows it (after report() filled in the verdicts)."""
    by_key = {(r["project"], r["mode"]): r for r in results}
    lines = [
        "| project | mode | exit | passed | failed | errors | skipped | wall s | ratio | new failures or problems |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        c = r["counts"]
        base_name = MODES[r["mode"]].baseline
        base = by_key.get((r["project"], base_name)) if base_name else None
        ratio = f"{r['wall'] / base['wall']:.2f}" if base and base["wall"] > 0 else "-"
        v = r["verdict"]
        if v is None:
            what = "baseline"
        elif v["ok"]:
            what = "none"
        else:
            bad = [f"{o} `{t}`" for t, o in v["new_bad"].items()]
            if len(bad) > 3:
                bad = [*bad[:3], f"and {len(bad) - 3} more"]
            what = "; ".join(bad + v["problems"])
        label = f"{r['project']} {r['version']}"
        passed = c.get("passed", 0) + c.get("xpassed", 0)
        skipped = c.get("skipped", 0) + c.get("xfailed", 0)
        lines.append(
            f"| {label} | {r['mode']} | {r['returncode']} | {passed} | {c.get('failed', 0)} | {c.get('error', 0)} "
            f"| {skipped} | {r['wall']:.1f} | {ratio} | {what} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rejudge:
        return finish([r for path in args.rejudge for r in json.loads(path.read_text())], args)
    cache = args.cache.resolve()
    work = cache / "work"
    wheel = args.proctree_wheel or build_proctree_wheel(ROOT, cache / "proctree-wheel")
    print(f"proctree under test: {wheel}", flush=True)
    results: list[dict] = []
    for name in [p for p in args.projects.split(",") if p]:
        project = PROJECTS[name]
        modes = modes_for(project, args)
        if not modes:
            continue
        sdist = fetch_sdist(project, cache)
        python = ensure_venv(project, sdist, cache)
        install_proctree(python, wheel.resolve())
        for mode in modes:
            results.append(run_mode(project, mode, python, sdist, work, args))
    return finish(results, args)


def finish(results: list[dict], args: argparse.Namespace) -> int:
    """Report, write the --json and --markdown files; the exit status."""
    ok = report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True))
    if args.markdown:
        args.markdown.write_text(markdown_table(results))
    print("\noutside suites:", "no proctree mode is worse than its baseline" if ok else "SOME PROCTREE MODE IS WORSE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
