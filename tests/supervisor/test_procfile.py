"""The Procfile, .env, scale and settings parsers behind `proctree up`: table-driven, on synthetic text.

Pure logic: no process is started here. Each error case checks the message
names what is wrong and where (file and line), since the point of refusing is
that the user can fix it.
"""

import os

import pytest

from proctree._procfile.config import (
    DEFAULT_BASE_PORT,
    EntrySettings,
    load_procfile,
    load_settings,
    parse_scale,
    parse_settings,
    plan_services,
)
from proctree._procfile.dotenv import parse_dotenv
from proctree._procfile.procfile import ProcfileError, parse_procfile, read_procfile

# -- Procfile --------------------------------------------------------------------

PROCFILES = [
    ("web: python -m http.server $PORT", [("web", "python -m http.server $PORT", 1)]),
    ("web:python app.py", [("web", "python app.py", 1)]),
    ("# a comment\n\nweb: a\n  # indented comment\nworker: b\n", [("web", "a", 3), ("worker", "b", 5)]),
    ("web: a\r\nworker: b\r\n", [("web", "a", 1), ("worker", "b", 2)]),
    ("  web: a   \n", [("web", "a", 1)]),
    ("web-1_x: a: b: c", [("web-1_x", "a: b: c", 1)]),
    ("web: sh -c 'echo a # not a comment'", [("web", "sh -c 'echo a # not a comment'", 1)]),
    ("web: a\n\x0c\nworker: b", [("web", "a", 1), ("worker", "b", 3)]),
    ("web:\ta", [("web", "a", 1)]),
]


@pytest.mark.parametrize("text, expected", PROCFILES)
def test_procfile_entries(text, expected):
    entries = parse_procfile(text)
    assert [(e.name, e.command, e.line) for e in entries] == expected
    assert [e.index for e in entries] == list(range(len(expected)))


PROCFILE_ERRORS = [
    ("web python app.py", 1, "no colon"),
    ("web: a\nworker python", 2, "no colon"),
    (": a", 1, "needs a name"),
    ("my web: a", 1, "not a valid name"),
    ("web.1: a", 1, "not a valid name"),
    ("wéb: a", 1, "not a valid name"),
    ("web:", 1, "no command"),
    ("web:    ", 1, "no command"),
    ("web: a\n\nweb: b", 3, "defined twice (first on line 1)"),
    ("web: a\0b", 1, "NUL"),
    ("x" * 61 + ": a", 1, "longer than 60"),
    ("-web: a", 1, "starts with a letter"),
    ("", None, "no entries"),
    ("# only\n\n   \n", None, "no entries"),
]


@pytest.mark.parametrize("text, line, words", PROCFILE_ERRORS)
def test_procfile_errors(text, line, words):
    with pytest.raises(ProcfileError) as info:
        parse_procfile(text, source="P")
    assert info.value.line == line
    assert words in str(info.value)
    assert str(info.value).startswith(f"P:{line}:" if line else "P:")


def test_procfile_error_is_a_value_error():
    assert issubclass(ProcfileError, ValueError)
    with pytest.raises(TypeError):
        parse_procfile(b"web: a")


@pytest.mark.parametrize(
    "content, words",
    [
        (None, "no such Procfile"),
        (b"web: \xff\xfe", "not UTF-8"),
        (b"\xef\xbb\xbfweb: a", None),  # a BOM is fine
        (b"#" * (1 << 20) + b"\nweb: a", "larger than"),
    ],
)
def test_read_procfile_files(tmp_path, content, words):
    path = tmp_path / "Procfile"
    if content is not None:
        path.write_bytes(content)
    if words is None:
        assert [e.name for e in read_procfile(path)] == ["web"]
        return
    with pytest.raises(ProcfileError, match=words):
        read_procfile(path)


def test_read_procfile_directory(tmp_path):
    with pytest.raises(ProcfileError, match="is a directory"):
        read_procfile(tmp_path)


# -- .env ------------------------------------------------------------------------

