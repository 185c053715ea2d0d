"""Hostile input files for `proctree up`: bounded, and refused with a clear error naming the file.

A .env whose values reference each other (317 bytes asking for 42 GB), a
value over the kernel's 128 KiB bound, an environment over ARG_MAX, TOML
nested thousands deep in proctree.toml or in another tool's table of
pyproject.toml. Then a seeded fuzz of the Procfile, .env and TOML readers:
whatever the bytes, they return or raise ProcfileError, nothing else.
"""

import json
import os
import random
import resource
import subprocess
import sys

import pytest

import proctree
from proctree import ProcfileError, load_procfile
from proctree._procfile.config import load_settings
from proctree._procfile.dotenv import MAX_STRING, parse_dotenv
from proctree._procfile.procfile import parse_procfile
from proctree._procfile.tomlread import MAX_DEPTH, nesting_depth, parse_toml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))


def up(folder, *args, memory=None):
    def limit():
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "proctree", "up", "-f", str(folder / "Procfile"), *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
    )


def bomb(levels=30):
    lines = ["A=xxxxxxxxxxxxxxxx"]
    for i in range(levels):
        prev = "A" if i == 0 else f"V{i - 1}"
        lines.append(f"V{i}=${prev}${prev}${prev}${prev}")
    return "\n".join(lines) + "\n"


def test_the_expansion_bomb_is_refused_at_its_line_under_a_memory_limit(tmp_path):
    (tmp_path / "Procfile").write_text("a: echo hi\n")
    (tmp_path / ".env").write_text(bomb())
    assert len(bomb()) < 700
    done = up(tmp_path, memory=1 << 30)
    assert done.returncode == 2, done.stderr
    assert ".env:8:" in done.stderr and "128 KiB" in done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr


def test_the_bomb_under_json_is_one_error_object(tmp_path):
    (tmp_path / "Procfile").write_text("a: echo hi\n")
    (tmp_path / ".env").write_text(bomb())
    done = up(tmp_path, "--json")
    assert done.returncode == 2
    document = json.loads(done.stdout)
    assert document["ok"] is False and ".env:8:" in document["error"]["message"]


def test_a_value_over_128_kib_is_refused():
    with pytest.raises(ProcfileError, match=r"x\.env:2: .*BIG's value is \d+ bytes"):
        parse_dotenv("A=1\nBIG=" + "y" * MAX_STRING + "\n", source="x.env")
    assert len(parse_dotenv("OK=" + "y" * (MAX_STRING - 10) + "\n")["OK"]) == MAX_STRING - 10


def test_an_environment_over_arg_max_is_refused():
    arg_max = os.sysconf("SC_ARG_MAX")
    if arg_max > 64 << 20:
        pytest.skip(f"ARG_MAX is {arg_max} here")
    chunk = "z" * 1000
    lines = [f"A={chunk}", "B=" + "$A" * 120]  # B: 120 KB
    count = arg_max // 120_000 + 2
    lines += [f"C{i}=$B" for i in range(count)]
    with pytest.raises(ProcfileError, match=r"e\.env:\d+: .*ARG_MAX"):
        parse_dotenv("\n".join(lines) + "\n", source="e.env")


DEEP = "x = " + "[" * 50_000 + "]" * 50_000 + "\n"


@pytest.mark.parametrize("json_mode", [False, True])
@pytest.mark.parametrize(
    "filename, text",
    [
        ("proctree.toml", DEEP),
        ("pyproject.toml", "[tool.black]\n" + DEEP.replace("x = ", "opts = ")),
        ("pyproject.toml", "[tool.other]\nx = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n"),
    ],
)
def test_deep_toml_is_refused_naming_the_file(tmp_path, filename, text, json_mode):
    (tmp_path / "Procfile").write_text("a: echo hi\n")
    (tmp_path / filename).write_text(text)
    with pytest.raises(ProcfileError, match=f"{filename}:\\d+: nested more than"):
        load_procfile(tmp_path / "Procfile")
    done = up(tmp_path, *(["--json"] if json_mode else []))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    if json_mode:
        document = json.loads(done.stdout)
        assert filename in document["error"]["message"]
    else:
        assert filename in done.stderr


def test_deep_dotted_keys_are_refused_too():
    text = "a" + ".a" * (MAX_DEPTH + 5) + " = 1\n"
    with pytest.raises(ProcfileError, match="nested more than"):
        parse_toml(text, "proctree.toml")


@pytest.mark.parametrize(
    "text, depth",
    [
        ("a = [1, [2, [3]]]\n", 3),
        ('a = "[[[["\n', 0),
        ("a = '[[[['\n", 0),
        ('a = """\n[[[\n"""\n', 0),
        ("# [[[[[\n", 0),
        ("[tool.x]\nb = {c = [1]}\n", 2),
        ('a = "\\"[["\n', 0),
    ],
)
def test_nesting_depth_scan(text, depth):
    assert nesting_depth(text) == (depth, 0)


# --- fuzzing (a seeded corpus: the same cases on every run) -------------------------------------

PIECES = [
    "\0",
    "\n",
    "\r\n",
    "#",
    "=",
    ":",
    "'",
    '"',
    '"""',
    "$",
    "${",
    "}",
    "[",
    "]",
    "{",
    "}",
    "\\",
    "web",
    "é",
    "名前",
    "\U0001f600",
    "export ",
    "A",
    "B=$A$A",
    " ",
    "\t",
    "[services.web]",
    "ready = ",
    "depends_on = {",
    "x.y.z",
    "a = 1\na = 2\n",
    "web: x\nweb: y\n",
    "\ufeff",
    "\x7f",
    "\udc80",
]


def corpus(seed, count=400):
    rng = random.Random(seed)
    for _ in range(count):
        parts = [rng.choice(PIECES) for _ in range(rng.randint(0, 40))]
        if rng.random() < 0.1:
            parts.append(rng.choice("[{") * rng.randint(100, 20000))
        if rng.random() < 0.05:
            parts.append("K=" + "v" * rng.randint(1, 300_000))
        yield "".join(parts)


def only_procfile_errors(read, text):
    try:
        read(text)
    except ProcfileError:
        pass


def test_fuzz_the_procfile_reader():
    for text in corpus(1):
        only_procfile_errors(parse_procfile, text)


def test_fuzz_the_dotenv_reader():
    for text in corpus(2):
        only_procfile_errors(lambda t: parse_dotenv(t, base={"A": "a" * 1000}), text)


def test_fuzz_the_toml_reader():
    for text in corpus(3):
        only_procfile_errors(lambda t: parse_toml(t, "proctree.toml"), text)


def test_fuzz_whole_folders(tmp_path):
    """Random bytes as Procfile, .env and proctree.toml together: load_procfile() only raises ProcfileError."""
    rng = random.Random(4)
    for i, text in enumerate(corpus(5, 60)):
        folder = tmp_path / str(i)
        folder.mkdir()
        (folder / "Procfile").write_bytes(("web: echo hi\n" if i % 2 else text).encode("utf-8", "surrogatepass"))
        (folder / ".env").write_bytes(rng.choice([text, "A=1\n"]).encode("utf-8", "surrogatepass"))
        (folder / "proctree.toml").write_bytes(rng.choice([text, ""]).encode("utf-8", "surrogatepass"))
        try:
            load_procfile(folder / "Procfile")
        except ProcfileError:
            pass
        try:
            load_settings(str(folder))
        except ProcfileError:
            pass
