"""spawn() and Tree as a Popen: stdio, exit statuses, waits, signals, errors and the asyncio face.

Every test registers what it starts through the Tree and ends it in a
finally/fixture; the autouse leak check catches anything that survives,
keepers included.
"""

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

import proctree
from proctree._containment.spawn import Tree, spawn, spawn_async
from support.spawnkit import (
    ALL_MODES,
    CGROUP_OK,
    CONTAINING,
    DAEMONIZER,
    alive,
    cgroup_dirs,
    read_lines,
    start_daemonizer,
    wait_gone,
)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_cat_round_trip_through_the_keeper(trees, mode):
    t = spawn(["cat"], contain=mode, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    trees.append(t)
    t.stdin.write(b"hello\n")
    t.stdin.flush()
    assert t.stdout.readline() == b"hello\n"
    out, err = t.communicate(b"more bytes")
    assert out == b"more bytes" and err is None
    assert t.returncode == 0


def test_text_mode_and_env_and_cwd(trees, tmp_path):
    t = spawn(
        ["sh", "-c", 'echo "$FOO $(pwd) $PROCTREE_OWNER"'],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "FOO": "bar"},
        cwd=str(tmp_path),
    )
    trees.append(t)
    out, _ = t.communicate(timeout=10)
    assert out.split() == ["bar", str(tmp_path), t.marker]


@pytest.mark.parametrize("mode", ALL_MODES)
def test_exit_status_and_signal_status(trees, mode):
    t = spawn(["sh", "-c", "exit 7"], contain=mode)
    trees.append(t)
    assert t.wait(timeout=10) == 7 and t.returncode == 7
    t = spawn(["sh", "-c", "kill -9 $$"], contain=mode)
    trees.append(t)
    assert t.wait(timeout=10) == -9


def test_wait_timeout(trees):
    t = spawn(["sleep", "60"])
    trees.append(t)
    with pytest.raises(subprocess.TimeoutExpired):
        t.wait(timeout=0.05)
    assert t.poll() is None and t.returncode is None


@pytest.mark.parametrize("mode", ALL_MODES)
def test_signals_are_forwarded_to_the_command(trees, mode):
    t = spawn(
        ["sh", "-c", 'trap "echo got-usr1; exit 5" USR1; echo ready; while :; do sleep 0.05; done'],
        contain=mode,
        stdout=subprocess.PIPE,
        text=True,
    )
    trees.append(t)
    assert t.stdout.readline() == "ready\n"
    t.send_signal(signal.SIGUSR1)
    assert t.stdout.readline() == "got-usr1\n"
    assert t.wait(timeout=10) == 5


@pytest.mark.parametrize("mode", CONTAINING)
def test_sigkill_goes_to_the_command_not_the_keeper(trees, pipe, mode):
    t, pids = start_daemonizer(trees, pipe, mode)
    t.send_signal(signal.SIGKILL)
    assert t.wait(timeout=10) == -signal.SIGKILL
    assert wait_gone([pids["daemon"]], 3.0)  # the keeper lived to end the leftovers


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("sig", [signal.SIGPROF, signal.SIGALRM])
def test_signals_the_keeper_does_not_forward_reach_the_command(trees, mode, sig):
    # SIGPROF's default action would kill the keeper (and free its tree);
    # SIGALRM is the keeper's own wake-up. Both must go to the command.
    t = spawn(["sleep", "60"], contain=mode)
    trees.append(t)
    cmd = proctree.proc(t.pid)
    t.send_signal(sig)
    assert t.wait(timeout=10) == -sig
    assert not alive(cmd.pid, cmd.start_time)
    assert t.join(timeout=10) == -sig  # the keeper ended by itself, not of the signal
    assert t._popen.returncode == -sig  # it re-raised the command's signal, as documented


def test_context_manager_tears_down(pipe):
    r, w = pipe
    with spawn([sys.executable, "-c", DAEMONIZER, str(w), "0", "sleep"], pass_fds=(w,)) as t:
        os.close(w)
        pids = read_lines(r, 2)
    assert not alive(pids["daemon"]) and not alive(pids["cmd"])
    assert t.returncode is not None


