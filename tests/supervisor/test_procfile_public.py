"""proctree.procfile, the public face of `proctree up`'s readers: real files in a folder, and one real run.

The tables lay out a folder (a Procfile, .env files, settings) and call the
public names as a program would; the readers' own rules are tested on
synthetic text in test_procfile.py and test_dotenv_table.py. The last test
starts a real Supervisor from a plan, as `proctree up` does.
"""

import os

import pytest

import proctree
from proctree import procfile
from support.spawnkit import alive


def lay_out(folder, files):
    for name, text in files.items():
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


# (files, load()'s arguments with "ROOT" for the folder, environ, what the plan must hold:
#  the Procfile's name, the services with their PORT, and environment values of the first service)
LOADS = [
    ({"Procfile": "web: a\n"}, {}, {}, ("Procfile", [("web.1", 5000)], {"PORT": "5000"})),
    (
        {"Procfile": "web: a\nworker: b\n", ".env": "PORT=6000\nGREETING=hi $USER_NAME\n"},
        {},
        {"USER_NAME": "ada"},
        ("Procfile", [("web.1", 6000), ("worker.1", 6100)], {"GREETING": "hi ada", "PORT": "6000"}),
    ),
    (
        {"Procfile": "web: a\n", "Other": "job: b\n", ".env": "PROCFILE=Other\n"},
        {},
        {},
        ("Other", [("job.1", 5000)], {"PROCFILE": "Other"}),
    ),
    ({"Procfile": "web: a\n", "Alt": "alt: b\n"}, {}, {"PROCFILE": "Alt"}, ("Alt", [("alt.1", 5000)], {})),
    (
        {"Procfile": "web: a\n", "Alt": "alt: b\n", ".env": "PROCFILE=Other\n"},
        {"procfile": "Alt"},
        {},
        ("Alt", [("alt.1", 5000)], {}),
    ),
    (
        {"Procfile": "web: a\n", "one.env": "A=1\nB=1\n", "two.env": "B=2\nC=$A$B\n"},
        {"env_files": ["one.env", "two.env"]},
        {},
        ("Procfile", [("web.1", 5000)], {"A": "1", "B": "2", "C": "12"}),
    ),
    (
        {"Procfile": "web: a\nworker: b\n"},
        {"scale": "web=2,worker=0", "base_port": 7000},
        {},
        ("Procfile", [("web.1", 7000), ("web.2", 7001)], {"PS": "web.1"}),
    ),
    ({"Procfile": "web: a\nworker: b\n"}, {"names": ["worker"]}, {}, ("Procfile", [("worker.1", 5100)], {})),
    (
        {"app/Procfile": "web: a\n", "app/.env": "X=from app\n"},
        {"app_root": "ROOT/app"},
        {},
        ("Procfile", [("web.1", 5000)], {"X": "from app"}),
    ),
]


@pytest.mark.parametrize(("files", "kwargs", "environ", "expected"), LOADS)
def test_load_picks_and_reads_the_files_as_honcho_does(tmp_path, files, kwargs, environ, expected):
    lay_out(tmp_path, files)
    kwargs = {k: (v.replace("ROOT", str(tmp_path)) if isinstance(v, str) else v) for k, v in kwargs.items()}
    kwargs.setdefault("app_root", str(tmp_path))
    plan = procfile.load(environ=environ, **kwargs)
    name, services, env = expected
    assert isinstance(plan, proctree.ProcfilePlan) and os.path.basename(plan.procfile) == name
    assert [(s.name, s.port) for s in plan.services] == services
    assert {k: plan.services[0].env.get(k) for k in env} == env
    assert plan.warnings == ()