DOTENVS = [
    ("A=1", {"A": "1"}),
    ("export A=1", {"A": "1"}),
    ("A = spaced value  ", {"A": "spaced value"}),
    ("A=x # comment", {"A": "x"}),
    ("A=http://h/#frag", {"A": "http://h/#frag"}),
    ("A=", {"A": ""}),
    ("A=''", {"A": ""}),
    ("A='lit $B \\n'", {"A": "lit $B \\n"}),
    ('A="a\\nb\\t\\"c\\\\"', {"A": 'a\nb\t"c\\'}),
    ('A="x" # comment', {"A": "x"}),
    ("A='multi\nline'\nB=2", {"A": "multi\nline", "B": "2"}),
    ("B=1\nA=$B-${B}", {"B": "1", "A": "1-1"}),
    ('B=1\nA="$B"', {"B": "1", "A": "1"}),
    ("A=$UNSET.", {"A": "."}),
    ("A=$HOME_DIR", {"A": "/base"}),  # from the base environment
    ("A=\\$B", {"A": "$B"}),
    ('A="\\$B"', {"A": "$B"}),
    ("A=1\nA=2", {"A": "2"}),
    ("# c\n\n  \nA=1\r\nB=2\r\n", {"A": "1", "B": "2"}),
    ("A.B=1", {"A.B": "1"}),
    ("A=$(rm -rf /)", {"A": "$(rm -rf /)"}),  # never run
    ("export=1", {"export": "1"}),
]


@pytest.mark.parametrize("text, expected", DOTENVS)
def test_dotenv_values(text, expected):
    assert parse_dotenv(text, base={"HOME_DIR": "/base"}) == expected


DOTENV_ERRORS = [
    ("A", 1, "no '='"),
    ("A=1\nB", 2, "no '='"),
    ("export A", 1, "no '='"),
    ("1A=2", 1, "not a NAME=value"),
    ("=2", 1, "not a NAME=value"),
    ('A="open\n\nB=1', 1, "never closed"),
    ("X=1\nA='open", 2, "never closed"),
    ("A='x' y", 1, "after the closing quote"),
    ("A='x\ny' z", 2, "after the closing quote"),
    ("A=1\nB=a\0b", 2, "NUL"),
]


@pytest.mark.parametrize("text, line, words", DOTENV_ERRORS)
def test_dotenv_errors(text, line, words):
    with pytest.raises(ProcfileError) as info:
        parse_dotenv(text, source="E")
    assert info.value.line == line
    assert words in str(info.value)
    assert str(info.value).startswith(f"E:{line}:")


# -- scale -----------------------------------------------------------------------

NAMES = ["web", "worker", "clock"]

SCALES = [
    ("web=2", {"web": 2, "worker": 1, "clock": 1}),
    ("web=2,worker=0", {"web": 2, "worker": 0, "clock": 1}),
    (" web = 2 , worker=1 ", {"web": 2, "worker": 1, "clock": 1}),
    ("all=0,web=1", {"web": 1, "worker": 0, "clock": 0}),
    ("web=1,all=3", {"web": 1, "worker": 3, "clock": 3}),
    ("web=100", {"web": 100, "worker": 1, "clock": 1}),
]


@pytest.mark.parametrize("text, expected", SCALES)
def test_scale(text, expected):
    assert parse_scale(text, NAMES) == expected


SCALE_ERRORS = [
    ("", "empty scale"),
    ("   ", "empty scale"),
    ("web", "not name=count"),
    ("web=", "whole number"),
    ("=2", "not name=count"),
    ("web=2,", "not name=count"),
    ("web=-1", "whole number"),
    ("web=1.5", "whole number"),
    ("web=+1", "whole number"),
    ("web=١", "whole number"),
    ("web=101", "at most 100"),
    ("web=99999999999999999999", "at most 100"),
    ("db=1", "not an entry"),
    ("web=1,web=2", "scaled twice"),
    ("all=1,all=2", "scaled twice"),
]


@pytest.mark.parametrize("text, words", SCALE_ERRORS)
def test_scale_errors(text, words):
    with pytest.raises(ProcfileError, match=words) as info:
        parse_scale(text, NAMES)
    assert str(info.value).startswith("-m: ")


# -- settings --------------------------------------------------------------------

