"""Getting a project's tests and a venv to run them: the sdist from PyPI, pinned test deps, proctree's wheel.

Everything lands in a cache directory: sdists/ (each checked to hold its
tests), venvs/ (one per project, keyed by its pins and the Python running
this), and the unpacked sources are made fresh per run by the caller. Only
PyPI is used, through pip.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from projects import Project

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements"


def _pip(python: Path | str, *args: str) -> None:
    """pip with up to three tries: a registry hiccup should not read as a test result."""
    cmd = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args]
    for attempt in range(3):
        if subprocess.run(cmd).returncode == 0:
            return
        time.sleep(5 * (attempt + 1))
    raise RuntimeError(f"failed three times: {' '.join(cmd)}")


def fetch_sdist(project: Project, cache: Path) -> Path:
    """The project's sdist from PyPI (cached), checked to hold its tests."""
    target = cache / "sdists" / f"{project.name}-{project.version}.tar.gz"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            _pip(sys.executable, "download", "--no-binary", ":all:", "--no-deps", "-d", tmp, requirement(project))
            found = list(Path(tmp).glob("*.tar.gz"))
            if len(found) != 1:
                raise RuntimeError(f"pip download {requirement(project)} gave {found}, not one sdist")
            found[0].rename(target)
    member = f"{project.name}-{project.version}/{project.tests_member}"
    with tarfile.open(target) as tar:
        if member not in tar.getnames():
            raise RuntimeError(f"{target.name} does not hold {project.tests_member}: its tests are not in the sdist")
    return target


def requirement(project: Project) -> str:
    return f"{project.name}=={project.version}"


def unpack(sdist: Path, dest: Path) -> Path:
    """A fresh copy of the sdist's tree under dest; returns its top folder."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4: refuse members that leave dest
            tar.extractall(dest, filter="data")
        else:  # pragma: no cover - older patch releases
            tar.extractall(dest)
    (top,) = dest.iterdir()
    return top


def _pins_digest(project: Project, sdist: Path) -> str:
    digest = hashlib.sha256()
    for path in (REQUIREMENTS / "common.txt", REQUIREMENTS / f"{project.name}.txt", sdist):
        digest.update(path.read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()[:12]


def ensure_venv(project: Project, sdist: Path, cache: Path) -> Path:
    """A venv with the project (from its sdist) and its pinned test deps; returns its python."""
    venv = cache / "venvs" / f"{project.name}-{project.version}-{_pins_digest(project, sdist)}"
    python = venv / "bin" / "python"
    ready = venv / ".ready"
    if not ready.exists():
        if venv.exists():
            shutil.rmtree(venv)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        _pip(python, "install", "-r", str(REQUIREMENTS / f"{project.name}.txt"))
        _pip(python, "install", "--no-deps", str(sdist))
        ready.touch()
    return python


def install_proctree(python: Path, wheel: Path) -> None:
    """The proctree under test, replacing whatever an earlier run installed."""
    _pip(python, "install", "--no-deps", "--force-reinstall", str(wheel))


def build_proctree_wheel(root: Path, out: Path) -> Path:
    """A wheel of the checkout at root (pip wheel, build deps from PyPI)."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    _pip(sys.executable, "wheel", "--no-deps", "-w", str(out), str(root))
    (wheel,) = out.glob("proctree-*.whl")
    return wheel