def test_choose_files_names_what_load_reads(tmp_path):
    lay_out(tmp_path, {"Procfile": "web: a\n", "Alt": "alt: b\n", ".env": "PROCFILE=Alt\n"})
    chosen, env_files = procfile.choose_files(app_root=tmp_path, environ={})
    assert chosen == os.path.join(str(tmp_path), "Alt") and env_files == [os.path.join(str(tmp_path), ".env")]
    assert procfile.choose_files("P", app_root=tmp_path, environ={}) == (os.path.join(str(tmp_path), "P"), None)


# (files, load()'s arguments, the exception, words its message must hold)
LOAD_ERRORS = [
    ({}, {}, proctree.ProcfileError, "Procfile"),
    ({"Procfile": "web a\n"}, {}, proctree.ProcfileError, "no colon"),
    ({"Procfile": "web: a\n"}, {"env_files": ["missing.env"]}, proctree.ProcfileError, "missing.env"),
    ({"Procfile": "web: a\n", ".env": "not an assignment\n"}, {}, proctree.ProcfileError, ".env"),
    ({"Procfile": "web: a\n"}, {"scale": "db=1"}, proctree.ProcfileError, "db"),
    ({"Procfile": "web: a\n"}, {"procfile": 3}, TypeError, "procfile must be a path"),
    ({"Procfile": "web: a\n"}, {"env_files": "one.env"}, TypeError, "env_files must be a list"),
    ({"Procfile": "web: a\n"}, {"names": "web"}, TypeError, "names must be a sequence"),
    ({"Procfile": "web: a\n"}, {"env_files": [None]}, TypeError, "env_files must be a path"),
    ({"Procfile": "web: a\n"}, {"app_root": b"/"}, TypeError, "app_root must be a path"),
]


@pytest.mark.parametrize(("files", "kwargs", "error", "words"), LOAD_ERRORS)
def test_load_refuses_with_what_and_where(tmp_path, files, kwargs, error, words):
    lay_out(tmp_path, files)
    with pytest.raises(error, match=words):
        procfile.load(**{"app_root": str(tmp_path), "environ": {}, **kwargs})


def test_load_not_strict_reads_as_honcho_and_says_what_it_skipped(tmp_path):
    lay_out(tmp_path, {"Procfile": "web: a\nnot an entry\n"})
    plan = procfile.load(app_root=str(tmp_path), env_files=["missing.env"], environ={}, strict=False)
    assert [s.name for s in plan.services] == ["web.1"]
    assert len(plan.warnings) == 2 and any("missing.env" in w for w in plan.warnings)


# (files, the paths to read, environ, the values)
ENV_FILES = [
    ({"a.env": "A=1\n"}, ["a.env"], {}, {"A": "1"}),
    ({"a.env": "A=1\nB=x\n", "b.env": "B=2\n"}, ["a.env", "b.env"], {}, {"A": "1", "B": "2"}),
    ({"a.env": "A=$HOME_DIR/x\n"}, ["a.env"], {"HOME_DIR": "/h"}, {"A": "/h/x"}),
    ({"a.env": "A=1\n", "b.env": "B=${A}2\n"}, ["a.env", "b.env"], {"A": "outer"}, {"A": "1", "B": "12"}),
    ({"a.env": "export A='quoted # not a comment'\n"}, ["a.env"], {}, {"A": "quoted # not a comment"}),
    ({}, [], {}, {}),
]


@pytest.mark.parametrize(("files", "paths", "environ", "expected"), ENV_FILES)
def test_read_env_files(tmp_path, files, paths, environ, expected):
    lay_out(tmp_path, files)
    assert procfile.read_env_files([tmp_path / p for p in paths], environ=environ) == expected


def test_read_env_files_refuses_a_missing_file_and_a_bad_line(tmp_path):
    lay_out(tmp_path, {"bad.env": "A=1\nwhat\n"})
    with pytest.raises(proctree.ProcfileError, match="missing.env: no such .env file"):
        procfile.read_env_files([tmp_path / "missing.env"])
    with pytest.raises(proctree.ProcfileError, match=":2"):
        procfile.read_env_files([tmp_path / "bad.env"])
    with pytest.raises(TypeError):
        procfile.read_env_files("bad.env")  # type: ignore[arg-type]