def test_async_flavour():
    async def main():
        t = await spawn_async(["sh", "-c", "sleep 0.1; exit 4"])
        try:
            assert await t.wait_async(timeout=10) == 4
            t2 = await spawn_async(["sleep", "60"])
            with pytest.raises(subprocess.TimeoutExpired):
                await t2.wait_async(timeout=0.05)
            rep = await t2.terminate_async(grace=1)
            assert rep.ok and t2.returncode == -signal.SIGTERM
        finally:
            t.terminate(grace=0)

    asyncio.run(main())


# ---------------------------------------------------------------------------
# Bad input and limits


def test_missing_executable_raises_like_popen_and_leaves_nothing():
    with pytest.raises(FileNotFoundError) as popen_err:
        subprocess.Popen(["/nonexistent/proctree-test-binary"])
    before = cgroup_dirs()
    for mode in ["auto", "subreaper", "session"] + (["cgroup"] if CGROUP_OK else []):
        with pytest.raises(FileNotFoundError) as ours:
            spawn(["/nonexistent/proctree-test-binary"], contain=mode)
        assert (ours.value.errno, ours.value.filename, str(ours.value)) == (
            popen_err.value.errno,
            popen_err.value.filename,
            str(popen_err.value),
        )
        with pytest.raises(FileNotFoundError):
            spawn(["proctree-no-such-command-on-path"], contain=mode)
    assert cgroup_dirs() == before  # no keeper either: the leak check would see it


@pytest.mark.parametrize("mode", ALL_MODES)
def test_missing_executable_keeper_exits_by_itself(monkeypatch, mode):
    # After "err ... exec" the keeper cleans up and exits 127 on its own; it is
    # not left to be SIGKILLed by spawn()'s cleanup (in cgroup mode it used to
    # sit inside the cgroup it was trying to remove).
    seen = []
    real = Tree._abandon

    def abandon(self, *a, **kw):
        real(self, *a, **kw)
        seen.append(self._popen.returncode)

    monkeypatch.setattr(Tree, "_abandon", abandon)
    before = cgroup_dirs()
    with pytest.raises(FileNotFoundError):
        spawn(["/nonexistent/proctree-test-binary"], contain=mode)
    assert seen == [127]
    assert cgroup_dirs() == before


def test_missing_cwd_raises_like_popen(tmp_path):
    with pytest.raises(FileNotFoundError) as ours:
        spawn(["true"], cwd=str(tmp_path / "nope"))
    assert ours.value.filename == str(tmp_path / "nope")


def test_not_executable_raises_permission_error(tmp_path):
    f = tmp_path / "script"
    f.write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        spawn([str(f)])