SETTINGS_ERRORS = [
    ([], "must be a table"),
    ({"web": 1}, "services.web must be a table"),
    ({"we b": {}}, "not a Procfile entry name"),
    ({"web": {"redy": "tcp"}}, "unknown settings ['redy']"),
    ({"web": {"ready": 5}}, "ready must be"),
    ({"web": {"depends_on": "db"}}, "depends_on must be"),
    ({"web": {"depends_on": [1]}}, "depends_on must be"),
    ({"web": {"depends_on": {"db": "healthy"}}}, "depends_on.db must be one of"),
    ({"web": {"depends_on": {"d b": "ready"}}}, "not an entry name"),
    ({"web": {"restart": "sometimes"}}, "restart must be one of"),
    ({"web": {"restart": True}}, "restart must be one of"),
    ({"web": {"max_restarts": -1}}, "max_restarts"),
    ({"web": {"max_restarts": True}}, "max_restarts"),
    ({"web": {"max_restarts": 1.5}}, "max_restarts"),
    ({"web": {"env": ["A=1"]}}, "env must be a table"),
    ({"web": {"env": {"A-B": "1"}}}, "not an environment variable name"),
    ({"web": {"env": {"A": True}}}, "env.A must be a string or a number"),
    ({"web": {"env": {"A": ["x"]}}}, "env.A must be a string or a number"),
    ({"web": {"env": {"A": "x\0"}}}, "NUL"),
    ({"web": {"can_die": "yes"}}, "can_die must be true or false"),
    ({"web": {"port": 0}}, "port must be"),
    ({"web": {"port": 65536}}, "port must be"),
    ({"web": {"port": "8000"}}, "port must be"),
    ({"web": {"port": True}}, "port must be"),
    ({"web": {"cwd": ""}}, "cwd must be"),
    ({"web": {"cwd": 3}}, "cwd must be"),
]


@pytest.mark.parametrize("table, words", SETTINGS_ERRORS)
def test_settings_errors(table, words):
    with pytest.raises(ProcfileError) as info:
        parse_settings(table, source="S")
    assert words in str(info.value)
    assert str(info.value).startswith("S: ")


def test_settings_values():
    settings = parse_settings(
        {
            "web": {
                "ready": "http://127.0.0.1:$PORT/",
                "depends_on": ["db"],
                "restart": "on-failure",
                "max_restarts": 3,
                "env": {"A": "x", "N": 2, "F": 1.5},
                "can_die": True,
                "port": 8000,
                "cwd": "sub",
            },
            "db": {"depends_on": {"migrate": "completed"}},
            "migrate": {},
        },
        source="S",
    )
    web = settings["web"]
    assert web.depends_on == {"db": "started"}
    assert web.env == {"A": "x", "N": "2", "F": "1.5"}
    assert (web.restart, web.max_restarts, web.can_die, web.port, web.cwd) == ("on-failure", 3, True, 8000, "sub")
    assert settings["db"].depends_on == {"migrate": "completed"}
    assert settings["migrate"] == EntrySettings()


# -- the plan --------------------------------------------------------------------


def entries(*names):
    return parse_procfile("\n".join(f"{n}: run-{n}" for n in names))


def test_plan_ports_names_and_env_the_foreman_way():
    plan = plan_services(entries("web", "worker", "clock"), {}, counts={"web": 2, "worker": 1, "clock": 3})
    assert [(s.name, s.port) for s in plan] == [
        ("web.1", 5000),
        ("web.2", 5001),
        ("worker.1", 5100),
        ("clock.1", 5200),
        ("clock.2", 5201),
        ("clock.3", 5202),
    ]
    web2 = plan[1]
    assert web2.env["PORT"] == "5001"
    assert web2.env["PS"] == web2.env["PROCTREE_SERVICE"] == web2.env["HONCHO_PROCESS_NAME"] == "web.2"
    assert (web2.entry, web2.instance, web2.command) == ("web", 2, "run-web")


def test_plan_port_counts_entries_that_do_not_run():
    """PORT follows the entry's place in the Procfile, so running a subset does not move it."""
    plan = plan_services(entries("web", "worker", "clock"), {}, counts={"worker": 0}, names=["clock"])
    assert [(s.name, s.port) for s in plan] == [("clock.1", 5200)]


def test_plan_env_layers():
    settings = {"web": EntrySettings(env={"PORT": "9999", "DEBUG": "1", "PS": "mine"})}
    plan = plan_services(entries("web"), settings, file_env={"DEBUG": "0", "DB": "x", "PROCTREE_SERVICE": "no"})
    env = plan[0].env
    # .env < PORT < the entry's env; PS, PROCTREE_SERVICE and HONCHO_PROCESS_NAME are always the instance's name.
    assert env == {
        "DEBUG": "1",
        "DB": "x",
        "PORT": "9999",
        "PS": "web.1",
        "PROCTREE_SERVICE": "web.1",
        "HONCHO_PROCESS_NAME": "web.1",
    }
    assert plan[0].port == 9999  # the PORT it gets is the port it is watched on