def test_service_specs_quiet_instances_and_the_exit_rule_on_a_plan(tmp_path):
    lay_out(
        tmp_path,
        {
            "Procfile": "migrate: m\nweb: w\nworker: k\n",
            "proctree.toml": '[services.web]\ndepends_on = { migrate = "completed" }\nstop_signal = "SIGINT"\n'
            "[services.worker]\ncan_die = true\n",
        },
    )
    plan = procfile.load(app_root=str(tmp_path), scale="web=2", environ={})
    specs = procfile.service_specs(plan, stop_signal=3)
    assert [type(s) for s in specs] == [proctree.ServiceSpec] * 4
    assert [(s.name, s.stop_signal) for s in specs] == [("migrate.1", 3), ("web.1", 2), ("web.2", 2), ("worker.1", 3)]
    assert procfile.quiet_instances("web", plan) == {"web.1", "web.2"}
    assert procfile.quiet_instances("migrate,web.2", plan) == {"migrate.1", "web.2"}
    with pytest.raises(proctree.ProcfileError, match="db"):
        procfile.quiet_instances("db", plan)
    with pytest.raises(TypeError):
        procfile.service_specs(specs)  # type: ignore[arg-type]

    rule = procfile.ExitRule(plan)
    ended = {"failed": False, "status": 0, "exit_code": 0, "how": "exited with code 0"}
    assert rule.on_end("migrate.1", **ended) is None  # a one-shot web waits on: its exit 0 is its job done
    assert rule.on_end("worker.1", **{**ended, "status": 1, "exit_code": 1}) is None  # can_die
    assert rule.on_end("web.1", **{**ended, "status": 143, "how": "was killed"}) == procfile.RunEnding(
        143, "web.1 was killed"
    )
    only = procfile.ExitRule(plan, exit_with="worker")
    assert only.on_end("web.1", **ended) == procfile.RunEnding(1, "web.1 exited with code 0 before worker ended")
    with pytest.raises(TypeError):
        procfile.ExitRule(plan, exit_with=1)  # type: ignore[arg-type]


def test_a_supervisor_runs_a_plan_loaded_from_files(tmp_path):
    lay_out(
        tmp_path,
        {
            "Procfile": 'migrate: echo "migrated $GREETING on $PORT"\nweb: sleep 60\n',
            ".env": "GREETING=hello\n",
            "proctree.toml": '[services.web]\ndepends_on = { migrate = "completed" }\n',
        },
    )
    plan = procfile.load(app_root=str(tmp_path), environ={})
    rule = procfile.ExitRule(plan)
    with proctree.SyncSupervisor(stop_grace=1) as sup:
        sup.start_all(procfile.service_specs(plan))
        migrated = sup.wait("migrate.1", until=(), timeout=30)
        assert migrated.status == "exited" and migrated.exit_code == 0
        assert migrated.last_rows == ("migrated hello on 5000",)
        how = {"failed": False, "status": 0, "exit_code": 0, "how": "exited with code 0"}
        assert rule.on_end("migrate.1", **how) is None  # foreman's rule: the run goes on
        web = sup.wait("web.1", until=("starting", "ready", "running"), timeout=30)  # started once migrate completed
        assert web.pid is not None and alive(web.pid)
    assert not alive(web.pid)


