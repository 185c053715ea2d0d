"""honcho's tests/test_environ.py, ported end to end onto `proctree up`.

Source: nickstenning/honcho at 2f47b72 (2025-06-03). honcho's tests call its readers
(environ.parse, parse_procfile, Procfile, expand_processes) directly; here each case is a
real `python -m proctree up` run: the `.env` cases are read by an entry that prints its
environment, the Procfile cases by the entries that start, the expand_processes cases by
the names, ports and environment each instance gets (`honcho start -c/-p/-q` mapped to
`proctree up -c/-p/-q`). Each case names the original.

Where honcho's own `.env` reader (built on shlex) differs from python-dotenv and foreman,
which up follows, the case says `CHOICE:`; docs/up.md's "Coming from honcho" lists each.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import proctree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
CLEARED = ("PROCFILE", "PORT", "NO_COLOR", "FOO", "BAZ", "MYVAR", "TABS", "NEWLINES", "DOLLAR", "ANIMAL", "DEBUG")
# An entry that prints its environment as one JSON line, then waits until the N instances
# named on its command line have printed theirs (the first to end stops the rest).
SHOW_ENV = textwrap.dedent("""
    import json, os, sys, time
    print(json.dumps(dict(os.environ)), flush=True)
    os.makedirs("seen", exist_ok=True)
    open(os.path.join("seen", os.environ["PS"]), "w").close()
    deadline = time.monotonic() + 30
    while len(os.listdir("seen")) < int(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
""")


def up(folder, *args):
    environ = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for name in CLEARED:
        environ.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "proctree", "up", "--grace", "2", *args],
        cwd=str(folder),
        env=environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def environments(folder, procfile, *args, dotenv=None):
    """{instance name: its environment}, from entries running show.py."""
    (folder / "show.py").write_text(SHOW_ENV)
    (folder / "Procfile").write_text(procfile)
    if dotenv is not None:
        (folder / ".env").write_text(dotenv)
    r = up(folder, "--no-prefix", *args)
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            env = json.loads(line)
            out[env["PS"]] = env
    return out


def started(folder, procfile, *args):
    """{instance name: (command, port)} for every instance up started, in start events' terms."""
    (folder / "Procfile").write_text(procfile)
    r = up(folder, "--json", *args)
    # Read and run (an entry may fail: 'python' need not be on PATH), or nothing to run.
    assert r.stdout or "nothing to run" in r.stderr, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        event = json.loads(line)
        if event["kind"] == "started":
            out[event["service"]["name"]] = (event["service"]["command"], event["service"]["port"])
    return out, r.stderr


PY = f"{sys.executable} show.py"

# (honcho's comment or a name for the case, .env text, the values honcho reads; the values up reads)
DOTENV_CASES = [
    ("simple", "FOO=bar\n", {"FOO": "bar"}, None),
    ("two", "FOO=bar\nBAZ=qux\n", {"FOO": "bar", "BAZ": "qux"}, None),
    ("No newline at EOF", "FOO=bar", {"FOO": "bar"}, None),
    ("Comments", "#commented: command\n", {}, None),
    ("Invalid characters", "-foo=command\n", {}, None),
    ("Single quoted", "MYVAR='hello\"world'\n", {"MYVAR": 'hello"world'}, None),
    ("Double quoted", 'MYVAR="hello\'world"\n', {"MYVAR": "hello'world"}, None),
    ("Quotation mark surrounded", "MYVAR='\"surrounded\"'\n", {"MYVAR": '"surrounded"'}, None),
    # CHOICE: an unquoted backslash is kept, as python-dotenv and foreman keep it; honcho's shlex drops it.
    ("Escaped quotation mark surrounded", 'MYVAR=\\"escaped\\"\n', {"MYVAR": '"escaped"'}, {"MYVAR": '\\"escaped\\"'}),
    ("At-sign in value", "MYVAR=user@domain.com\n", {"MYVAR": "user@domain.com"}, None),
    ("Much punctuation in value", "MYVAR=~pun|u@|0n$=\n", {"MYVAR": "~pun|u@|0n$="}, None),
    ("Unicode values", "MYVAR=⋃ñᴉ—☪ó∂ǝ\n", {"MYVAR": "⋃ñᴉ—☪ó∂ǝ"}, None),  # noqa: RUF001
    ("Unicode keys", "ṀẎṾẠṚ=value\n", {}, None),
    ("Quoted space in value", "MYVAR='sp ace'\n", {"MYVAR": "sp ace"}, None),
    # CHOICE: single quotes are literal (foreman, python-dotenv, the shell): honcho turns \t and \n
    # into a tab and a newline even there. \$ agrees: honcho and up both keep the backslash.
    (
        "Escaped characters in value",
        "TABS='foo\\tbar'\nNEWLINES='foo\\nbar'\nDOLLAR='foo\\$bar'\n",
        {"TABS": "foo\tbar", "NEWLINES": "foo\nbar", "DOLLAR": "foo\\$bar"},
        {"TABS": "foo\\tbar", "NEWLINES": "foo\\nbar", "DOLLAR": "foo\\$bar"},
    ),
]


@pytest.mark.parametrize("text, honcho, ours", [pytest.param(t, h, o, id=name) for name, t, h, o in DOTENV_CASES])
def test_environ_parse(tmp_path, text, honcho, ours):
    """honcho: tests/test_environ.py::test_environ_parse (one run per case)"""
    env = environments(tmp_path, f"show: {PY} 1\n", dotenv=textwrap.dedent(text))["show.1"]
    names = set(honcho) | set(ours or {}) | {"MYVAR", "FOO", "BAZ", "ṀẎṾẠṚ", "-foo"}
    expected = honcho if ours is None else ours
    assert {name: env[name] for name in names if name in env} == expected


PROCFILE_CASES = [
    ("Simple", "web: command\n", {"web": "command"}),
    ("Simple 2", "foo: python foo.py\nbar: python bar.py\n", {"foo": "python foo.py", "bar": "python bar.py"}),
    ("No newline at EOF", "web: command", {"web": "command"}),
    ("Comments", "#commented: command\n", {}),
    ("Invalid characters", "+foo: command\n", {}),
    ("Valid -/_ characters", "-foo_bar: command\n", {"-foo_bar": "command"}),
    (
        "Shell metacharacters",
        'web: sh -c "echo $FOOBAR" >/dev/null 2>&1\n',
        {"web": 'sh -c "echo $FOOBAR" >/dev/null 2>&1'},
    ),
]


@pytest.mark.parametrize("text, processes", [pytest.param(t, p, id=name) for name, t, p in PROCFILE_CASES])
def test_parse_procfile(tmp_path, text, processes):
    """honcho: tests/test_environ.py::test_parse_procfile

    `python` may not be on PATH (nor foo.py there): an entry that fails still started,
    and that is what is read here. A line honcho skips is skipped, with a warning.
    """
    got, err = started(tmp_path, text, "--grace", "2")
    assert {name.removesuffix(".1"): command for name, (command, _) in got.items()} == processes
    if not processes:
        assert "warning" in err


def test_parse_procfile_ordered(tmp_path):
    """honcho: tests/test_environ.py::test_parse_procfile_ordered: the file's order is kept (it sets the ports)."""
    text = "one: onecommand\ntwo: twocommand\nthree: twocommand\nfour: fourcommand\n"
    got, _ = started(tmp_path, text)
    assert sorted(got, key=lambda name: got[name][1]) == ["one.1", "two.1", "three.1", "four.1"]


def test_procfile_has_no_processes_after_init(tmp_path):
    """honcho: tests/test_environ.py::TestProcfile::test_has_no_processes_after_init (an empty Procfile)"""
    got, err = started(tmp_path, "")
    assert got == {} and "warning" in err


def test_procfile_add_process(tmp_path):
    """honcho: tests/test_environ.py::TestProcfile::test_add_process"""
    got, _ = started(tmp_path, "foo: echo 123\n")
    assert got["foo.1"][0] == "echo 123"


def test_procfile_add_process_ensures_unique_name(tmp_path):
    """honcho: tests/test_environ.py::TestProcfile::test_add_process_ensures_unique_name (refused; honcho asserts)"""
    (tmp_path / "Procfile").write_text("foo: echo 123\nfoo: echo 123\n")
    r = up(tmp_path)
    assert r.returncode == 2 and "'foo' is defined twice" in r.stderr


# --- expand_processes: what each instance gets ---

TWO = f"foo: {PY} 2\nbar: {PY} 2\n"
FIVE = f"foo: {PY} 5\nbar: {PY} 5\n"


def test_expand_processes_name(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_name"""
    assert list(environments(tmp_path, f"foo: {PY} 1\n")) == ["foo.1"]


def test_expand_processes_name_multiple(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_name_multiple"""
    assert sorted(environments(tmp_path, TWO)) == ["bar.1", "foo.1"]


def test_expand_processes_name_concurrency(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_name_concurrency"""
    assert sorted(environments(tmp_path, f"foo: {PY} 3\n", "-c", "foo=3")) == ["foo.1", "foo.2", "foo.3"]


def test_expand_processes_name_concurrency_multiple(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_name_concurrency_multiple"""
    got = environments(tmp_path, FIVE, "-c", "foo=3,bar=2")
    assert sorted(got) == ["bar.1", "bar.2", "foo.1", "foo.2", "foo.3"]


def test_expand_processes_command(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_command"""
    got, _ = started(tmp_path, "foo: echo some command\n")
    assert got["foo.1"][0] == "echo some command"


def test_expand_processes_port_not_defaulted(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_port_not_defaulted

    expand_processes alone sets no PORT, but `honcho start` always passes one (its
    default port, 5000), so end to end both set PORT=5000.
    """
    assert environments(tmp_path, f"foo: {PY} 1\n")["foo.1"]["PORT"] == "5000"


def test_expand_processes_port(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_port"""
    assert environments(tmp_path, f"foo: {PY} 1\n", "-p", "8000")["foo.1"]["PORT"] == "8000"


def test_expand_processes_port_multiple(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_port_multiple"""
    got = environments(tmp_path, TWO, "-p", "8000")
    assert (got["foo.1"]["PORT"], got["bar.1"]["PORT"]) == ("8000", "8100")


def test_expand_processes_port_from_env(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_port_from_env"""
    got = environments(tmp_path, TWO, dotenv="PORT=8000\n")
    assert (got["foo.1"]["PORT"], got["bar.1"]["PORT"]) == ("8000", "8100")


def test_expand_processes_port_from_env_coerced_to_number(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_port_from_env_coerced_to_number"""
    assert environments(tmp_path, f"foo: {PY} 1\n", dotenv="PORT=5000\n")["foo.1"]["PORT"] == "5000"


def test_expand_processes_port_from_env_overrides(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_port_from_env_overrides

    CHOICE: -p wins over PORT in .env, as foreman has it (and as honcho's own
    test_port_precedence says of its options); `honcho start -p 8000` with PORT=5000 in
    .env runs on 5000, because expand_processes lets the .env PORT override the port.
    """
    assert environments(tmp_path, f"foo: {PY} 1\n", "-p", "8000", dotenv="PORT=5000\n")["foo.1"]["PORT"] == "8000"


def test_expand_processes_port_concurrency(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_port_concurrency"""
    got = environments(tmp_path, FIVE, "-c", "foo=3,bar=2", "-p", "4000")
    ports = {name: env["PORT"] for name, env in got.items()}
    assert ports == {"foo.1": "4000", "foo.2": "4001", "foo.3": "4002", "bar.1": "4100", "bar.2": "4101"}


def test_expand_processes_quiet(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_quiet

    CHOICE (proctree's, documented): a -q name that is not an entry ('bar' here) is refused,
    where honcho ignores it: a typo would otherwise hide nothing, silently. With the
    entry's name alone, the entry is quiet.
    """
    (tmp_path / "show.py").write_text(SHOW_ENV)
    (tmp_path / "Procfile").write_text(f"foo: {PY} 1\n")
    r = up(tmp_path, "-q", "foo,bar")
    assert r.returncode == 2 and "'bar': not an entry" in r.stderr
    assert environments(tmp_path, f"foo: {PY} 1\n", "-q", "foo") == {}


def test_expand_processes_quiet_multiple(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_quiet_multiple"""
    assert list(environments(tmp_path, TWO, "-q", "foo")) == ["bar.1"]


def test_expand_processes_env(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_env"""
    env = environments(tmp_path, f"foo: {PY} 1\n", dotenv="ANIMAL=giraffe\nDEBUG=false\n")["foo.1"]
    assert (env["ANIMAL"], env["DEBUG"]) == ("giraffe", "false")


def test_expand_processes_env_multiple(tmp_path):
    """honcho: tests/test_environ.py::test_expand_processes_env_multiple"""
    got = environments(tmp_path, TWO, dotenv="ANIMAL=giraffe\nDEBUG=false\n")
    for name in ("foo.1", "bar.1"):
        assert (got[name]["ANIMAL"], got[name]["DEBUG"]) == ("giraffe", "false")


def test_set_env_process_name(tmp_path):
    """honcho: tests/test_environ.py::test_set_env_process_name"""
    got = environments(tmp_path, FIVE, "-c", "foo=3,bar=2")
    assert {name: env["HONCHO_PROCESS_NAME"] for name, env in got.items()} == {n: n for n in got}
    assert len(got) == 5