@pytest.mark.parametrize(
    ("settings", "counts"),
    [
        ({"web": EntrySettings(env={"PORT": "5100"})}, None),  # onto worker's assigned 5100
        ({"web": EntrySettings(port=8000), "worker": EntrySettings(port=8000)}, None),
        ({"web": EntrySettings(port=5099)}, {"web": 3}),  # 5099, 5100, 5101 runs into worker.1's 5100
        ({"web": EntrySettings(env={"PORT": "7000"})}, {"web": 2}),  # one literal PORT for two instances
    ],
)
def test_plan_two_instances_on_one_port_are_refused(settings, counts):
    with pytest.raises(ProcfileError, match=r"would both get PORT=\d+") as caught:
        plan_services(entries("web", "worker"), settings, counts=counts, settings_source="proctree.toml")
    assert caught.value.source == "proctree.toml"


def test_plan_a_bad_env_port_is_refused():
    with pytest.raises(ProcfileError, match=r"env.PORT='80a' is not a port number"):
        plan_services(entries("web"), {"web": EntrySettings(env={"PORT": "80a"})})


def test_plan_port_errors_name_where_the_base_port_came_from(tmp_path):
    (tmp_path / "Procfile").write_text("w1: sleep 1\nw2: sleep 1\n")
    with pytest.raises(ProcfileError, match=r"the base port 65500 is PORT in the environment") as caught:
        load_procfile(tmp_path / "Procfile", environ={"PORT": "65500"})
    assert caught.value.source == "PORT in the environment"
    many = "".join(f"e{i}: sleep 1\n" for i in range(300))
    (tmp_path / "Procfile").write_text(many)
    with pytest.raises(ProcfileError, match="300 instances: at most 256") as caught:
        load_procfile(tmp_path / "Procfile", environ={})
    assert caught.value.source.endswith("Procfile")


def test_plan_port_setting_and_ready_substitution():
    settings = {"web": EntrySettings(port=8000, ready="http://127.0.0.1:${PORT}/health?p=$PORT&q=$PORTS")}
    plan = plan_services(entries("web"), settings, counts={"web": 2})
    assert [s.port for s in plan] == [8000, 8001]
    assert plan[1].ready == "http://127.0.0.1:8001/health?p=8001&q=$PORTS"
    table = plan_services(entries("web"), {"web": EntrySettings(ready={"tcp": "$PORT", "n": 3})})
    assert table[0].ready == {"tcp": "5000", "n": 3}


def test_plan_depends_on_expands_to_instances():
    settings = {"web": EntrySettings(depends_on={"db": "ready", "migrate": "completed"})}
    plan = plan_services(entries("db", "migrate", "web"), settings, counts={"db": 2})
    web = next(s for s in plan if s.entry == "web")
    assert web.depends_on == {"db.1": "ready", "db.2": "ready", "migrate.1": "completed"}


def test_plan_names_pull_in_dependencies():
    settings = {
        "web": EntrySettings(depends_on={"db": "ready"}),
        "db": EntrySettings(depends_on={"migrate": "completed"}),
    }
    plan = plan_services(entries("db", "migrate", "web", "worker"), settings, names=["web"])
    assert [s.name for s in plan] == ["db.1", "migrate.1", "web.1"]


PLAN_ERRORS = [
    ({"nope": EntrySettings()}, {}, (), "services.nope: no such entry"),
    ({"web": EntrySettings(depends_on={"nope": "ready"})}, {}, (), "depends on 'nope', not an entry"),
    ({"web": EntrySettings(depends_on={"web": "ready"})}, {}, (), "depends on itself"),
    (
        {"web": EntrySettings(depends_on={"db": "ready"}), "db": EntrySettings(depends_on={"web": "started"})},
        {},
        (),
        "cycle: web -> db -> web",
    ),
    ({"web": EntrySettings(depends_on={"db": "ready"})}, {"db": 0}, (), "which the scale sets to 0"),
    ({}, {"web": 0, "db": 0, "worker": 0}, (), "nothing to run"),
    ({}, {"web": 0}, ("web",), "nothing to run"),
    ({}, {}, ("nope",), "no entry named 'nope'"),
    ({}, {"web": 100, "db": 100, "worker": 100}, (), "at most 256"),
    ({"web": EntrySettings(port=65535)}, {"web": 2}, (), "PORT=65536"),
    ({"web": EntrySettings(cwd="no/such/folder")}, {}, (), "is not a folder"),
]


