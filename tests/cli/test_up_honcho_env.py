"""`proctree up` reading what honcho reads from the environment: PROCFILE, and HONCHO_PROCESS_NAME set.

Real runs of `python -m proctree up` without -f: PROCFILE in `.env` or in the
environment names the Procfile, -f wins over both, and every instance gets
HONCHO_PROCESS_NAME beside PS. choose_procfile's rules get a table of their own.
"""

import os
import subprocess
import sys

import pytest

import proctree
from proctree import ProcfileError
from proctree._procfile.honchoopts import choose_procfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))


def up(folder, *args, **extra):
    environ = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    environ.pop("PROCFILE", None)
    environ.update(extra)
    return subprocess.run(
        [sys.executable, "-m", "proctree", "up", "--no-prefix", *args],
        cwd=str(folder),
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


def folder_with_two_procfiles(tmp_path):
    (tmp_path / "Procfile").write_text("web: echo from Procfile\n")
    (tmp_path / "Procfile.dev").write_text("web: echo from Procfile.dev $GREETING\n")
    return tmp_path


def test_procfile_from_dot_env(tmp_path):
    folder = folder_with_two_procfiles(tmp_path)
    (folder / ".env").write_text("PROCFILE=Procfile.dev\nGREETING=hi\n")
    r = up(folder)
    assert r.returncode == 0, r.stderr
    assert "from Procfile.dev hi" in r.stdout.splitlines()


def test_procfile_from_the_environment_and_dot_env_wins_over_it(tmp_path):
    folder = folder_with_two_procfiles(tmp_path)
    r = up(folder, PROCFILE="Procfile.dev")
    assert "from Procfile.dev" in r.stdout.splitlines(), r.stderr
    (folder / ".env").write_text("PROCFILE=Procfile\n")
    r = up(folder, PROCFILE="Procfile.dev")
    assert "from Procfile" in r.stdout.splitlines(), r.stderr


def test_f_wins_over_procfile(tmp_path):
    folder = folder_with_two_procfiles(tmp_path)
    (folder / ".env").write_text("PROCFILE=Procfile.dev\n")
    r = up(folder, "-f", "Procfile", PROCFILE="Procfile.dev")
    assert "from Procfile" in r.stdout.splitlines(), r.stderr


def test_a_procfile_in_another_folder_reads_this_folder_s_dot_env(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "Procfile").write_text("web: echo $GREETING\n")
    (tmp_path / "sub" / ".env").write_text("GREETING=from sub\n")
    (tmp_path / ".env").write_text("PROCFILE=sub/Procfile\nGREETING=from here\n")
    r = up(tmp_path)
    assert "from here" in r.stdout.splitlines(), r.stderr  # honcho reads ./.env, whatever PROCFILE says


def test_honcho_process_name_beside_ps(tmp_path):
    (tmp_path / "Procfile").write_text("web: echo $PS $HONCHO_PROCESS_NAME\n")
    r = up(tmp_path, "-m", "web=2")
    assert r.returncode == 0, r.stderr
    assert {"web.1 web.1", "web.2 web.2"} <= set(r.stdout.splitlines())


@pytest.mark.parametrize(
    "given, env_files, app_root, environ, dot_env, expected",
    [
        (None, None, None, {}, None, ("Procfile", None)),
        ("P", None, None, {"PROCFILE": "Q"}, "PROCFILE=R\n", ("P", None)),
        (None, None, None, {"PROCFILE": "Q"}, None, ("Q", [])),
        (None, None, None, {"PROCFILE": "Q"}, "PROCFILE=R\n", ("R", [".env"])),
        (None, None, None, {"PROCFILE": ""}, None, ("Procfile", None)),  # empty is unset
        (None, ["x.env"], None, {}, None, ("Procfile", ["x.env"])),
        (None, None, "app", {"PROCFILE": "Q"}, None, ("app/Q", [])),
        ("P", ["x.env"], "app", {}, None, ("app/P", ["app/x.env"])),
        ("/abs/P", None, "app", {}, None, ("/abs/P", None)),
    ],
)
def test_choose_procfile(tmp_path, monkeypatch, given, env_files, app_root, environ, dot_env, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.env").write_text("A=1\n")
    if dot_env is not None:
        (tmp_path / ".env").write_text(dot_env)
    assert choose_procfile(given, env_files, app_root, environ) == expected


def test_choose_procfile_names_a_bad_dot_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("not an assignment\n")
    with pytest.raises(ProcfileError, match=r"^\.env:1: "):
        choose_procfile(None, None, None, {})
