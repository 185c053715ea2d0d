#!/usr/bin/env python3
"""The reference column for the suites ported from tini and dumb-init: the same tests against the real inits.

    python tools/compare_inits.py [--inits proctree,tini,dumb-init] [pytest args...]

Runs tests/cli/test_init_tini_suite.py and tests/cli/test_init_dumbinit_suite.py once per init: "proctree"
as CI does (its xfails are its recorded gaps), then with INIT_REFERENCE=tini (`tini -s -g`) and
INIT_REFERENCE=dumb-init (its default setsid mode) and --runxfail, so each reference case is a plain pass or
fail. Prints one line per test id (outcome under each init) and a count per init. Informational only: it
exits 0 whatever the inits do (2 only when pytest itself could not run), and CI does not run it; tini and
dumb-init come from .ci/apt-packages.
"""

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITES = ["tests/cli/test_init_tini_suite.py", "tests/cli/test_init_dumbinit_suite.py"]


def run(init, extra):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("INIT_REFERENCE", None)
    args = []
    if init != "proctree":
        if shutil.which(init) is None:
            return None
        env["INIT_REFERENCE"] = init
        args.append("--runxfail")
    with tempfile.TemporaryDirectory() as d:
        xml = os.path.join(d, "junit.xml")
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--junitxml={xml}",
                *args,
                *extra,
                *SUITES,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        if r.returncode not in (0, 1) or not os.path.exists(xml):
            sys.exit(f"compare_inits: pytest could not run the suites for {init} (exit {r.returncode})")
        out = {}
        for case in ET.parse(xml).getroot().iter("testcase"):
            name = f"{case.get('classname').rsplit('.', 1)[-1]}::{case.get('name')}"
            kinds = {child.tag: child for child in case}
            if "skipped" in kinds:
                msg = kinds["skipped"].get("type", "")
                out[name] = "xfailed" if "xfail" in msg else "skipped"
            elif "failure" in kinds or "error" in kinds:
                out[name] = "failed"
            else:
                out[name] = "passed"
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inits", default="proctree,tini,dumb-init")
    ns, extra = ap.parse_known_args()
    inits = ns.inits.split(",")
    results = {init: run(init, extra) for init in inits}
    names = sorted({n for r in results.values() if r for n in r})
    width = max((len(n) for n in names), default=10)
    print(f"{'test':<{width}}  " + "  ".join(f"{i:<10}" for i in inits))
    for n in names:
        cells = [(results[i] or {}).get(n, "-") if results[i] is not None else "absent" for i in inits]
        print(f"{n:<{width}}  " + "  ".join(f"{c:<10}" for c in cells))
    print()
    for i in inits:
        if results[i] is None:
            print(f"{i}: not installed")
            continue
        counts = collections.Counter(results[i].values())
        print(f"{i}: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