@pytest.mark.parametrize("settings, counts, names, words", PLAN_ERRORS)
def test_plan_errors(settings, counts, names, words, tmp_path):
    with pytest.raises(ProcfileError) as info:
        plan_services(entries("web", "db", "worker"), settings, counts=counts, names=names, directory=str(tmp_path))
    assert words in str(info.value)


def test_plan_cycle_through_a_long_chain():
    names = [f"e{i}" for i in range(3000)]
    settings = {n: EntrySettings(depends_on={names[i + 1]: "ready"}) for i, n in enumerate(names[:-1])}
    settings[names[-1]] = EntrySettings(depends_on={names[0]: "ready"})
    with pytest.raises(ProcfileError, match="cycle: e0 -> e1 -> "):
        plan_services(entries(*names), settings, counts=dict.fromkeys(names, 0))


def test_plan_base_port_too_high():
    with pytest.raises(ProcfileError, match="PORT=65600"):
        plan_services(entries("web", "worker"), {}, base_port=65500)


# -- files together ------------------------------------------------------------------


def write(folder, files):
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def test_load_procfile_with_dotenv_and_pyproject(tmp_path):
    write(
        tmp_path,
        {
            "Procfile": "web: serve\nworker: work\n",
            ".env": "DB=postgres://$USER_NAME@h/db\nPORT=7000\n",
            "front/x": "",
            "pyproject.toml": '[project]\nname = "x"\n[tool.proctree.services.worker]\n'
            'depends_on = { web = "ready" }\ncan_die = true\ncwd = "front"\n',
        },
    )
    plan = load_procfile(tmp_path / "Procfile", scale="web=2", environ={"USER_NAME": "me"})
    assert plan.base_port == 7000
    assert plan.settings_file == str(tmp_path / "pyproject.toml")
    assert plan.env_files == (str(tmp_path / ".env"),)
    assert [(s.name, s.port) for s in plan.services] == [("web.1", 7000), ("web.2", 7001), ("worker.1", 7100)]
    worker = plan.services[2]
    assert worker.env["DB"] == "postgres://me@h/db"
    assert worker.can_die and worker.cwd == str(tmp_path / "front")
    assert worker.depends_on == {"web.1": "ready", "web.2": "ready"}
    assert plan.services[0].cwd == str(tmp_path)
    assert [s.name for s in plan.instances_of("web")] == ["web.1", "web.2"]


def test_load_procfile_alone(tmp_path):
    write(tmp_path, {"Procfile": "web: serve\n"})
    plan = load_procfile(tmp_path / "Procfile", environ={})
    assert plan.base_port == DEFAULT_BASE_PORT and plan.settings_file is None and plan.env_files == ()
    assert plan.services[0].env == {
        "PORT": "5000",
        "PS": "web.1",
        "PROCTREE_SERVICE": "web.1",
        "HONCHO_PROCESS_NAME": "web.1",
    }


def test_load_procfile_env_files_in_order(tmp_path):
    write(tmp_path, {"Procfile": "web: serve\n", "a.env": "A=1\nB=1\n", "b.env": "B=$A-2\n", ".env": "C=ignored\n"})
    plan = load_procfile(tmp_path / "Procfile", env_files=[tmp_path / "a.env", tmp_path / "b.env"], environ={})
    env = plan.services[0].env
    assert (env["A"], env["B"], "C" in env) == ("1", "1-2", False)


