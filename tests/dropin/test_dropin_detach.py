"""Detached on purpose: detach=True and PROCTREE_DETACH=session start commands that outlive their owner.

Each test runs an owner process that starts, with proctree.Popen, a command
meant to outlive it and a control that is not; the owner then exits or is
SIGKILLed. Once the control is gone (the holding keeper ended it), the
detached command must still run, exactly as the stdlib's would. Every
process is ended afterwards by pid and start time.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import proctree
from proctree._containment import detach

# The owner: starts the commands its argv names, reports "name pid" lines, then exits or waits to be killed.
# argv: W ENDING MARKED NAME=HOW...
OWNER = textwrap.dedent(r"""
    import os, subprocess, sys, time
    import proctree
    from proctree._containment import popenhold
    w, ending, marked = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "marked"
    popenhold._force_session = marked
    sleep = ["sleep", "300"]
    # A launcher as plumbum's NOHUP has: it starts the daemon in a session of its own and exits at once.
    launcher = (
        "import subprocess, sys; "
        "print(subprocess.Popen(sys.argv[1:], start_new_session=True, stdout=subprocess.DEVNULL).pid)"
    )
    for spec in sys.argv[4:]:
        name, how = spec.split("=")
        if how == "detach":
            p = proctree.Popen(sleep, detach=True, stdin=subprocess.DEVNULL)
        elif how == "session":
            p = proctree.Popen(sleep, start_new_session=True, stdin=subprocess.DEVNULL)
        elif how == "group":
            if sys.version_info >= (3, 11):
                p = proctree.Popen(sleep, process_group=0)
            else:  # no process_group= before 3.11: the command makes its own group (no preexec_fn in proctree)
                p = proctree.Popen([sys.executable, "-c", "import os, time; os.setpgid(0, 0); time.sleep(300)"])
        elif how == "launcher":
            out = proctree.check_output([sys.executable, "-c", launcher, *sleep], text=True)
            p = type("Launched", (), {"pid": int(out)})
        else:
            p = proctree.Popen(sleep)
        os.write(w, b"%s %d\n" % (name.encode(), p.pid))
    os.write(w, b"ready 0\n")
    if ending == "exit":
        sys.exit(0)
    time.sleep(300)
""")


@pytest.fixture
def started():
    """(pid, start time) of each process a test recorded; each still that process is SIGKILLed afterwards."""
    made: list[tuple[int, int]] = []
    yield made
    for pid, start in made:
        try:
            if proctree.proc(pid).start_time == start:
                os.kill(pid, signal.SIGKILL)
        except (proctree.NoSuchProcess, ProcessLookupError):
            pass
    _wait(lambda: not any(_same(pid, start) for pid, start in made), 10)


def _same(pid: int, start: int) -> bool:
    try:
        return proctree.proc(pid).start_time == start and not proctree.proc(pid).is_zombie
    except proctree.NoSuchProcess:
        return False


def _wait(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _run_owner(started, ending: str, specs: list[str], env_rule: str | None, marked: bool = False) -> dict[str, int]:
    env = dict(os.environ)
    env.pop(detach.ENV, None)
    if env_rule is not None:
        env[detach.ENV] = env_rule
    r, w = os.pipe()
    try:
        owner = subprocess.Popen(
            [sys.executable, "-c", OWNER, str(w), ending, "marked" if marked else "cgroup", *specs],
            pass_fds=(w,),
            env=env,
        )
        started.append((owner.pid, proctree.proc(owner.pid).start_time))
        os.close(w)
        w = -1
        pids: dict[str, int] = {}
        with os.fdopen(r, "rb", closefd=False) as lines:
            for line in lines:
                name, pid = line.split()
                if name == b"ready":
                    break
                pids[name.decode()] = int(pid)
                started.append((int(pid), proctree.proc(int(pid)).start_time))
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
    if ending == "sigkill":
        owner.send_signal(signal.SIGKILL)
    assert owner.wait(timeout=30) in (0, -signal.SIGKILL)
    return pids


def _starts(started) -> dict[int, int]:
    return dict(started)


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
@pytest.mark.parametrize("marked", [False, True], ids=["cgroup", "marked"])
def test_detach_true_outlives_the_owner_and_the_control_does_not(started, ending, marked):
    pids = _run_owner(started, ending, ["kept=detach", "control=plain"], env_rule=None, marked=marked)
    starts = _starts(started)
    assert _wait(lambda: not _same(pids["control"], starts[pids["control"]]), 15), "the contained control outlived"
    time.sleep(0.5)
    assert _same(pids["kept"], starts[pids["kept"]]), "detach=True did not outlive its owner"


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_start_new_session_alone_does_not_detach(started, ending):
    pids = _run_owner(started, ending, ["session=session"], env_rule=None)
    starts = _starts(started)
    assert _wait(lambda: not _same(pids["session"], starts[pids["session"]]), 15)


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_session_rule_detaches_new_sessions_only(started, ending):
    specs = ["session=session", "group=group", "control=plain"]
    pids = _run_owner(started, ending, specs, env_rule="session")
    starts = _starts(started)
    for name in ("group", "control"):
        assert _wait(lambda name=name: not _same(pids[name], starts[pids[name]]), 15), f"{name} outlived its owner"
    time.sleep(0.5)
    assert _same(pids["session"], starts[pids["session"]]), "start_new_session=True under the rule did not detach"


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_session_rule_lets_a_launchers_daemon_go(started, ending):
    """plumbum's NOHUP: a contained launcher starts the daemon with setsid and exits; the daemon stays."""
    pids = _run_owner(started, ending, ["daemon=launcher", "control=plain"], env_rule="session")
    starts = _starts(started)
    assert _wait(lambda: not _same(pids["control"], starts[pids["control"]]), 15)
    time.sleep(0.5)
    assert _same(pids["daemon"], starts[pids["daemon"]]), "the launcher's daemon did not outlive the owner"


