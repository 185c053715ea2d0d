"""Checks what proctree's sdist and wheel hold, for .ci/run and the workflow.

    python .ci/check_dist.py SDIST [WHEEL]

The sdist must hold every file git tracks that a wheel build or the test
suite needs (csrc/, tests/, tools/gen_keeper_constants.py, build_ffi.py,
setup.py, pyproject.toml, LICENSE, README.md): a missing one turns into "'build_ffi.py' does not name an
existing file" for every user pip builds from source. It must hold no build
products. The wheel must ship the LICENSE and carry the license expression.
Run from the git checkout the sdist was built from. Reads only; exit status
1 with the reasons on any failure.
"""

import os
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser

NEEDED = [
    "csrc",
    "tests",
    "tools/gen_keeper_constants.py",
    "build_ffi.py",
    "setup.py",
    "pyproject.toml",
    "LICENSE",
    "README.md",
]
BUILD_PRODUCTS = (".so", ".o", ".pyc", "proctree/_core.c")


def tracked_files(paths: list[str]) -> set[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--", *paths], check=True, capture_output=True).stdout
    return {name for name in out.decode().split("\0") if name}


def sdist_members(sdist: str) -> set[str]:
    """Member paths with the sdist's top folder (proctree-X.Y.Z/) removed."""
    with tarfile.open(sdist) as tar:
        return {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile() and "/" in m.name}


def sdist_problems(sdist: str) -> list[str]:
    members = sdist_members(sdist)
    expected = tracked_files(NEEDED)
    problems = [f"sdist lacks {name} (tracked by git)" for name in sorted(expected - members)]
    if not expected:
        problems.append("git lists none of the needed files: not run from the checkout?")
    problems += [f"sdist holds a build product: {name}" for name in sorted(members) if name.endswith(BUILD_PRODUCTS)]
    return problems


KEEPER = "proctree/proctree-keeper"
ENTER = "proctree/proctree-enter"  # proctree.Popen's exec step, Linux wheels only
INIT_SCRIPT = "proctree-init"  # Linux wheels: in <name>.data/scripts/, which pip installs on the PATH


def wheel_problems(wheel: str) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata_name = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
        if metadata_name is None:
            return ["wheel has no METADATA"]
        metadata = Parser().parsestr(zf.read(metadata_name).decode())
    problems = keeper_problems(wheel)
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
        problems.append("wheel lacks .dist-info/licenses/LICENSE")
    if metadata.get("License-Expression") != "MIT":
        problems.append(f"wheel's License-Expression is {metadata.get('License-Expression')!r}, not 'MIT'")
    if "LICENSE" not in (metadata.get_all("License-File") or []):
        problems.append("wheel's METADATA names no License-File: LICENSE")
    return problems


def keeper_problems(wheel: str) -> list[str]:
    """The wheel must hold the keeper program, executable, beside the extension module (and, for Linux,
    proctree.Popen's exec step, and proctree-init among its scripts)."""
    linux = "linux" in os.path.basename(wheel)
    programs = [KEEPER] + ([ENTER] if linux else [])
    problems = []
    with zipfile.ZipFile(wheel) as zf:
        scripts = [n for n in zf.namelist() if n.endswith(".data/scripts/" + INIT_SCRIPT)]
        if linux and not scripts:
            problems.append(f"wheel lacks {INIT_SCRIPT} in its .data/scripts/ (the program on the PATH)")
        programs += scripts
        for name in programs:
            try:
                info = zf.getinfo(name)
            except KeyError:
                problems.append(f"wheel lacks the program {name}")
                continue
            mode = info.external_attr >> 16
            if not mode & 0o111:
                problems.append(f"wheel's {name} is not executable (mode {oct(mode)})")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    problems = sdist_problems(argv[1])
    if len(argv) == 3:
        problems += wheel_problems(argv[2])
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    if not problems:
        print(f"ok: {' and '.join(argv[1:])} hold what they must")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
