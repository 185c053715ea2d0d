"""`proctree up` in a real terminal: tmux on a private socket runs it in a pseudo-terminal.

There its name prefixes are coloured and a service's own colours come
through; with NO_COLOR they are not. Ctrl+C is typed into the pane
(`send-keys C-c`), so the terminal sends SIGINT to the pane's foreground
process group, the way a user's Ctrl+C does: up stops everything, says so,
exits 130, and the ports are free. The tmux server is ours alone (-S on a
socket in a fresh folder) and is killed in the fixture's finalizer.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

import proctree
from support.ports import answers, free_base

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
TMUX = shutil.which("tmux")
PY = shlex.quote(sys.executable)

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (.ci/apt-packages installs it)")

SERVER = f"{PY} -m http.server $PORT --bind 127.0.0.1"


class Tmux:
    def __init__(self, folder):
        self.sock = os.path.join(folder, "sock")  # a short path: sockets have a 108-byte limit

    def __call__(self, *args, check=True):
        return subprocess.run(
            [TMUX, "-S", self.sock, *args], capture_output=True, text=True, timeout=20, check=check, env=self.env
        )

    def start(self, command, environ):
        self.env = environ
        # sh traps INT (a handler, reset on exec: up gets the default) so that it lives on to report up's status.
        pane = f"trap true INT; {command}; echo EXIT=$?; sleep 600"
        self("new-session", "-d", "-s", "up", "-x", "200", "-y", "60", "sh", "-c", pane)

    def screen(self):
        return self("capture-pane", "-p", "-e", "-J", "-t", "up", "-S", "-200").stdout

    def wait_for(self, pattern, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if re.search(pattern, text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"no {pattern!r} on the screen:\n{text}")
            time.sleep(0.1)


@pytest.fixture
def tmux():
    folder = tempfile.mkdtemp(prefix="pt-tmux-")
    t = Tmux(folder)
    t.env = dict(os.environ)
    try:
        yield t
    finally:
        t("kill-server", check=False)
        shutil.rmtree(folder, ignore_errors=True)


def environ(**extra):
    out = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "TERM": "xterm-256color"}
    out.pop("NO_COLOR", None)
    out.update(extra)
    return out


def procfile(folder):
    (folder / "Procfile").write_text(
        f"web: {SERVER}\nworker: printf '\\033[31mred\\033[0m plain\\n'; while :; do sleep 1; done\n"
        f"daemon: setsid {PY} -m http.server $PORT --bind 127.0.0.1 </dev/null >/dev/null 2>&1 & sleep 300\n"
    )


def up_command(folder, base):
    return f"{PY} -m proctree up -f {shlex.quote(str(folder / 'Procfile'))} -p {base} --grace 1"


def test_coloured_in_a_terminal_and_ctrl_c_leaves_nothing(tmp_path, tmux):
    base = free_base()
    procfile(tmp_path)
    tmux.start(up_command(tmp_path, base), environ())
    screen = tmux.wait_for(r"web\.1 ready at http://127\.0\.0\.1:\d+/")
    tmux.wait_for(r"red\x1b\[(0|39)?m plain")
    deadline = time.monotonic() + 20
    while not answers(base + 200) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert answers(base) and answers(base + 200)
    screen = tmux.screen()
    # The prefixes are coloured (foreman's cyan for the first entry, yellow for the second) ...
    assert re.search(r"\x1b\[36m\d\d:\d\d:\d\d web\.1 +\|", screen), screen
    assert re.search(r"\x1b\[33m\d\d:\d\d:\d\d worker\.1 +\|", screen), screen
    # ... and the service's own red comes through.
    assert "\x1b[31mred" in screen

    tmux("send-keys", "-t", "up", "C-c")
    screen = tmux.wait_for(r"EXIT=\d+")
    assert "EXIT=130" in screen
    assert "SIGINT received: stopping everything" in screen
    assert re.search(r"stopped web\.1, worker\.1, daemon\.1", screen)
    assert "nothing left running" in screen
    assert not answers(base) and not answers(base + 200)


def test_no_color_in_a_terminal(tmp_path, tmux):
    base = free_base()
    procfile(tmp_path)
    tmux.start(up_command(tmp_path, base), environ(NO_COLOR="1"))
    tmux.wait_for(r"web\.1 ready")
    screen = tmux.wait_for(r"worker\.1 +\| red plain")
    assert "\x1b[" not in screen, screen
    tmux("send-keys", "-t", "up", "C-c")
    assert "EXIT=130" in tmux.wait_for(r"EXIT=\d+")
