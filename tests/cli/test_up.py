"""`proctree up` on real Procfiles: ready lines, prefixed output, foreman's exit rules, signals, nothing left.

Each test writes a Procfile into its own folder, runs `python -m proctree up`
on it with a base port (-p) whose ports are free, and reads its output line by
line as it comes. Through a pipe the output is plain; the coloured output is
checked in a real terminal in test_up_tty.py. After every test the suite's
fixture fails it if any process it started (up, a service, a daemon a service
started) is still running; the tests also check the ports are free again.
"""

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

import proctree
from support.ports import answers, free_base
from support.stubborn import survives_polite_signals_sh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(proctree.__file__)))
PY = shlex.quote(sys.executable)
# A server that says where it listens (the URL up reads), as `python -m http.server` does.
SERVER = f"{PY} -m http.server $PORT --bind 127.0.0.1"
STUBBORN = survives_polite_signals_sh(say="ignoring polite signals")


def env(**extra):
    out = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out.pop("NO_COLOR", None)
    out.update(extra)
    return out


class Up:
    """A running `proctree up`: its output lines as they arrive, its exit status."""

    def __init__(self, folder, *args, environ=None, stdout=subprocess.PIPE, launcher=("-m", "proctree", "up")):
        self.proc = subprocess.Popen(
            [sys.executable, *launcher, "-f", str(folder / "Procfile"), *args],
            cwd=str(folder),
            env=environ or env(),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
        self.lines = []
        self.hang_up = threading.Event()
        self.changed = threading.Condition()
        self.readers = [threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)]
        self.readers[0].start()

    def _read(self, stream):
        for line in stream:
            if self.hang_up.is_set():
                stream.close()  # like `proctree up | head`: the reader goes away
                break
            with self.changed:
                self.lines.append(line.rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, pattern, timeout=30):
        """The first line matching pattern (a regex), waiting for it."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for line in self.lines:
                    if regex.search(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.readers[0].is_alive()):
                    shown = "\n".join(line[:300] for line in self.lines[-200:])
                    raise AssertionError(f"no line matching {pattern!r} in:\n{shown}{self.stderr()}")
                self.changed.wait(min(left, 0.2))

    def stderr(self):
        if self.proc.poll() is None:
            return ""
        return "\nstderr:\n" + self.proc.stderr.read()

    def signal(self, sig):
        self.proc.send_signal(sig)

    def finish(self, timeout=30):
        code = self.proc.wait(timeout)
        self.readers[0].join(10)
        return code

    def text(self):
        with self.changed:
            return "\n".join(self.lines)


@pytest.fixture
def ups():
    """Every `proctree up` a test starts: SIGKILLed if still running (its trees' keepers end the rest)."""
    made = []
    yield made
    for u in made:
        if u.proc.poll() is None:
            u.proc.kill()
        u.proc.wait()
        for f in (u.proc.stdout, u.proc.stderr):
            if f:
                f.close()


def start(ups, folder, *args, **kw):
    u = Up(folder, *args, **kw)
    ups.append(u)
    return u


def procfile(folder, text, **files):
    (folder / "Procfile").write_text(text)
    for name, body in files.items():
        (folder / name.replace("_", ".")).write_text(body)


# -- the scenario of the issue ---------------------------------------------------


def test_two_webs_worker_daemon_and_term_ignorer_then_ctrl_c(tmp_path, ups):
    base = free_base()
    procfile(
        tmp_path,
        f"""\
# two web servers (-m web=2), a worker, a daemon, one that ignores the polite signals
web: {SERVER}
worker: {PY} -c 'import os, time; print("working as", os.environ["PROCTREE_SERVICE"], "port", os.environ["PORT"], flush=True); time.sleep(300)'
daemon: setsid {PY} -m http.server $PORT --bind 127.0.0.1 </dev/null >/dev/null 2>&1 & echo daemon started; while :; do sleep 1; done
stubborn: {STUBBORN}
colours: printf '\\033[31mred\\033[0m plain\\n'; sleep 300
""",
    )
    u = start(ups, tmp_path, "-m", "web=2", "-p", str(base), "--grace", "1")
    u.wait_for(rf"system +\| web\.1 ready at http://127\.0\.0\.1:{base}/")
    u.wait_for(rf"system +\| web\.2 ready at http://127\.0\.0\.1:{base + 1}/")
    u.wait_for(rf"worker\.1 +\| working as worker\.1 port {base + 100}$")
    u.wait_for(r"daemon\.1 +\| daemon started")
    u.wait_for(r"stubborn\.1 +\| ignoring polite signals")
    u.wait_for(r"colours\.1 +\| red plain$")
    deadline = time.monotonic() + 20
    while not answers(base + 200) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert answers(base) and answers(base + 1) and answers(base + 200)

    u.signal(signal.SIGINT)
    assert u.finish() == 130
    text = u.text()
    assert "SIGINT received: stopping everything" in text
    stopped = u.wait_for(r"system +\| stopped ")
    for name in ("web.1", "web.2", "worker.1", "daemon.1", "stubborn.1", "colours.1"):
        assert name in stopped
    assert u.lines[-1].endswith("| nothing left running")
    for port in (base, base + 1, base + 200):
        assert not answers(port), port
    # Plain through a pipe: no escape sequence at all, the service's own colours stripped.
    assert "\x1b" not in text
    # Every prefix is aligned: the '|' sits in the same column on every line.
    columns = {line.index(" | ") for line in u.lines if " | " in line}
    assert len(columns) == 1, u.lines


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_signal_statuses(tmp_path, ups, sig, code):
    base = free_base()
    procfile(tmp_path, f"web: {SERVER}\n")
    u = start(ups, tmp_path, "-p", str(base), "-t", "1", "--no-timestamp")  # -t: foreman's --grace
    u.wait_for(r"web\.1 ready")
    u.signal(sig)
    assert u.finish() == code
    assert f"system | {signal.Signals(sig).name} received: stopping everything (grace 1 s)" in u.text()
    assert not answers(base)


def test_second_ctrl_c_kills_at_once(tmp_path, ups):
    procfile(tmp_path, f"stubborn: {STUBBORN}\n")
    u = start(ups, tmp_path, "-p", str(free_base()), "--grace", "60")
    u.wait_for(r"stubborn\.1 +\| ignoring polite signals")
    u.signal(signal.SIGINT)
    u.wait_for(r"stopping everything \(grace 60 s\)")
    t0 = time.monotonic()
    u.signal(signal.SIGINT)
    assert u.finish(timeout=30) == 130
    assert time.monotonic() - t0 < 20  # not the 60 s grace
    u.wait_for("ending everything now")
    assert u.lines[-1].endswith("nothing left running")


# -- foreman's exit rules -----------------------------------------------------------


def test_one_entry_ending_stops_the_rest_with_its_status(tmp_path, ups):
    base = free_base()
    procfile(tmp_path, f"web: {SERVER}\nquick: sleep 0.5; echo bye; exit 4\n")
    u = start(ups, tmp_path, "-p", str(base), "--grace", "1", "--no-timestamp")
    assert u.finish() == 4
    text = u.text()
    assert "quick.1 | bye" in text
    # The end that stops the run is said once: its own line, then the stop without it again.
    assert "system  | quick.1 exited with code 4\n" in text and "system  | stopping everything (grace 1 s)" in text
    assert text.count("exited with code 4") == 1
    assert re.search(r"stopped web\.1\b", text)
    assert not answers(base)


def test_a_signal_death_ends_the_run_with_128_plus_n(tmp_path, ups):
    procfile(tmp_path, "web: sleep 300\nkilled: kill -KILL $$\n")
    u = start(ups, tmp_path, "-p", str(free_base()), "--grace", "1")
    assert u.finish() == 128 + signal.SIGKILL
    assert "killed.1 was ended by SIGKILL" in u.text()


def test_an_entry_whose_keeper_is_killed_ends_the_run_as_a_failure(tmp_path, ups):
    """An OOM kill of web.1's keeper: foreman's rule applies (the rest stops, status 1), in one clear line."""
    from proctree._containment import byidentity as _byidentity

    procfile(tmp_path, "web: echo keeper=$PPID; exec sleep 300\nworker: sleep 300\n")
    u = start(ups, tmp_path, "-p", str(free_base()), "--grace", "1", "--no-timestamp")
    line = u.wait_for(r"web\.1 +\| keeper=\d+")
    keeper = proctree.proc(int(line.rsplit("=", 1)[1]))
    assert keeper.ppid == u.proc.pid and keeper.name == "proctree-keeper", keeper  # checked, then by pid + start time
    assert _byidentity.signal_member(keeper, signal.SIGKILL) == "sent"
    assert u.finish() == 1
    text = u.text()
    assert re.search(r"web\.1 failed: its keeper \(pid \d+\) was killed by SIGKILL.*tree was ended", text), text
    assert "stopped worker.1" in text and "nothing left running" in text
    err = u.proc.stderr.read()
    assert "Traceback" not in err and "never retrieved" not in err, err


def test_can_die_entry_does_not_stop_the_rest(tmp_path, ups):
    base = free_base()
    procfile(
        tmp_path,
        f"web: {SERVER}\nonce: echo did my thing; exit 3\n",
        proctree_toml="[services.once]\ncan_die = true\n",
    )
    u = start(ups, tmp_path, "-p", str(base), "--grace", "1")
    u.wait_for(r"once\.1 exited with code 3")
    u.wait_for(r"web\.1 ready")
    time.sleep(0.5)
    assert u.proc.poll() is None and answers(base)
    u.signal(signal.SIGTERM)
    assert u.finish() == 143


def test_every_entry_may_die(tmp_path, ups):
    procfile(
        tmp_path,
        "a: exit 0\nb: exit 5\n",
        proctree_toml="[services.a]\ncan_die = true\n[services.b]\ncan_die = true\n",
    )
    u = start(ups, tmp_path, "-p", str(free_base()))
    assert u.finish() == 0
    assert "every entry has ended" in u.text()


@pytest.mark.parametrize("round_", range(3))
def test_an_entry_that_must_not_die_is_not_passed_over(tmp_path, ups, round_):
    """a (can_die) and b end at once: b's status ends the run, never "every entry has ended"."""
    procfile(tmp_path, "a: exit 0\nb: exit 5\n", proctree_toml="[services.a]\ncan_die = true\n")
    u = start(ups, tmp_path, "-p", str(free_base()))
    assert u.finish() == 5
    assert "every entry has ended" not in u.text()


def test_completed_dependency_then_service(tmp_path, ups):
    """A migration that exits 0 is its job done, not the end of the run; web starts after it."""
    base = free_base()
    procfile(
        tmp_path,
        f"migrate: sleep 0.3; echo migrated > {tmp_path}/migrated\nweb: cat {tmp_path}/migrated && {SERVER}\n",
        proctree_toml='[services.web]\ndepends_on = { migrate = "completed" }\n',
    )
    u = start(ups, tmp_path, "-p", str(base), "--grace", "1")
    u.wait_for(r"web\.1 +\| migrated")
    u.wait_for(rf"web\.1 ready at http://127\.0\.0\.1:{base + 100}/")
    assert u.proc.poll() is None
    u.signal(signal.SIGINT)
    assert u.finish() == 130


def test_failed_dependency_fails_the_run(tmp_path, ups):
    procfile(
        tmp_path,
        "migrate: exit 2\nweb: echo never\n",
        proctree_toml='[services.web]\ndepends_on = { migrate = "completed" }\n',
    )
    u = start(ups, tmp_path, "-p", str(free_base()), "--grace", "1")
    assert u.finish() == 2
    assert "web.1 | never" not in u.text()


def test_exit_with_the_tests_status(tmp_path, ups):
    base = free_base()
    check = (
        f"{PY} -c 'import urllib.request; "
        f'print(urllib.request.urlopen("http://127.0.0.1:{base}/").status, flush=True); raise SystemExit(3)\''
    )
    procfile(
        tmp_path,
        f"web: {SERVER}\ntests: {check}\n",
        proctree_toml='[services.tests]\ndepends_on = { web = "ready" }\n',
    )
    u = start(ups, tmp_path, "-p", str(base), "--grace", "1", "--exit-with", "tests")
    assert u.finish() == 3
    text = u.text()
    assert re.search(r"tests\.1 +\| 200", text)
    assert text.count("tests.1 exited with code 3") == 1 and "stopping everything (grace 1 s)" in text
    assert u.lines[-1].endswith("nothing left running")
    assert not answers(base)


def test_exit_with_zero_and_a_service_that_ends_first(tmp_path, ups):
    procfile(tmp_path, "web: sleep 300\ntests: sleep 0.3\n")
    u = start(ups, tmp_path, "-p", str(free_base()), "--exit-with", "tests")
    assert u.finish() == 0
    # The service ending first with 0 must not pass for the tests' success.
    procfile(tmp_path, "web: exit 0\ntests: sleep 300\n")
    u = start(ups, tmp_path, "-p", str(free_base()), "--grace", "1", "--exit-with", "tests")
    assert u.finish() == 1
    assert "web.1 exited with code 0 before tests ended" in u.text()


def test_names_run_a_subset(tmp_path, ups):
    procfile(tmp_path, "a: echo I am a; sleep 300\nb: echo I am b; sleep 300\n")
    u = start(ups, tmp_path, "-p", str(free_base()), "--grace", "1", "b")
    u.wait_for(r"b\.1 +\| I am b")
    u.signal(signal.SIGINT)
    assert u.finish() == 130
    assert "I am a" not in u.text()


def test_env_file_and_port_reach_the_service(tmp_path, ups):
    base = free_base()
    procfile(tmp_path, "show: echo $GREETING $PORT $PS; sleep 300\n", _env="GREETING='hello there'\n")
    u = start(ups, tmp_path, "-p", str(base), "--grace", "1")
    u.wait_for(rf"show\.1 +\| hello there {base} show\.1$")
    u.signal(signal.SIGINT)
    assert u.finish() == 130


# -- --json --------------------------------------------------------------------------


def test_json_events(tmp_path, ups):
    base = free_base()
    procfile(tmp_path, f"web: {SERVER}\n")
    u = start(ups, tmp_path, "-p", str(base), "--grace", "1", "--json")
    u.wait_for(r'"kind": "ready"')
    u.signal(signal.SIGTERM)
    assert u.finish() == 143
    docs = [json.loads(line) for line in u.lines]
    kinds = [d["kind"] for d in docs]
    assert kinds[0] == "started" and "ready" in kinds and "output" in kinds
    ready = docs[kinds.index("ready")]
    assert ready["service"]["name"] == "web.1" and ready["service"]["url"] == f"http://127.0.0.1:{base}/"
    assert docs[-1]["kind"] == "exit" and docs[-1]["code"] == 143
    assert docs[-1]["stopped"] == ["web.1"] and docs[-1]["incomplete"] == []


# -- stdout going away --------------------------------------------------------------


def test_closed_stdout_stops_everything(tmp_path, ups):
    base = free_base()
    procfile(tmp_path, f"web: {SERVER}\nchatty: while :; do echo tick; sleep 0.05; done\n")
    u = start(ups, tmp_path, "-p", str(base), "--grace", "1")
    u.wait_for(r"chatty\.1 +\| tick")
    u.wait_for(r"web\.1 ready")
    u.hang_up.set()
    assert u.proc.wait(30) == 128 + signal.SIGPIPE
    assert not answers(base)


# -- bad input: refused before anything starts ---------------------------------------------


def run_up(folder, *args):
    return subprocess.run(
        [sys.executable, "-m", "proctree", "up", *args],
        cwd=str(folder),
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "files, args, words",
    [
        ({}, [], "Procfile: no such Procfile"),
        ({"Procfile": "web python\n"}, ["--strict"], "Procfile:1: not a `name: command` line"),
        ({"Procfile": "web: a\nweb: b\n"}, [], "Procfile:2: 'web' is defined twice"),
        ({"Procfile": "web: a\n"}, ["-m", "web=x"], "-m: web='x'"),
        ({"Procfile": "web: a\n"}, ["-m", "db=1"], "'db' is not an entry"),
        ({"Procfile": "web: a\n"}, ["-p", "70000"], "not a port"),
        ({"Procfile": "web: a\nb: c\n"}, ["-p", "65500"], "PORT=65600"),
        ({"Procfile": "web: a\n"}, ["--exit-with", "tests"], "--exit-with 'tests' is not an entry"),
        ({"Procfile": "web: a\n"}, ["-m", "web=0", "--exit-with", "web"], "nothing to run"),
        ({"Procfile": "web: a\n"}, ["--strict", "-e", "nope.env"], "nope.env: no such .env file"),
        ({"Procfile": "web: a\n"}, ["-e", ","], "empty file name"),
        ({"Procfile": "web: a\n"}, ["db"], "no entry named 'db'"),
        ({"Procfile": "web: a\n", "proctree.toml": "[services.web]\nready = 'nonsense:1'\n"}, [], "services.web"),
        (
            {
                "Procfile": "a: x\nb: y\n",
                "proctree.toml": "[services.a]\ndepends_on=['b']\n[services.b]\ndepends_on=['a']\n",
            },
            [],
            "cycle",
        ),
        ({"Procfile": "web: a\n"}, ["--grace", "-1"], "not a number of seconds"),
        ({"Procfile": "web: a\n"}, ["--grace", "99999999999999999999999999"], "too many seconds"),
        ({"Procfile": "web: a\n"}, ["--grace", "86400.5"], "at most 86400, one day"),
        (
            {"Procfile": "web: a\n", "pyproject.toml": '[tool.proctree.service.web]\nrestart = "always"\n'},
            [],
            "pyproject.toml: unknown keys under [tool.proctree] ['service']",
        ),
        ({"Procfile": "web: a\n", "pyproject.toml": "[tool.proctree]\nfoo = 1\n"}, [], "['foo']"),
    ],
)
def test_bad_input_is_refused_before_anything_starts(tmp_path, files, args, words):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    r = run_up(tmp_path, *args)
    assert r.returncode == 2, r
    assert words in r.stderr
    assert r.stdout == ""
    assert "Traceback" not in r.stderr


def test_bad_input_as_json(tmp_path):
    (tmp_path / "Procfile").write_text("web python\n")
    r = run_up(tmp_path, "--json", "--strict")
    assert r.returncode == 2
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and "Procfile:1:" in doc["error"]["message"]


def test_command_that_cannot_start(tmp_path, ups):
    procfile(tmp_path, "web: sleep 300\nbroken: /no/such/program\n")
    u = start(ups, tmp_path, "-p", str(free_base()), "--grace", "1")
    assert u.finish() == 127  # the shell's status for a missing program
    assert re.search(r"broken\.1 +\| .*/no/such/program", u.text())


# -- hostile services and timing ------------------------------------------------------


def test_crash_loop_restarts_then_ends_the_run(tmp_path, ups):
    procfile(
        tmp_path,
        "crash: echo try; exit 3\nweb: sleep 300\n",
        proctree_toml='[services.crash]\nrestart = "on-failure"\nmax_restarts = 2\n',
    )
    u = start(ups, tmp_path, "-p", str(free_base()), "--grace", "1", "--no-timestamp")
    assert u.finish(timeout=60) == 3
    text = u.text()
    assert text.count("crash.1 | try") == 3
    assert "crash.1 exited with code 3; restarting" in text
    assert "crash.1 started again (pid=" in text and ", restart 2)" in text
    assert "crash.1 keeps crashing: giving up after 2 restarts" in text
    assert "crash.1 failed: stopping everything" in text
    assert re.search(r"stopped web\.1$", text, re.M)


def test_ctrl_c_while_a_dependency_is_not_ready(tmp_path, ups):
    """start_all is still waiting (web waits for db, which never answers): Ctrl+C still stops all."""
    procfile(
        tmp_path,
        "db: echo db up; sleep 300\nweb: echo never\n",
        proctree_toml='[services.db]\nready = "log:never printed"\n[services.web]\ndepends_on = { db = "ready" }\n',
    )
    u = start(ups, tmp_path, "-p", str(free_base()), "--grace", "1")
    u.wait_for(r"db\.1 +\| db up")
    u.signal(signal.SIGINT)
    assert u.finish() == 130
    assert re.search(r"stopped db\.1, web\.1$", u.text(), re.M)
    assert "never" not in u.text().replace("never printed", "")


def test_a_10mb_line_and_invalid_utf8(tmp_path, ups):
    script = tmp_path / "big.py"
    script.write_text(
        "import sys\n"
        "sys.stdout.write('x' * 10_000_000 + '\\n')\n"
        "sys.stdout.buffer.write(b'bad \\xff\\xfe utf8\\n')\n"
        "sys.stdout.flush()\n"
        "import time; time.sleep(300)\n"
    )
    procfile(tmp_path, f"big: {PY} {shlex.quote(str(script))}\n")
    u = start(ups, tmp_path, "-p", str(free_base()), "--grace", "1", "--no-timestamp")
    u.wait_for(r"big\.1  \| bad \ufffd\ufffd utf8")
    long_line = next(line for line in u.lines if line.startswith("big.1  | xxx"))
    assert len(long_line) < 100_000  # cut with a mark, not 10 MB
    assert u.proc.poll() is None
    u.signal(signal.SIGINT)
    assert u.finish() == 130


def test_a_flood_does_not_delay_ctrl_c(tmp_path, ups):
    procfile(tmp_path, "flood: yes flood\n")
    u = start(ups, tmp_path, "-p", str(free_base()), "--grace", "1")
    u.wait_for(r"flood\.1 +\| flood")
    time.sleep(1)
    t0 = time.monotonic()
    u.signal(signal.SIGINT)
    assert u.finish() == 130
    assert time.monotonic() - t0 < 15  # generous: a loaded machine, but not a hang


def test_sigkill_of_up_leaves_nothing(tmp_path, ups):
    """up cannot clean up after SIGKILL; each tree's keeper does (owner death)."""
    base = free_base()
    procfile(
        tmp_path,
        f"web: {SERVER}\n"
        f"daemon: setsid {PY} -m http.server $PORT --bind 127.0.0.1 </dev/null >/dev/null 2>&1 & sleep 300\n",
    )
    u = start(ups, tmp_path, "-p", str(base), "--grace", "1")
    u.wait_for(r"web\.1 ready")
    deadline = time.monotonic() + 20
    while not answers(base + 100) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert answers(base + 100)
    u.signal(signal.SIGKILL)
    u.finish()
    deadline = time.monotonic() + 20
    while (answers(base) or answers(base + 100)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not answers(base) and not answers(base + 100)


def test_an_inherited_ignored_sighup_stays_ignored_but_sigint_does_not(tmp_path, ups):
    """Under nohup (SIGHUP ignored from the start) a hangup does not stop the run. SIGINT ignored from the
    start (a shell's `proctree up &`) is still handled: a script's later `kill -INT` means it."""
    procfile(tmp_path, "web: echo up; sleep 300\n")
    wrapper = (
        "import os, signal, sys\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'proctree', 'up'] + sys.argv[1:])"
    )
    u = start(ups, tmp_path, "-p", str(free_base()), "--grace", "1", launcher=("-c", wrapper))
    u.wait_for(r"web\.1 +\| up")
    u.signal(signal.SIGHUP)
    time.sleep(1)
    assert u.proc.poll() is None
    u.signal(signal.SIGINT)
    assert u.finish() == 130


def test_a_port_taken_by_someone_else_is_said_and_never_proves_ready(tmp_path, ups):
    base = free_base()
    other = socket.socket()
    other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    other.bind(("127.0.0.1", base))
    other.listen(16)  # somebody else's server on web.1's port: connects succeed
    try:
        procfile(tmp_path, "web: echo not listening; sleep 300\n")
        u = start(ups, tmp_path, "-p", str(base), "--grace", "1", "--ready-timeout", "1")
        u.wait_for(rf"web\.1 started \(pid=\d+\); port {base} already answers")
        u.wait_for(r"web\.1 running \(nothing proved it ready yet; port \d+ was already taken")
        assert "web.1 ready" not in u.text()
        u.signal(signal.SIGINT)
        assert u.finish() == 130
    finally:
        other.close()


def test_a_sigint_while_the_subcommands_load_is_a_quiet_130(tmp_path):
    """Ctrl+C in up's first moments (its subcommands still importing) ends it as 130, without a traceback."""
    (tmp_path / "Procfile").write_text("a: sleep 300\n")
    script = (
        "import os, signal, sys\n"
        "import proctree.cli as cli\n"
        "build = cli.build_parser\n"
        "def interrupted_build(argv=None):\n"
        "    os.kill(os.getpid(), signal.SIGINT)  # a real SIGINT: Python raises it at the next bytecode\n"
        "    return build(argv)\n"
        "cli.build_parser = interrupted_build\n"
        "sys.exit(cli.main(['up', '-f', 'Procfile']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=str(tmp_path), env=env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 130, done
    assert "Traceback" not in done.stderr and "interrupted" in done.stderr
