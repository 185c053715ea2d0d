"""`proctree up` never loses a line: a file, many entries at once, and a reader slower than the services.

When the output is slower than a service, up stops reading that service's
pipe (it blocks in its write, as under foreman) instead of skipping rows.
Each entry prints numbered lines with seq; every number must arrive, in
order per entry. The suite's fixture checks nothing is left running.
"""

import os
import re
import subprocess
import sys
import time

import proctree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
LINE = re.compile(r"^(\S+)\s+\| (.*)$")


def env():
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "NO_COLOR": "1"}


def up_command(folder):
    return [sys.executable, "-m", "proctree", "up", "--no-timestamp", "-f", str(folder / "Procfile")]


def rows_by_entry(text):
    out = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m and m.group(1) != "system":
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


def check_all_arrived(text, counts):
    assert "skipped" not in text
    rows = rows_by_entry(text)
    assert sorted(rows) == sorted(counts), sorted(rows)
    for name, count in counts.items():
        got = rows[name]
        assert len(got) == count, (name, len(got))
        assert got == [str(i) for i in range(1, count + 1)], name  # in order, none twice


def test_a_million_lines_from_one_entry_to_a_file(tmp_path):
    (tmp_path / "Procfile").write_text("a: seq 1 1000000\n")
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        done = subprocess.run(
            up_command(tmp_path), cwd=tmp_path, env=env(), stdout=f, stderr=subprocess.PIPE, timeout=300
        )
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    check_all_arrived(out.read_text(), {"a.1": 1_000_000})


def test_sixteen_entries_of_100k_lines_each(tmp_path):
    names = [f"e{i:02d}" for i in range(16)]
    # Each waits a moment so that all sixteen print at once; can_die would need settings: the last ends the run.
    (tmp_path / "Procfile").write_text("".join(f"{n}: sleep 0.5; seq 1 100000; sleep 30\n" for n in names))
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        proc = subprocess.Popen(up_command(tmp_path), cwd=tmp_path, env=env(), stdout=f, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                time.sleep(0.5)
                if out.read_text().count("| 100000\n") == 16:
                    break
            proc.send_signal(2)  # SIGINT: up stops everything
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, err
    check_all_arrived(out.read_text(), {f"{n}.1": 100_000 for n in names})


SLOW_READER = (
    "import os, sys, time\n"
    "total = 0\n"
    "with open(sys.argv[1], 'wb') as out:\n"
    "    while True:\n"
    "        data = os.read(0, 4096)\n"
    "        if not data: break\n"
    "        out.write(data)\n"
    "        time.sleep(0.0005)\n"
)


def test_a_reader_slower_than_the_service_gets_every_line(tmp_path):
    """up | a reader taking ~8 MB/s: the service is held back, nothing is skipped."""
    (tmp_path / "Procfile").write_text("a: seq 1 300000\n")
    out = tmp_path / "out.txt"
    reader = subprocess.Popen([sys.executable, "-c", SLOW_READER, str(out)], stdin=subprocess.PIPE)
    try:
        done = subprocess.run(
            up_command(tmp_path), cwd=tmp_path, env=env(), stdout=reader.stdin, stderr=subprocess.PIPE, timeout=300
        )
    finally:
        reader.stdin.close()
        reader.wait(timeout=120)
    assert done.returncode == 0, done.stderr
    check_all_arrived(out.read_text(), {"a.1": 300_000})


def test_sigint_ends_up_at_once_under_a_hostile_printer(tmp_path):
    """An entry naming, forever, ports whose accept queue is full: Ctrl+C still ends the run within the grace."""
    import signal
    import socket

    listeners, clients = [], []
    try:
        for _ in range(8):
            server = socket.socket()
            server.bind(("127.0.0.1", 0))
            server.listen(0)
            listeners.append(server)
            for _ in range(4):
                client = socket.socket()
                client.setblocking(False)
                client.connect_ex(server.getsockname())
                clients.append(client)
        ports = [s.getsockname()[1] for s in listeners]
        printer = tmp_path / "printer.py"
        printer.write_text(
            "import itertools, sys\n"
            f"ports = {ports!r}\n"
            "for i in itertools.count():\n"
            "    print(f'Listening on http://127.0.0.1:{ports[i % len(ports)]}/', flush=i % 100 == 0)\n"
        )
        (tmp_path / "Procfile").write_text(f"hostile: {sys.executable} {printer}\n")
        with open(tmp_path / "out.txt", "w") as out:
            proc = subprocess.Popen(up_command(tmp_path) + ["--grace", "2"], cwd=tmp_path, env=env(), stdout=out)
            try:
                time.sleep(3)
                t0 = time.monotonic()
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=30)
                took = time.monotonic() - t0
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        assert proc.returncode == 130
        assert took < 10, took
        text = (tmp_path / "out.txt").read_text()
        assert "ready" not in text.replace("already", "")
        assert text.count("hostile.1 |") > 1000
    finally:
        for s in clients + listeners:
            s.close()
