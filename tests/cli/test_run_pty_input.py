"""`proctree run` on a terminal: what the user typed before it started, and the user's echo setting.

The test is the user's terminal: a pty it opens, whose slave is `proctree
run`'s stdin, stdout and stderr (so the run gives its command a pty of its
own and relays). Keys are written to the master, the screen read from it.
"""

import os
import select
import subprocess
import sys
import termios
import time

import pytest

import proctree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the relay is tested on Linux")


@pytest.fixture
def terminal():
    """(master, start): start(argv) runs `proctree run ARGV` on the terminal's slave; ended by the fixture."""
    master, slave = os.openpty()
    procs = []

    def start(*argv):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        p = subprocess.Popen(
            [sys.executable, "-m", "proctree", "run", "--", *argv],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            env=env,
        )
        procs.append(p)
        return p

    try:
        yield master, slave, start
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()  # the run's keeper ends its command (owner death)
            p.wait()
        os.close(master)
        os.close(slave)


def screen_until_exit(master, proc, timeout=20.0):
    """Everything shown on the terminal until proc exits (then what is left in the pty): (text, returncode)."""
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            try:
                out += os.read(master, 65536)
            except OSError:
                break
        elif proc.poll() is not None:
            break
    return out.decode(errors="replace"), proc.poll()


def test_a_ctrl_d_typed_before_the_run_started_ends_the_commands_input(terminal):
    master, _, start = terminal
    os.write(master, b"hello\n\x04")  # typed while the run starts: in the terminal's line buffer, end-of-file last
    proc = start("cat")
    text, rc = screen_until_exit(master, proc)
    assert rc == 0, text  # cat saw end-of-file, not a NUL byte, and exited
    assert "hello" in text


def test_text_typed_ahead_without_enter_still_arrives(terminal):
    master, _, start = terminal
    os.write(master, b"first\npartial")  # a whole line, then one not ended yet
    proc = start("sh", "-c", 'read a; read b; echo "got:$a:$b"')
    time.sleep(0.5)
    os.write(master, b"\n")
    text, rc = screen_until_exit(master, proc)
    assert rc == 0, text
    assert "got:first:partial" in text


def test_the_users_echo_setting_holds_on_the_commands_terminal(terminal):
    master, slave, start = terminal
    attrs = termios.tcgetattr(slave)
    attrs[3] &= ~termios.ECHO  # the user ran `stty -echo`
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    proc = start("sh", "-c", 'read a; echo "got:$a"')
    time.sleep(0.5)
    os.write(master, b"secret\n")
    text, rc = screen_until_exit(master, proc)
    assert rc == 0, text
    assert "got:secret" in text
    assert text.count("secret") == 1, text  # not echoed back by the command's terminal
