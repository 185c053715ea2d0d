"""`proctree up` with the options honcho users type: -q NAMES, --no-prefix, -d DIR, --no-colour.

Each test runs `python -m proctree up` on a Procfile whose first entry ends
by itself after a moment (foreman's rule then stops the rest), so a run is
finite and its whole output can be compared. The --no-colour test runs up on
a pseudo-terminal, where it would otherwise colour the names.
"""

import os
import pty
import shlex
import signal
import subprocess
import sys

import pytest

import proctree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
PY = shlex.quote(sys.executable)
# web prints, then ends the run after worker has had time to print too.
TWO = "web: echo web says hi; sleep 1\nworker: echo worker says hi; sleep 300\n"


def environ(**extra):
    out = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out.pop("NO_COLOR", None)
    out.update(extra)
    return out


def up(folder, *args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "proctree", "up", "--grace", "1", *args],
        cwd=str(folder),
        env=environ(),
        capture_output=True,
        text=True,
        timeout=60,
        **kw,
    )


def test_q_names_hides_those_entries_output_but_not_their_news(tmp_path):
    (tmp_path / "Procfile").write_text(TWO)
    r = up(tmp_path, "-q", "worker")
    assert r.returncode == 0, r.stderr
    assert "web says hi" in r.stdout
    assert "worker says hi" not in r.stdout
    assert "worker.1 started" in r.stdout  # honcho too still says it started


def test_q_takes_instance_names_and_lists(tmp_path):
    (tmp_path / "Procfile").write_text(TWO)
    r = up(tmp_path, "-q", "web,worker.1")
    assert r.returncode == 0, r.stderr
    assert "says hi" not in r.stdout


def test_bare_q_keeps_proctree_meaning_the_entries_output_only(tmp_path):
    (tmp_path / "Procfile").write_text(TWO)
    r = up(tmp_path, "--no-timestamp", "-q")
    assert r.returncode == 0, r.stderr
    # The two entries print at once: their order is not up's to keep.
    assert sorted(r.stdout.splitlines()) == ["web.1    | web says hi", "worker.1 | worker says hi"]


@pytest.mark.parametrize(
    "value, words",
    [("nope", "-q: 'nope': not an entry of the Procfile (entries: web, worker)"), ("web,", "-q: an empty name")],
)
def test_q_with_an_unknown_or_empty_name_is_refused_before_anything_starts(tmp_path, value, words):
    (tmp_path / "Procfile").write_text(TWO)
    r = up(tmp_path, "-q", value)
    assert r.returncode == 2
    assert words in r.stderr
    assert r.stdout == ""


def test_no_prefix_prints_bare_lines(tmp_path):
    (tmp_path / "Procfile").write_text("web: echo web says hi\n")
    r = up(tmp_path, "--no-prefix")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "web says hi" in lines
    assert any(line.startswith("web.1 started (pid=") for line in lines)
    assert not any("|" in line for line in lines)


def test_app_root_reads_the_procfile_and_env_from_it(tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "Procfile").write_text("web: echo $GREETING\n")
    (app / ".env").write_text("GREETING=hello from app\n")
    (app / "other.env").write_text("GREETING=hello from other\n")
    r = up(tmp_path, "-d", "app", "--no-prefix")
    assert r.returncode == 0, r.stderr
    assert "hello from app" in r.stdout.splitlines()
    r = up(tmp_path, "--app-root", "app", "-e", "other.env", "--no-prefix")
    assert "hello from other" in r.stdout.splitlines(), r.stderr
    r = up(tmp_path, "-d", "nowhere")
    assert r.returncode == 2 and "nowhere/Procfile: no such Procfile" in r.stderr


def on_a_terminal(folder, *args):
    """up's output as a terminal receives it (colours are for terminals only)."""
    main, sub = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proctree", "up", *args],
            cwd=str(folder),
            env=environ(TERM="xterm"),
            stdin=subprocess.DEVNULL,
            stdout=sub,
            stderr=subprocess.PIPE,
        )
        os.close(sub)
        sub = -1
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: every writer is gone
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(60) == 0, proc.stderr.read()
        proc.stderr.close()
        return b"".join(chunks).decode()
    finally:
        os.close(main)
        if sub >= 0:
            os.close(sub)


@pytest.mark.parametrize("flag", ["--no-colour", "--no-color"])
def test_no_colour_on_a_terminal(tmp_path, flag):
    (tmp_path / "Procfile").write_text("web: echo web says hi\n")
    assert "\x1b[" in on_a_terminal(tmp_path)  # the control: coloured there by default
    text = on_a_terminal(tmp_path, flag)
    assert "web says hi" in text and "\x1b[" not in text


def test_help_names_the_honcho_options():
    r = subprocess.run(
        [sys.executable, "-m", "proctree", "up", "--help"], env=environ(), capture_output=True, text=True, timeout=60
    )
    # argparse 3.13 writes "-q, --quiet [NAMES]" where earlier versions wrote "-q [NAMES], --quiet [NAMES]".
    for option in ("--quiet [NAMES]", "--no-prefix", "--app-root DIR", "--no-colour, --no-color"):
        assert option in r.stdout


def test_a_misused_option_gets_up_s_own_usage(tmp_path):
    r = up(tmp_path, "-d")
    assert r.returncode == 2
    assert r.stderr.startswith("usage: proctree up ")


@pytest.mark.parametrize("args, sent", [([], "SIGTERM"), (["--stop-signal", "INT"], "SIGINT")])
def test_honcho_s_started_and_sending_lines(tmp_path, args, sent):
    (tmp_path / "Procfile").write_text("web: echo up; sleep 300\nworker: echo up; sleep 300\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctree", "up", "--no-prefix", "--grace", "1", *args],
        cwd=str(tmp_path),
        env=environ(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = {}
        while len(started) < 2:  # both started lines (their order is the supervisor's)
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            if " started (pid=" in line:
                name, _, pid = line.rstrip(")\n").partition(" started (pid=")
                started[name] = pid
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    for name, pid in started.items():
        assert f"sending {sent} to {name} (pid {pid})" in out.splitlines()
