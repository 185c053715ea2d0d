"""`proctree check`: honcho's `check` with everything `proctree up` reads, starting nothing.

honcho's own check tests (nickstenning/honcho tests/integration/test_check.py and test_main.py) come first, with
`honcho check` mapped to `proctree check` and `python -m honcho check` to `python -m proctree check`; then what
proctree's check adds: the settings file, the scale and ports, --strict, --json, and that no secret is printed and
nothing is started.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import proctree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))


def environ(extra=None):
    out = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for name in ("PROCFILE", "PORT"):
        out.pop(name, None)
    out.update(extra or {})
    return out


def check(folder, *args, env=None):
    r = subprocess.run(
        [sys.executable, "-m", "proctree", "check", *args],
        cwd=str(folder),
        env=environ(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return r.returncode, r.stdout, r.stderr


def write(folder, files):
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))


# -- honcho's own ---------------------------------------------------------------------------------------------


def test_honcho_check(tmp_path):
    """honcho: tests/integration/test_check.py::test_check."""
    write(tmp_path, {"Procfile": "foo: python web.py\nbar: ruby worker.rb\nbaz: node socket.js\n"})
    ret, out, err = check(tmp_path)
    assert ret == 0
    assert "Valid procfile detected" in err
    assert "foo, bar, baz" in err


def test_honcho_main(tmp_path):
    """honcho: tests/integration/test_main.py::test_main (`python -m honcho check`)."""
    write(tmp_path, {"Procfile": "foo: python web.py\nbar: ruby worker.rb\n"})
    r = subprocess.run(
        [sys.executable, "-m", "proctree", "check"], cwd=tmp_path, env=environ(), capture_output=True, text=True
    )
    assert r.returncode == 0
    assert "Valid procfile detected" in r.stderr
    assert "foo, bar" in r.stderr


# -- what up reads, checked as up reads it --------------------------------------------------------------------


def test_each_instance_is_listed_with_its_port_and_command(tmp_path):
    write(tmp_path, {"Procfile": "web: python -m http.server $PORT\nworker: sleep 100\n"})
    ret, out, err = check(tmp_path, "-m", "worker=2", "-p", "7000")
    assert ret == 0, err
    assert out.splitlines() == [
        "web.1     port 7000  python -m http.server $PORT",
        "worker.1  port 7100  sleep 100",
        "worker.2  port 7101  sleep 100",
    ]
    assert err.splitlines()[-1] == "Valid procfile detected (web, worker)"


def test_settings_are_listed_and_checked(tmp_path):
    write(
        tmp_path,
        {
            "Procfile": "db: sleep 100\nweb: sleep 100\n",
            "proctree.toml": """
                [services.web]
                ready = "tcp:$PORT"
                depends_on = { db = "started" }
                restart = "on-failure"
                max_restarts = 3
                stop_signal = "SIGINT"
                can_die = true
            """,
        },
    )
    ret, out, err = check(tmp_path)
    assert ret == 0, err
    web = [line for line in out.splitlines() if line.startswith("web.1")][0]
    for part in ("ready: tcp:5100", "after db.1 started", "restart: on-failure (at most 3)", "can die", "SIGINT"):
        assert part in web, web


@pytest.mark.parametrize(
    ("files", "args", "says"),
    [
        ({"Procfile": "web python\n"}, ["--strict"], "Procfile:1:"),
        ({"Procfile": "web: a\nweb: b\n"}, [], "Procfile:2:"),
        ({"Procfile": "web: a\n"}, ["-f", "Nope"], "Nope: no such Procfile"),
        ({"Procfile": "web: a\n"}, ["-m", "worker=2"], "worker"),
        ({"Procfile": "web: a\n"}, ["-p", "0"], "not a port"),
        ({"Procfile": "web: a\n", "proctree.toml": "[services.web]\nrestart = 'sometimes'\n"}, [], "proctree.toml"),
        ({"Procfile": "web: a\n", "proctree.toml": "[services.web]\nready = 42\n"}, [], "web"),
        (
            {
                "Procfile": "a: x\nb: y\n",
                "proctree.toml": "[services.a]\ndepends_on=['b']\n[services.b]\ndepends_on=['a']\n",
            },
            [],
            "cycle",
        ),
    ],
)
def test_what_up_would_refuse_is_an_error_naming_where(tmp_path, files, args, says):
    write(tmp_path, files)
    ret, out, err = check(tmp_path, *args)
    assert ret == 2, (out, err)
    assert says in err, err
    assert out == "" and "Traceback" not in err
    assert "Valid procfile" not in err


def test_what_honcho_skips_is_a_warning_naming_the_line(tmp_path):
    write(tmp_path, {"Procfile": "web: sleep 1\nthis is not a line\n"})
    ret, out, err = check(tmp_path)
    assert ret == 0
    assert "warning: Procfile:2:" in err
    assert "web.1" in out


def test_procfile_from_the_environment_and_the_app_root(tmp_path):
    (tmp_path / "app").mkdir()
    write(tmp_path / "app", {"Procfile.dev": "dev: sleep 1\n", "Procfile": "prod: sleep 1\n"})
    ret, out, err = check(tmp_path, "-d", "app", env={"PROCFILE": "Procfile.dev"})
    assert ret == 0, err
    assert out.startswith("dev.1") and "prod" not in out


def test_names_check_only_those_and_what_they_need(tmp_path):
    write(
        tmp_path,
        {"Procfile": "db: a\nweb: b\nother: c\n", "proctree.toml": "[services.web]\ndepends_on = ['db']\n"},
    )
    ret, out, err = check(tmp_path, "web")
    assert ret == 0, err
    assert [line.split()[0] for line in out.splitlines()] == ["db.1", "web.1"]


def test_no_value_of_the_environment_is_printed(tmp_path):
    write(tmp_path, {"Procfile": "web: sleep 1\n", ".env": "SECRET=hunter2\nTOKEN='abc def'\n"})
    for args in ([], ["--json"]):
        ret, out, err = check(tmp_path, *args)
        assert ret == 0
        assert "hunter2" not in out + err and "abc def" not in out + err
    doc = json.loads(out)
    assert {"SECRET", "TOKEN"} <= set(doc["services"][0]["env"])
    assert "env: SECRET, TOKEN" in check(tmp_path)[1]


def test_json_is_one_document_and_quiet_prints_nothing(tmp_path):
    write(tmp_path, {"Procfile": "web: sleep 1\nworker: sleep 2\n"})
    ret, out, err = check(tmp_path, "--json")
    doc = json.loads(out)
    assert ret == 0 and doc["ok"] is True and doc["entries"] == ["web", "worker"]
    assert [s["name"] for s in doc["services"]] == ["web.1", "worker.1"] and err == ""
    ret, out, err = check(tmp_path, "--json", "-f", "Nope")
    assert ret == 2 and json.loads(out)["ok"] is False
    ret, out, err = check(tmp_path, "-q")
    assert (ret, out, err) == (0, "", "")


def test_nothing_is_started(tmp_path):
    marker = tmp_path / "started"
    write(tmp_path, {"Procfile": f"web: touch {marker}\n"})
    assert check(tmp_path)[0] == 0
    assert not marker.exists()


def test_a_control_character_in_a_command_is_escaped(tmp_path):
    (tmp_path / "Procfile").write_bytes(b"web: echo \x1b[31mred\n")
    ret, out, err = check(tmp_path)
    assert ret == 0
    assert "\x1b" not in out and "\\x1b" in out


@pytest.mark.parametrize(
    "line",
    [
        "'a'=hunter2XYZZY",
        "A-B=hunter2XYZZY",
        "SECRET:hunter2XYZZY",
        "export SECRET hunter2XYZZY",
        'PASSWORD="hunter"2XYZZY',
        "export  =hunter2XYZZY",
    ],
)
def test_a_bad_env_line_is_named_without_its_value(tmp_path, line):
    write(tmp_path, {"Procfile": "web: sleep 1\n", ".env": line + "\n"})
    for args in ([], ["--json"], ["--strict"]):
        ret, out, err = check(tmp_path, *args)
        assert "XYZZY" not in out + err and "hunter" not in out + err, out + err
        assert ret == (2 if args == ["--strict"] or "PASSWORD" in line else 0), err


@pytest.mark.parametrize("kind", ["fifo", "device", "fifo-env", "fifo-settings"])
def test_a_fifo_or_a_device_never_hangs_the_check(tmp_path, kind):
    write(tmp_path, {"Procfile": "web: sleep 1\n"})
    if kind == "device":
        args = ["-f", "/dev/zero"]
    else:
        os.mkfifo(tmp_path / {"fifo": "P", "fifo-env": "e", "fifo-settings": "proctree.toml"}[kind])
        args = {"fifo": ["-f", "P"], "fifo-env": ["-e", "e"], "fifo-settings": []}[kind]
    ret, out, err = check(tmp_path, *args)  # the 60 s timeout of check() is the hang's bound
    assert ret in (0, 2) and "Traceback" not in err
    if kind == "device":
        assert ret == 2 and "not a regular file" in err
