"""A sandbox for tests whose failure is a wide kill, or that run a reaper as root.

run_sandboxed() runs a Python script as pid 1 of fresh pid, mount and cgroup
namespaces (`unshare --pid --fork --mount-proc --mount --cgroup`), with a
tmpfs on /tmp and /run and a private cgroup2 mount rooted at a cgroup made
for the sandbox: whatever a root reaper inside decides, it can see, signal,
kill or remove nothing outside. Everything in it dies with its pid 1
(--kill-child), and the sandbox's cgroup is removed afterwards.
"""

import os
import secrets
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from .treekit import _PROCTREE_HOME, _TESTS

# Runs inside the new namespaces, before the script: private /tmp and /run, and a
# cgroup2 mount whose root is the sandbox's own cgroup (the cgroup namespace's root).
_INSIDE = r"""
set -e
# The interpreter, the package and the tests may live under /tmp or /var/tmp (a CI's venv): those
# paths (SANDBOX_KEEP, one per line) are bound back into the private mounts; nothing else of them is.
mount -t tmpfs -o mode=0755 sandbox-run /run
mkdir -p /run/.host-tmp /run/.host-var-tmp
mount --bind /tmp /run/.host-tmp
mount --bind /var/tmp /run/.host-var-tmp
mount -t tmpfs -o mode=1777 sandbox-tmp /tmp
mount -t tmpfs -o mode=1777 sandbox-var-tmp /var/tmp
printf '%s\n' "$SANDBOX_KEEP" | while IFS= read -r keep; do
    case $keep in
    /tmp/?*) src=/run/.host-tmp/${keep#/tmp/} ;;
    /var/tmp/?*) src=/run/.host-var-tmp/${keep#/var/tmp/} ;;
    *) continue ;;
    esac
    [ -d "$src" ] || continue
    mkdir -p "$keep"
    mount --bind "$src" "$keep"
done
umount -l /run/.host-tmp /run/.host-var-tmp
rmdir /run/.host-tmp /run/.host-var-tmp
if [ -n "$SANDBOX_CGROUP_MOUNT" ]; then
    umount -l "$SANDBOX_CGROUP_MOUNT"
    mount -t cgroup2 sandbox-cgroup "$SANDBOX_CGROUP_MOUNT"
fi
exec "$@"
"""


def _cgroup_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            if right.split(" ", 1)[0] == "cgroup2" and fields[3] == "/":
                return fields[4]
    return None


def _own_cgroup():
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


def available():
    """(True, "") where the sandbox can be made (root, unshare(1), Linux), else (False, why)."""
    if not sys.platform.startswith("linux"):
        return False, "Linux namespaces only"
    if os.geteuid() != 0:
        return False, "needs root for mount and cgroup namespaces"
    if shutil.which("unshare") is None:
        return False, "needs unshare(1)"
    return True, ""


def _remove_tree(path):
    for top, dirs, _ in os.walk(path, topdown=False):
        for d in dirs:
            try:
                os.rmdir(os.path.join(top, d))
            except OSError:
                pass
    try:
        os.rmdir(path)
    except OSError:
        pass


def run_sandboxed(script, timeout=90, env=None):
    """Run script (Python source) as pid 1 of a sandbox; the CompletedProcess (text output).

    Skips the calling test where the sandbox cannot be made.
    """
    ok, why = available()
    if not ok:
        pytest.skip(why)
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([_PROCTREE_HOME, _TESTS]))
    full_env.pop("PROCTREE_RECEIPTS_DIR", None)  # the sandbox's root keeps its receipts in its own /run
    full_env.pop("XDG_RUNTIME_DIR", None)
    full_env.update(env or {})
    mount, rel = _cgroup_mount(), _own_cgroup()
    cgroup = None
    if mount is not None and rel is not None:
        cgroup = os.path.join(os.path.normpath(mount + rel), f"sandbox-{secrets.token_hex(6)}")
        try:
            os.mkdir(cgroup)
        except OSError:
            cgroup = None
    full_env["SANDBOX_CGROUP_MOUNT"] = mount if cgroup is not None else ""
    keep = {sys.prefix, _PROCTREE_HOME, _TESTS, os.path.dirname(os.path.abspath(sys.executable))}
    full_env["SANDBOX_KEEP"] = "\n".join(sorted(os.path.realpath(k) for k in keep))
    enter = f'echo $$ > "{cgroup}/cgroup.procs" && ' if cgroup is not None else ""
    argv = [
        "sh",
        "-c",
        enter + 'exec unshare --pid --fork --mount --cgroup --propagation private --kill-child "$@"',
        "sh",
        "sh",
        "-c",
        "mount -t proc proc /proc && " + _INSIDE,
        "sandbox",
        sys.executable,
        "-c",
        textwrap.dedent(script),
    ]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=full_env)
    finally:
        if cgroup is not None:
            # Its pid 1 may still be dying (a timeout): give the kernel a moment to empty the cgroup.
            for _ in range(50):
                _remove_tree(cgroup)
                if not os.path.exists(cgroup):
                    break
                time.sleep(0.1)
