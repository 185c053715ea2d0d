"""A "second stop signal forces" server, for the one-stop-signal tests.

It drains for about half a second on its first stop signal and exits 3 on a
second one, as Node's process.once('SIGTERM'), gunicorn and uvicorn do, and
writes what happens to a log: "ready <pid>" once its handler is in place,
then the name of every stop signal it gets, then "drained" (or "forced").
Run behind a shell wrapper, the shell's exit makes every path that ends a
tree meet on it.
"""

import os
import sys
import time

# argv: LOG SIGNAL-NAME (or IGNORE: SIGTERM ignored, nothing handled)
SERVER = r"""
import os, signal, sys, time
log, name = sys.argv[1], sys.argv[2]
got = []

def note(text):
    with open(log, "a") as f:
        f.write(text + "\n")

def on_stop(signum, frame):
    got.append(signum)
    note(signal.Signals(signum).name)
    if len(got) > 1:
        note("forced")
        os._exit(3)

if name == "IGNORE":  # a server that ignores SIGTERM: only the kill ends it
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note("ready %d" % os.getpid())
    time.sleep(300)
    sys.exit(0)
signal.signal(getattr(signal, name), on_stop)
note("ready %d" % os.getpid())
while not got:
    signal.pause()
end = time.monotonic() + 0.5
while time.monotonic() < end:
    time.sleep(0.01)
note("drained")
sys.exit(0)
"""


def write_server(folder):
    path = os.path.join(str(folder), "server.py")
    with open(path, "w") as f:
        f.write(SERVER)
    return path


def shell_line(server, log, name="SIGTERM"):
    """The server behind sh: `; true` keeps the shell as a wrapper (a lone command would be exec'ed in its place)."""
    return f"{sys.executable} {server} {log} {name}; true"


def read_log(log):
    try:
        with open(log) as f:
            return f.read().split("\n")[:-1]
    except FileNotFoundError:
        return []


def wait_ready(log, timeout=20.0):
    """The server's pid, once its log says it is ready (its own report, never a guess)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = read_log(log)
        if lines and lines[0].startswith("ready "):
            return int(lines[0].split()[1])
        time.sleep(0.01)
    raise AssertionError(f"the server never said it was ready: {read_log(log)}")


def events(log):
    """What the server heard after it was ready: signal names, then drained or forced."""
    return read_log(log)[1:]


def wait_events(log, want, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = events(log)
        if got[-1:] in (["drained"], ["forced"]) or len(got) >= len(want):
            return got
        time.sleep(0.01)
    return events(log)
