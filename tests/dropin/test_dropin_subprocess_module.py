"""The one-import swap: proctree carries subprocess's constants and exceptions, and proctree.subprocess
stands in for the whole subprocess module with every command contained."""

import os
import subprocess
import sys
import types

import pytest

import proctree
from proctree import subprocess as swapped

# subprocess.__all__'s names that start nothing: proctree re-exports subprocess's own objects.
PLAIN = ["PIPE", "STDOUT", "DEVNULL", "CalledProcessError", "CompletedProcess", "SubprocessError", "TimeoutExpired"]
STARTERS = ["Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"]

linux_root = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0, reason="cgroup v2 containment (root, Linux)"
)


def test_every_name_of_subprocess_all_is_there():
    assert sorted(swapped.__all__) == sorted(subprocess.__all__)
    assert sorted(PLAIN + STARTERS) == sorted(subprocess.__all__)
    for name in subprocess.__all__:
        assert hasattr(swapped, name), name


def test_the_constants_and_exceptions_are_subprocess_own():
    for name in PLAIN:
        assert getattr(swapped, name) is getattr(subprocess, name), name
        assert getattr(proctree, name) is getattr(subprocess, name), name
        assert name in proctree.__all__


def test_the_starters_are_proctree_own():
    for name in ("Popen", "run", "call", "check_call", "check_output"):
        assert getattr(swapped, name) is getattr(proctree, name), name
    for name in ("getoutput", "getstatusoutput"):
        fn = getattr(swapped, name)
        assert fn is not getattr(subprocess, name)
        assert fn.__module__ == "proctree.subprocess" and fn.__name__ == name


def test_it_is_a_module_reached_both_ways():
    import proctree.subprocess as by_path

    assert isinstance(swapped, types.ModuleType)
    assert by_path is swapped is proctree.subprocess
    assert "subprocess" in proctree.__all__ and "subprocess" in dir(proctree)


def test_other_attributes_are_the_standard_module_s():
    assert swapped.list2cmdline(["a b", "c"]) == '"a b" c'
    assert swapped._USE_POSIX_SPAWN is subprocess._USE_POSIX_SPAWN
    with pytest.raises(AttributeError, match="PIPES"):
        swapped.PIPES  # noqa: B018
    with pytest.raises(AttributeError):
        swapped.__path__  # noqa: B018 - not a package, whatever the standard module holds


def test_generic_at_run_time():
    assert proctree.Popen[str].__origin__ is proctree.Popen
    assert swapped.Popen[bytes].__args__ == (bytes,)
    assert swapped.CompletedProcess[str].__origin__ is subprocess.CompletedProcess


@linux_root
def test_getoutput_and_getstatusoutput_run_contained():
    own = swapped.getoutput("cat /proc/self/cgroup")
    assert "/popen-" in own and "cmd-" in own
    assert swapped.getstatusoutput("echo out; echo err >&2; exit 3") == (3, "out\nerr")
    assert swapped.getoutput("printf 'x\\n'") == "x"


@linux_root
def test_the_swap_runs_a_subprocess_style_script():
    done = swapped.run(["sh", "-c", "cat /proc/self/cgroup; exit 4"], capture_output=True, text=True)
    assert done.returncode == 4 and "/popen-" in done.stdout
    with pytest.raises(swapped.CalledProcessError) as caught:
        swapped.check_output(["false"])
    assert isinstance(caught.value, subprocess.CalledProcessError)
    with swapped.Popen(["cat"], stdin=swapped.PIPE, stdout=swapped.PIPE, stderr=swapped.DEVNULL) as proc:
        assert proc.communicate(b"through", timeout=10)[0] == b"through"