@pytest.mark.parametrize(
    "files, kwargs, words",
    [
        ({}, {}, "no such Procfile"),
        ({"Procfile": "web: a"}, {"env_files": ["missing.env"]}, "missing.env: no such .env file"),
        ({"Procfile": "web: a", ".env": "A=1\nbroken\n"}, {}, ".env:2: 'broken' has no '='"),
        ({"Procfile": "web: a"}, {"base_port": 0}, "base port"),
        ({"Procfile": "web: a"}, {"base_port": True}, "base port"),
        ({"Procfile": "web: a", ".env": "PORT=http\n"}, {}, "PORT='http'"),
        ({"Procfile": "web: a"}, {"environ": {"PORT": "70000"}}, "the environment: PORT='70000'"),
        ({"Procfile": "web: a", "proctree.toml": "[services.web\n"}, {}, "not valid TOML"),
        ({"Procfile": "web: a", "proctree.toml": "[servces.web]\n"}, {}, "unknown top-level keys ['servces']"),
        ({"Procfile": "web: a", "proctree.toml": "[services.db]\n"}, {}, "services.db: no such entry"),
        (
            {"Procfile": "web: a", "pyproject.toml": "[tool.proctree.service.web]\nport = 43999\n"},
            {},
            "pyproject.toml: unknown keys under [tool.proctree] ['service'] (settings go under [tool.proctree.services.NAME])",
        ),
        (
            {"Procfile": "web: a", "pyproject.toml": "[tool.proctree]\nfoo = 1\n[tool.proctree.services.web]\n"},
            {},
            "pyproject.toml: unknown keys under [tool.proctree] ['foo']",
        ),
        ({"Procfile": "web: a", "pyproject.toml": "[tool]\nproctree = 1\n"}, {}, "tool.proctree must be a table"),
        (
            {
                "Procfile": "web: a",
                "proctree.toml": "[services.web]\n",
                "pyproject.toml": "[tool.proctree.services.web]\n",
            },
            {},
            "both",
        ),
        ({"Procfile": "web: a"}, {"scale": "web=x"}, "-m: web='x'"),
        ({"Procfile": "web: a"}, {"names": ["db"]}, "no entry named 'db'"),
    ],
)
def test_load_procfile_errors(tmp_path, files, kwargs, words, monkeypatch):
    write(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    kwargs.setdefault("environ", {})
    with pytest.raises(ProcfileError) as info:
        load_procfile(tmp_path / "Procfile", **kwargs)
    assert words in str(info.value)


def test_settings_beside_the_procfile_only(tmp_path):
    write(tmp_path, {"sub/Procfile": "web: a\n", "proctree.toml": "[services.nope]\n"})
    assert load_settings(str(tmp_path / "sub")) == ({}, None)
    assert load_procfile(tmp_path / "sub" / "Procfile", environ={}).settings_file is None


def test_pyproject_without_our_table_is_ignored(tmp_path):
    write(tmp_path, {"Procfile": "web: a\n", "pyproject.toml": '[project]\nname = "x"\n[tool.other]\na = 1\n'})
    assert load_procfile(tmp_path / "Procfile", environ={}).settings_file is None


def test_relative_procfile_path(tmp_path, monkeypatch):
    write(tmp_path, {"Procfile": "web: a\n"})
    monkeypatch.chdir(tmp_path)
    plan = load_procfile("Procfile", environ={})
    assert plan.services[0].cwd == os.path.realpath(tmp_path) or plan.services[0].cwd == str(tmp_path)


@pytest.mark.parametrize(
    ("text", "line", "match"),
    [
        ("web: echo a\rworker: echo b\r", 1, "a carriage return inside the line"),
        ("web: echo a\nworker: echo b\rclock: date\n", 2, "a carriage return inside the line"),
        ("web: echo a\nall: echo b\n", 2, "'all' cannot name an entry"),
    ],
)
def test_parse_refuses_a_lone_cr_and_an_entry_named_all(text, line, match):
    with pytest.raises(ProcfileError, match=match) as caught:
        parse_procfile(text)
    assert caught.value.line == line


def test_parse_still_reads_crlf_line_ends():
    assert [(e.name, e.command) for e in parse_procfile("web: echo a\r\nworker: echo b\r\n")] == [
        ("web", "echo a"),
        ("worker", "echo b"),
    ]


def test_load_refuses_ill_typed_arguments_clearly(tmp_path):
    (tmp_path / "Procfile").write_text("web: sleep 1\n")
    with pytest.raises(TypeError, match="scale must be a string"):
        load_procfile(tmp_path / "Procfile", scale={"web": 2})
    with pytest.raises(TypeError, match="names must be a sequence of entry names"):
        load_procfile(tmp_path / "Procfile", names="web")


def test_scale_with_a_huge_count_is_refused_before_int():
    with pytest.raises(ProcfileError, match="at most 100 instances"):
        parse_scale("web=" + "9" * 5000, ["web"])
    assert parse_scale("web=0007", ["web"]) == {"web": 7}