@pytest.mark.parametrize(
    "kw, exc",
    [
        ({"contain": "docker"}, ValueError),
        ({"contain": ""}, ValueError),
        ({"contain": 1}, TypeError),
        ({"grace": -1}, ValueError),
        ({"grace": float("nan")}, ValueError),
        ({"grace": float("inf")}, ValueError),
        ({"grace": "1"}, TypeError),
        ({"grace": True}, TypeError),
        ({"tag": ""}, ValueError),
        ({"tag": "a b"}, ValueError),
        ({"tag": "x" * 65}, ValueError),
        ({"tag": "a:b"}, ValueError),
        ({"tag": "é"}, ValueError),
        ({"tag": 5}, TypeError),
        ({"keep_orphans": 1}, TypeError),
        ({"process_group": 5}, ValueError),
        ({"process_group": True}, TypeError),
        ({"preexec_fn": os.getpid}, ValueError),
        ({"user": "nobody"}, ValueError),
        ({"group": "nogroup"}, ValueError),
        ({"extra_groups": [0]}, ValueError),
        ({"user": 1.5}, TypeError),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(kw, exc):
    before = cgroup_dirs()
    with pytest.raises(exc) as e:
        spawn(["sleep", "60"], **kw)
    assert str(e.value)
    assert cgroup_dirs() == before


def test_rejected_kwarg_names_the_reason():
    with pytest.raises(ValueError, match="preexec_fn=.*would run in the keeper"):
        spawn(["true"], preexec_fn=os.getpid)


def test_tree_is_exported_type(trees):
    t = spawn(["true"])
    trees.append(t)
    assert isinstance(t, Tree)
    t.wait(timeout=10)


@pytest.mark.parametrize(
    "args, kw",
    [
        (["echo", "plain"], {}),
        ([b"echo", b"bytes"], {}),
        ("echo $0 from-shell", {"shell": True}),
        (["foo", "bar"], {"executable": "echo"}),
    ],
)
def test_args_behave_as_with_popen(trees, args, kw):
    expected = subprocess.run(args, stdout=subprocess.PIPE, timeout=10, **kw).stdout
    t = spawn(args, stdout=subprocess.PIPE, **kw)
    trees.append(t)
    assert t.communicate(timeout=10)[0] == expected


@pytest.mark.parametrize("mode", ALL_MODES)
def test_pass_fds_with_close_fds_false_behaves_as_with_popen(pipe, mode, trees):
    # Popen lets pass_fds override close_fds=False (with a RuntimeWarning).
    r, w = pipe
    with pytest.warns(RuntimeWarning, match="pass_fds overriding close_fds"):
        t = spawn(
            [sys.executable, "-c", "import os, sys; os.write(int(sys.argv[1]), b'hi\\n')", str(w)],
            contain=mode,
            close_fds=False,
            pass_fds=(w,),
        )
    trees.append(t)
    assert t.wait(timeout=10) == 0
    assert os.read(r, 10) == b"hi\n"


@pytest.mark.parametrize("args", [[], ["echo", 3], ["echo", "a\0b"]])
def test_bad_args_raise_what_popen_raises(args):
    with pytest.raises(Exception) as popen_err:
        subprocess.Popen(args)
    with pytest.raises(type(popen_err.value)):
        spawn(args)


def test_wait_without_timeout_outlasts_a_long_select(trees, monkeypatch):
    # wait() with no timeout must wait for as long as the command runs: a
    # select() slice that ends with nothing to read (here: one that would
    # have been an hour long) is not a timeout.
    from proctree import _fds

    real_wait = _fds.wait

    def wait(readers, writers=(), timeout=None):
        if timeout is not None and timeout >= 3600:
            return [], []  # as if an hour went by
        return real_wait(readers, writers, timeout)

    monkeypatch.setattr(_fds, "wait", wait)
    t = spawn(["sh", "-c", "sleep 0.3; exit 6"])
    trees.append(t)
    assert t.wait() == 6


def test_terminate_from_another_thread_while_one_waits(trees):
    import threading

    t = spawn(["sleep", "30"])
    trees.append(t)
    got = []
    th = threading.Thread(target=lambda: got.append(t.wait()))
    th.start()
    try:
        time.sleep(0.2)  # let the waiter block
        t0 = time.monotonic()
        assert t.terminate(grace=1).ok
        assert time.monotonic() - t0 < 10, "terminate() waited for the waiter"
        th.join(10)
        assert got == [-signal.SIGTERM]
    finally:
        t.kill()
        th.join(10)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


@pytest.mark.parametrize("mode", ALL_MODES)
def test_wait_async_and_terminate_async_at_once(mode):
    """A teardown in a worker thread while the loop watches the status pipe: the wait ends, no fd is misused."""

    async def main():
        trees = [await spawn_async(["sleep", "60"], contain=mode) for _ in range(3)]
        waits = [asyncio.ensure_future(t.wait_async(timeout=20)) for t in trees]
        await asyncio.sleep(0.05)
        reps = await asyncio.gather(*(t.terminate_async(grace=1) for t in trees))
        rcs = await asyncio.wait_for(asyncio.gather(*waits), 20)
        assert all(r.ok for r in reps)
        assert rcs == [-signal.SIGTERM] * 3

    asyncio.run(main())


@pytest.mark.parametrize("mode", ALL_MODES)
def test_several_wait_async_on_one_tree(mode):
    async def main():
        t = await spawn_async(["sh", "-c", "sleep 0.2; exit 5"], contain=mode)
        assert await asyncio.wait_for(asyncio.gather(*(t.wait_async(timeout=20) for _ in range(4))), 20) == [5] * 4

    asyncio.run(main())


def test_a_huge_grace_or_timeout_is_no_overflow(trees):
    t = spawn(["sh", "-c", "exit 4"], grace=1e10)
    trees.append(t)
    assert t.wait(timeout=1e10) == 4
    t = spawn(["sleep", "60"], grace=1e10)
    trees.append(t)
    assert t.kill().ok


def test_a_tiny_grace_is_a_grace(trees):
    """A subnormal grace (1e-310) is a valid float >= 0: the keeper reads it as Python does."""
    t = spawn(["sh", "-c", "exit 3"], grace=1e-310)
    trees.append(t)
    assert t.wait(timeout=30) == 3


def _ignored(status_text):
    return int(status_text.split()[1], 16)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_the_command_ignores_what_a_popen_child_ignores(trees, mode):
    """No signal ignored that Popen's child has at default (glibc's internal 32/33 included)."""
    cmd = ["grep", "SigIgn", "/proc/self/status"]
    popen = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    t = spawn(cmd, contain=mode, stdout=subprocess.PIPE, text=True)
    trees.append(t)
    out = t.communicate(timeout=30)[0]
    assert _ignored(out) == _ignored(popen), (out, popen)


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("on_path", [False, True])
def test_a_script_without_a_shebang_fails_as_with_popen(trees, tmp_path, mode, on_path):
    """ENOEXEC is an error, as Popen reports it; never handed to /bin/sh as execvp would."""
    script = tmp_path / "no-shebang"
    script.write_text("echo ran-by-sh\n")
    script.chmod(0o755)
    argv, env = (
        ([script.name], {**os.environ, "PATH": f"/nonexistent:{tmp_path}"}) if on_path else ([str(script)], None)
    )
    with pytest.raises(OSError) as popen_err:
        subprocess.Popen(argv, env=env)
    with pytest.raises(OSError) as ours:
        trees.append(spawn(argv, env=env, contain=mode))
    assert (type(ours.value), ours.value.errno, ours.value.filename) == (
        type(popen_err.value),
        popen_err.value.errno,
        popen_err.value.filename,
    )


@pytest.mark.parametrize("mode", ALL_MODES)
def test_path_lookup_as_with_popen(trees, tmp_path, mode):
    """The first directory on PATH holding the program wins; a non-executable match is skipped for a later one."""
    first, second = tmp_path / "a", tmp_path / "b"
    for d, text in ((first, "exit 9"), (second, "exit 7")):
        d.mkdir()
        (d / "prog").write_text(f"#!/bin/sh\n{text}\n")
    (first / "prog").chmod(0o644)  # not executable: EACCES, and the search goes on
    (second / "prog").chmod(0o755)
    env = {**os.environ, "PATH": f"/nonexistent:{first}:{second}"}
    assert subprocess.run(["prog"], env=env).returncode == 7
    t = spawn(["prog"], env=env, contain=mode)
    trees.append(t)
    assert t.wait(timeout=30) == 7


@pytest.mark.parametrize("mode", ALL_MODES)
def test_a_program_named_dash_is_a_program(trees, tmp_path, mode):
    """executable="-" names a program, as with Popen: no protocol placeholder leaks into the API."""
    (tmp_path / "-").write_text("#!/bin/sh\nexit 6\n")
    (tmp_path / "-").chmod(0o755)
    env = {**os.environ, "PATH": str(tmp_path)}
    assert subprocess.run(["ignored-name"], executable="-", env=env).returncode == 6
    t = spawn(["ignored-name"], executable="-", env=env, contain=mode)
    trees.append(t)
    assert t.wait(timeout=30) == 6
    with pytest.raises(FileNotFoundError) as err:
        spawn(["x"], executable="-", env={**os.environ, "PATH": "/nonexistent"}, contain=mode)
    assert err.value.filename == "-"


def test_an_argv_too_long_names_the_command_as_popen_does():
    argv = ["true", "x" * 300_000]
    with pytest.raises(OSError) as popen_err:
        subprocess.Popen(argv)
    before = cgroup_dirs()
    with pytest.raises(OSError) as ours:
        spawn(argv)
    assert (ours.value.errno, ours.value.filename, str(ours.value)) == (
        popen_err.value.errno,
        popen_err.value.filename,
        str(popen_err.value),
    )
    assert cgroup_dirs() == before


@pytest.mark.parametrize("timeout", [float("nan"), -1, float("inf")])
def test_communicate_refuses_the_timeouts_wait_refuses(trees, timeout):
    t = spawn(["sleep", "30"])
    trees.append(t)
    with pytest.raises(ValueError):
        t.wait(timeout)
    with pytest.raises(ValueError):
        t.communicate(timeout=timeout)
    assert t.poll() is None  # refused before anything was waited for
