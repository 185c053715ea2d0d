"""The table: which projects' own suites, at which versions, in which modes, and which modes CI requires.

A project's tests come from its sdist on PyPI (checked to hold them); its
test dependencies are pinned in requirements/<name>.txt. A mode is one way of
running the same tests: stock, with subprocess.Popen swapped for
proctree.Popen, or under proctree's pytest plugin. Each proctree mode is
compared, test id by test id, with its baseline (a stock run with the same
xdist setting).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    # pytest arguments that select the tests, run from the unpacked sdist
    tests: tuple[str, ...]
    # what those tests are, and why that part when it is not the whole suite
    selection: str
    # the sdist member that proves the tests are in it
    tests_member: str
    modes: tuple[str, ...]
    # the folder (in the unpacked sdist) where plugin-leak mode adds its test file
    leak_dir: str | None = None
    # extra environment per mode
    env: dict[str, dict[str, str]] = field(default_factory=dict)
    # tests whose outcome varies from run to run stock (test ids containing these): not compared
    flaky: tuple[str, ...] = ()


@dataclass(frozen=True)
class Mode:
    name: str
    # the mode this one is compared with; None for a baseline
    baseline: str | None
    pytest_args: tuple[str, ...]
    what: str
    leak: bool = False


NO_PLUGIN = ("-p", "no:proctree")  # the entry point is installed: stock runs must not even import it

MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode("stock", None, NO_PLUGIN, "the project's tests as its CI runs them"),
        Mode("stock-n2", None, (*NO_PLUGIN, "-n", "2"), "stock under pytest-xdist -n 2 (plugin-n2's baseline)"),
        Mode("swap", "stock", (*NO_PLUGIN, "-p", "outside_swap_popen"), "subprocess.Popen = proctree.Popen"),
        Mode(
            "swap-asyncio",
            "stock",
            (*NO_PLUGIN, "-p", "outside_swap_asyncio"),
            "asyncio.create_subprocess_exec/_shell = proctree's",
        ),
        Mode("plugin", "stock", ("--proctree-leaks=fail",), "proctree's pytest plugin, --proctree-leaks=fail"),
        Mode("plugin-n2", "stock-n2", ("--proctree-leaks=fail", "-n", "2"), "the plugin under pytest-xdist -n 2"),
        Mode(
            "plugin-leak",
            "stock",
            ("--proctree-leaks=fail",),
            "the plugin, with one leaking test added: it alone must be reported",
            leak=True,
        ),
    )
}

ALL_PROCTREE_MODES = ("swap", "plugin", "plugin-n2")

PROJECTS: dict[str, Project] = {
    p.name: p
    for p in (
        Project(
            "plumbum",
            "2.0.2",
            (),
            "the whole suite (its testpaths; ssh and sudo tests skip themselves), ~30 s",
            "tests/test_local.py",
            ("stock", "stock-n2", *ALL_PROCTREE_MODES, "swap-asyncio", "plugin-leak"),
            leak_dir="tests",
            # plumbum's NOHUP daemons must outlive the test process, which a global swap cannot ask per call.
            env={"swap": {"PROCTREE_DETACH": "session"}, "swap-asyncio": {"PROCTREE_DETACH": "session"}},
        ),
        Project(
            "sarge",
            "0.1.8",
            ("test_sarge.py",),
            "the whole suite (one unittest file), ~8 s",
            "test_sarge.py",
            ("stock", "stock-n2", *ALL_PROCTREE_MODES),
            flaky=(
                # three commands' outputs, each read by a reader thread of its own (sarge's Capture.add_stream)
                # into one queue: their order is the threads' race (seen once under load; 0 of 80 alone)
                "test_list_merge",
                # the same race between two reader threads ([b'bar', b'foo'] for [b'foo', b'bar']; 2 of 41 runs)
                "test_byte_iterator",
                # two races of sarge's Capture with lister.py writing a line every 10 ms: read() returns only after
                # a 20 ms gap in the lines, so with steady scheduling it never does (the main thread's stack at the
                # 120 s timeout: expect -> _try_match -> read -> queue.get, in a loop); and expect() matches on the
                # caller's thread while the reader thread matches the same pattern, so 'line 11' can win over
                # 'line 10' (3 of 57 runs under the plugin with -n 2, whose timing differs; never stock-n2)
                "test_expect",
            ),
        ),
        Project(
            "execnet",
            "2.1.2",
            ("testing",),
            "the whole suite (tox's `pytest testing`; ssh/socket specs skip without --gx), ~40 s",
            "testing/test_gateway.py",
            ("stock", "stock-n2", *ALL_PROCTREE_MODES, "plugin-leak"),
            leak_dir="testing",
            flaky=(
                # imports a module from a tmp_path that a later parametrization deleted: which ones fail
                # depends on the order (and so on xdist's distribution)
                "test_remote_exec_module_is_removed",
                # a race in the test between the channel's close and the remote's send
                "test_channel_passing_over_channel",
                # a race in the test: the remote's chdir comes after its send, and the test may read the cwd first
                # (failed stock too, socket gateways)
                "test__rinfo",
            ),
        ),
        Project(
            "anyio",
            "4.16.0",
            ("tests/test_subprocesses.py",),
            "tests/test_subprocesses.py only (the suite's subprocess part, with blockbuster on as its conftest "
            "sets it; asyncio, asyncio+uvloop, asyncio+eager and trio backends), ~4 s; the whole suite is "
            "~2,000 tests of sockets, threads and sync primitives that start no process",
            "tests/test_subprocesses.py",
            ("stock", "stock-n2", *ALL_PROCTREE_MODES, "swap-asyncio", "plugin-leak"),
            leak_dir="tests",
        ),
        Project(
            "trio",
            "0.35.0",
            ("--pyargs", "trio._tests.test_subprocess"),
            "trio/_tests/test_subprocess.py only (trio.run_process and open_process over subprocess.Popen), "
            "from the package built from the sdist, ~2 s",
            "src/trio/_tests/test_subprocess.py",
            ("stock", "stock-n2", *ALL_PROCTREE_MODES),
        ),
    )
}

# (project, mode) -> required in CI. A required mode failing fails CI; the
# others are measured and reported. Flip a line to True when the fix it waits
# for is merged (see docs/outside_suites.md for what each waits for).
REQUIRED: dict[tuple[str, str], bool] = {
    ("plumbum", "swap"): True,  # with PROCTREE_DETACH=session (projects.py sets it): NOHUP daemons outlive the test
    ("plumbum", "swap-asyncio"): True,
    ("plumbum", "plugin"): True,
    ("plumbum", "plugin-n2"): True,
    ("plumbum", "plugin-leak"): True,
    ("sarge", "swap"): True,
    ("sarge", "plugin"): True,
    # sarge's own races (test_expect, test_byte_iterator: see its flaky list) are not compared
    ("sarge", "plugin-n2"): True,
    ("execnet", "swap"): True,
    ("execnet", "plugin"): True,
    ("execnet", "plugin-n2"): True,
    # its test_multi tests leave gateways execnet's default group holds and its atexit handler ends: held at the
    # session's end, they are checked after pytest exits, by the run's subreaper, and are gone by then (3 of 3 runs)
    ("execnet", "plugin-leak"): True,
    ("anyio", "swap"): True,
    ("anyio", "swap-asyncio"): True,
    ("anyio", "plugin"): True,
    ("anyio", "plugin-n2"): True,
    ("anyio", "plugin-leak"): True,
    ("trio", "swap"): True,
    ("trio", "plugin"): True,
    ("trio", "plugin-n2"): True,
}


def required_modes(project: Project) -> list[str]:
    """The project's modes CI requires, with the baselines they are compared with, baselines first."""
    wanted = [m for m in project.modes if REQUIRED.get((project.name, m), False)]
    return with_baselines(wanted)


def with_baselines(modes: list[str]) -> list[str]:
    """The modes with every baseline they need, baselines first, each once."""
    ordered: list[str] = []
    for name in modes:
        base = MODES[name].baseline
        if base and base not in ordered:
            ordered.append(base)
    for name in modes:
        if name not in ordered:
            ordered.append(name)
    return sorted(ordered, key=lambda n: MODES[n].baseline is not None)