def test_without_the_rule_a_launchers_daemon_is_contained(started):
    pids = _run_owner(started, "exit", ["daemon=launcher"], env_rule=None)
    starts = _starts(started)
    assert _wait(lambda: not _same(pids["daemon"], starts[pids["daemon"]]), 15)


@pytest.mark.parametrize("value", ["Session", "1", "yes", "all"])
def test_a_bad_rule_is_refused_before_anything_starts(monkeypatch, value):
    monkeypatch.setenv(detach.ENV, value)
    with pytest.raises(ValueError, match=f"{detach.ENV}={value!r}.*session"):
        proctree.Popen(["true"])
    with pytest.raises(ValueError, match=detach.ENV):
        proctree.run(["true"])


def test_detach_passes_through_the_helpers_and_is_typed(started):
    out = proctree.check_output(["sh", "-c", "echo $$"], detach=True, text=True)
    assert int(out) > 0
    assert proctree.run(["true"], detach=True).returncode == 0
    assert proctree.call(["true"], detach=True) == 0
    with pytest.raises(TypeError, match="detach must be a bool"):
        proctree.Popen(["true"], detach=1)


def test_detach_async(started):
    import asyncio

    async def main():
        p = await proctree.create_subprocess_exec("sh", "-c", "echo $$", detach=True, stdout=subprocess.PIPE)
        out, _ = await p.communicate()
        return int(out), p.returncode

    pid, rc = asyncio.run(main())
    assert rc == 0 and pid > 0


@pytest.mark.parametrize(
    ("detach_kw", "new_session", "rule", "expected"),
    [
        (False, False, "", False),
        (True, False, "", True),
        (False, True, "", False),
        (False, True, "session", True),
        (False, False, "session", False),
        (True, False, "session", True),
    ],
)
def test_is_detached_table(detach_kw, new_session, rule, expected):
    assert detach.is_detached(detach_kw, new_session, rule) is expected


def test_a_program_that_only_detaches_never_starts_a_holding_tree():
    script = textwrap.dedent(r"""
        import asyncio, os, subprocess
        import proctree
        from proctree._containment import popenhold

        os.environ["PROCTREE_DETACH"] = "session"  # read at each start: set at run time, it counts
        assert proctree.run(["true"], detach=True).returncode == 0
        assert proctree.run(["true"], start_new_session=True).returncode == 0

        async def main():
            p = await proctree.create_subprocess_exec("true", start_new_session=True)
            return await p.wait()

        assert asyncio.run(main()) == 0
        print("holder" if popenhold._holder is not None else "none")
    """)
    env = {k: v for k, v in os.environ.items() if k != detach.ENV}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "none"


def test_a_detached_start_takes_preexec_fn_as_the_stdlib_does(tmp_path):
    # Detached is subprocess.Popen's own start: preexec_fn runs in its child, as it does there; contained, it is
    # refused (docs/dropin.md).
    mark = tmp_path / "ran"

    def pre():
        mark.write_text("yes")

    assert proctree.run(["true"], preexec_fn=pre, detach=True).returncode == 0
    assert mark.read_text() == "yes"
    with pytest.raises(ValueError, match="preexec_fn"):
        proctree.run(["true"], preexec_fn=pre)