# Bad arguments a program may pass: each a TypeError or ValueError naming the argument, never an error from
# deep inside the readers, and never a plan read differently from what was asked.
BAD_CALLS = [
    (lambda: procfile.load(environ=[("A", "b")]), TypeError, "environ"),
    (lambda: procfile.load(environ="PORT=1"), TypeError, "environ"),
    (lambda: procfile.load(environ={"PORT": 6000}), TypeError, "environ"),
    (lambda: procfile.load(environ={"X": None}), TypeError, "environ"),
    (lambda: procfile.choose_files(environ={"PROCFILE": 5}), TypeError, "environ"),
    (lambda: procfile.read_env_files([".env"], environ={"X": b"y"}), TypeError, "environ"),
    (lambda: procfile.load(strict=None), TypeError, "strict"),
    (lambda: procfile.load(strict="false"), TypeError, "strict"),
    (lambda: procfile.choose_files(strict=0), TypeError, "strict"),
    (lambda: procfile.load(names=iter(["web"])), TypeError, "names"),
    (lambda: procfile.load(names=None), TypeError, "names"),
    (lambda: procfile.load(names="web"), TypeError, "names"),
    (lambda: procfile.load(names=[b"web"]), TypeError, "names"),
    (lambda: procfile.load("Proc\0file"), ValueError, "procfile"),
    (lambda: procfile.load(app_root="a\0b"), ValueError, "app_root"),
    (lambda: procfile.load(env_files=["a\0b"]), ValueError, "env_files"),
    (lambda: procfile.read_env_files(None), TypeError, "paths"),
    (lambda: procfile.ExitRule(None), TypeError, "plan"),
    (lambda: procfile.ExitRule("Procfile"), TypeError, "plan"),
    (lambda: procfile.ExitRule([object()]), TypeError, "plan"),
]


@pytest.mark.parametrize(("call", "error", "names"), BAD_CALLS, ids=range(len(BAD_CALLS)))
def test_bad_arguments_are_named(tmp_path, monkeypatch, call, error, names):
    lay_out(tmp_path, {"Procfile": "web: a\n", ".env": "B=${X}\n"})
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error) as caught:
        call()
    assert names in str(caught.value)
    assert not isinstance(caught.value, (AttributeError, KeyError))


def test_the_exit_rule_refuses_what_up_refuses_and_checks_each_end(tmp_path):
    lay_out(tmp_path, {"Procfile": "web: a\nworker: b\n"})
    plan = procfile.load(tmp_path / "Procfile")
    for exit_with in ("nope", "", "web.1"):
        with pytest.raises(proctree.ProcfileError, match="exit_with"):
            procfile.ExitRule(plan, exit_with=exit_with)
    rule = procfile.ExitRule(plan, exit_with="web")
    end = dict(failed=False, status=0, exit_code=0, how="exited with code 0")
    with pytest.raises(ValueError, match="not an instance"):
        rule.on_end("web", **end)  # the entry, not its instance
    with pytest.raises(TypeError, match="status"):
        rule.on_end("web.1", failed=False, status="3", exit_code=3, how="exited with code 3")
    with pytest.raises(TypeError, match="failed"):
        rule.on_end("web.1", failed=None, status=0, exit_code=0, how="exited with code 0")
    assert rule.on_end("web.1", **end) == procfile.RunEnding(0, "web.1 exited with code 0")


def test_a_procfile_error_survives_pickle_and_copy_unchanged():
    import copy
    import pickle

    error = proctree.ProcfileError("'web' is defined twice", source="dup", line=2)
    for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
        assert str(clone) == str(error) == "dup:2: 'web' is defined twice"
        assert (clone.source, clone.line, clone.detail) == ("dup", 2, "'web' is defined twice")


@pytest.mark.parametrize("settings", ["proctree.toml", "pyproject.toml"])
@pytest.mark.parametrize("link", ["dangling", "loop"])
def test_a_settings_file_that_is_a_broken_link_is_refused_not_ignored(tmp_path, settings, link):
    lay_out(tmp_path, {"Procfile": "web: a\n"})
    target = tmp_path / settings
    os.symlink(tmp_path / "nowhere" if link == "dangling" else target, target)
    for strict in (True, False):
        with pytest.raises(proctree.ProcfileError) as caught:
            procfile.load(tmp_path / "Procfile", strict=strict)
        assert settings in str(caught.value)
