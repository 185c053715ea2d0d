"""The reaper never kills across a namespace or a privilege boundary (issue: "Trust again").

- a reaper run inside a nested pid namespace, or a child time namespace, of a
  live tree takes none of it, in every containment mode;
- evidence never lends privilege: forged markers and rule helpers run as an
  unprivileged uid never lead a root reaper to processes that uid could not
  signal (a setuid-root program below them), while root still reaps root's
  own orphans;
- a receipt never leads to another uid's processes.
Every case runs inside a sandbox (fresh pid, mount and cgroup namespaces, a
private cgroup2 mount, tmpfs /tmp and /run): nothing outside can be reached.
"""

import json
import os
import shutil
import sys

import pytest

from support.sandbox import available, run_sandboxed
from support.spawnkit import CGROUP_OK

ok, why = available()
pytestmark = pytest.mark.skipif(not ok, reason=why)
HAVE_TIMENS = os.path.exists("/proc/self/ns/time")
MODES = ["cgroup", "subreaper", "session"] if CGROUP_OK else ["subreaper", "session"]
USER = 4242  # an unprivileged uid with no account (setpriv needs none)


def _json(result):
    assert result.returncode == 0, f"sandbox failed ({result.returncode}):\n{result.stdout}\n{result.stderr[-3000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


# A live tree whose member runs the reaper in a namespace of its own (argv: MODE, the unshare options).
NESTED = r"""
import json, os, subprocess, sys, time
import proctree

mode, opts = sys.argv[1], sys.argv[2:]
reaper = (
    "import json, proctree, subprocess, time\n"
    "sleeper = subprocess.Popen(['sleep', '300'])\n"  # a member inside the nested namespace
    "time.sleep(0.2)\n"
    "found = proctree.find_orphans()\n"
    "rep = proctree.reap_orphans(grace=0.2)\n"
    "print(json.dumps({'found': [o.proc.pid for o in found], 'ended': len(rep.candidates),"
    " 'warnings': list(rep.warnings), 'skipped': [s.reason for s in rep.skipped],"
    " 'sleeper_alive': sleeper.poll() is None}), flush=True)\n"
    "import sys; sys.stdin.readline()\n"  # until the tree's members are counted: ending at once would shrink them
    "sleeper.kill()\n"
)
inner = [*["unshare", *opts], sys.executable, "-c", reaper]
with proctree.spawn(["sh", "-c", "sleep 300 & exec \"$@\"", "sh", *inner], contain=mode, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, grace=0.5) as t:
    line = t.stdout.readline()
    alive = [p.pid for p in t.members()]
    t.stdin.close()
    t.wait(timeout=30)
print(json.dumps({"inner": json.loads(line), "members_while_reaping": len(alive)}))
"""


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "ns",
    [
        pytest.param(["--pid", "--fork", "--mount-proc"], id="pid"),
        pytest.param(["--pid", "--fork"], id="pid-host-proc"),
        pytest.param(["--time", "--boottime", "1000", "--fork"], id="time-later"),
        pytest.param(["--time", "--monotonic", "500", "--boottime", "500", "--fork"], id="time-both"),
    ],
)
def test_a_reaper_in_a_nested_namespace_of_a_live_tree_takes_none_of_it(mode, ns):
    if "--time" in ns and not HAVE_TIMENS:
        pytest.skip("no time namespaces on this kernel")
    got = _json(_run(NESTED, mode, *ns))
    inner = got["inner"]
    assert inner["found"] == [] and inner["ended"] == 0, inner
    assert inner["sleeper_alive"]
    assert got["members_while_reaping"] >= 3  # keeper-side shell, its sleep, the reaper's side


def _run(script, *args, timeout=120):
    """run_sandboxed with argv for the script."""
    wrapped = f"import sys; sys.argv = ['x', *{list(args)!r}]\n" + script
    return run_sandboxed(wrapped, timeout=timeout)


def test_a_nested_reaper_says_it_cannot_see_every_owner():
    got = _json(_run(NESTED, "session", "--pid", "--fork", "--mount-proc"))
    assert any("nested pid or time namespace" in w for w in got["inner"]["warnings"])


# A setuid-root program, made in the sandbox's own /tmp: it takes all three uids to 0, then runs argv.
SUID_C = r"""
#define _GNU_SOURCE
#include <unistd.h>
int main(int argc, char **argv) { (void)argc; if (setresuid(0, 0, 0) != 0) return 1; execv(argv[1], argv + 1); return 127; }
"""

# An unprivileged uid forges evidence naming a dead owner, then runs a setuid-root program below it.
# argv: HOW (marker-legacy, marker-claims-root, rule)
FORGED = r"""
import json, os, subprocess, sys, time
import proctree

how = sys.argv[1]
with open("/tmp/suid.c", "w") as f:
    f.write(SUID_C)
subprocess.run(["gcc", "-o", "/tmp/suid", "/tmp/suid.c"], check=True)
os.chown("/tmp/suid", 0, 0)
os.chmod("/tmp/suid", 0o4755)
gone = subprocess.Popen(["true"]); gone.wait()
env = dict(os.environ)
user = ["setpriv", "--reuid", str(USER), "--regid", str(USER), "--clear-groups"]
body = "/tmp/suid /bin/sleep 300 & echo $!; sleep 300"
if how == "marker-legacy":
    env["PROCTREE_OWNER"] = f"{gone.pid}:1"
    argv = [*user, "sh", "-c", body]
elif how in ("marker-claims-root", "marker-own-uid"):
    ns = os.stat("/proc/self/ns/pid").st_ino, os.stat("/proc/self/ns/time").st_ino
    claim = 0 if how == "marker-claims-root" else USER
    env["PROCTREE_OWNER"] = f"{gone.pid}:1@{ns[0]}.{ns[1]}.{claim}"
    argv = [*user, "sh", "-c", body]
else:  # a copy of any program named claude, declaring a dead spawner
    shutil.copy("/bin/sh", "/tmp/claude")
    os.chmod("/tmp/claude", 0o755)
    argv = [*user, "/tmp/claude", "-c", body, "daemon", "run", "--spawned-by", json.dumps({"pid": gone.pid})]
user_proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
root_pid = int(user_proc.stdout.readline())
time.sleep(0.3)
def uids(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:4]]
# The reaper protects its own subtree: it runs beside the user's tree, not above it.
found = json.loads(subprocess.run([sys.executable, "-c", REAP], capture_output=True, text=True, check=True).stdout)
out = {
    "root_pid": root_pid,
    "root_uids": uids(root_pid),
    "root_alive": os.path.exists(f"/proc/{root_pid}") and open(f"/proc/{root_pid}/stat").read().split()[2] != "Z",
    "user_pid": user_proc.pid,
    **found,
}
for p in (root_pid, user_proc.pid):
    try:
        os.kill(p, 9)
    except ProcessLookupError:
        pass
print(json.dumps(out))
"""
REAP = r"""
import json, os, proctree
rep = proctree.reap_orphans(dry_run=True)
print(json.dumps({"found": [o.proc.pid for o in rep.candidates], "skipped": [[s.pid, s.reason] for s in rep.skipped]}))
"""


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("setpriv") is None, reason="needs gcc and setpriv")
@pytest.mark.parametrize("how", ["marker-legacy", "marker-claims-root", "marker-own-uid", "rule"])
def test_forged_evidence_never_leads_a_root_reaper_to_a_process_its_carrier_could_not_signal(how):
    script = f"SUID_C = {SUID_C!r}\nUSER = {USER}\nREAP = {REAP!r}\nimport shutil\n" + FORGED
    got = _json(_run(script, how))
    assert got["root_uids"] == [0, 0, 0]
    assert got["root_alive"]
    skipped = {pid: reason for pid, reason in got["skipped"]}
    root = got["root_pid"]
    assert root not in got["found"]
    if how in ("marker-legacy", "rule"):
        # Neither says where its pids belong: in the sandbox's nested namespace they are not placed at all,
        # so the evidence is skipped at its carrier (the credential rule on them: tests/reaper/test_reaper_select.py).
        assert got["user_pid"] in skipped and "not proof here" in skipped[got["user_pid"]], got
    else:
        assert "could not signal" in skipped[root] or "other (or unreadable) credentials" in skipped[root], got


# Spawns COMMAND (a shell line) contained in MODE from an owner process, then kills the keeper and the
# owner as a host crash would: the tree is left orphaned. Runs inside the sandbox's script.
ORPHAN = r"""
def orphan(command, mode):
    r, w = os.pipe()
    owner = (
        "import os, sys, time, proctree\n"
        "w = int(sys.argv[1])\n"
        "t = proctree.spawn(['sh', '-c', sys.argv[3]], contain=sys.argv[2], grace=0.3)\n"
        "os.write(w, b'%d %d\\n' % (os.getpid(), t.keeper_pid))\n"
        "time.sleep(300)\n"
    )
    o = subprocess.Popen([sys.executable, "-c", owner, str(w), mode, command], pass_fds=(w,))
    owner_pid, keeper = map(int, os.read(r, 100).split())
    time.sleep(0.5)
    o.send_signal(signal.SIGSTOP)
    os.kill(keeper, signal.SIGKILL)
    time.sleep(0.2)
    o.kill(); o.wait()
    time.sleep(0.2)
"""


# Root's own tree, orphaned (owner and keeper SIGKILLed), with a member that dropped to another uid:
# root reaps all of it (root evidence may signal anything).
ROOT_ORPHANS = r"""
import json, os, signal, subprocess, sys, time
import proctree

mode = sys.argv[1]
orphan("setpriv --reuid 4242 --regid 4242 --clear-groups sleep 300 & sleep 300", mode)
reap = (
    "import json, proctree\n"
    "rep = proctree.reap_orphans(grace=0.5)\n"
    "print(json.dumps({'ended': len(rep.candidates), 'ok': rep.ok, 'receipts': rep.receipts_removed,"
    " 'uids': sorted({c.proc.uid for c in rep.candidates})}))\n"
)
got = json.loads(subprocess.run([sys.executable, "-c", reap], capture_output=True, text=True, check=True).stdout)
time.sleep(0.2)
got["left"] = [p.pid for p in proctree.snapshot().procs() if not p.is_zombie and p.name == "sleep"]
print(json.dumps(got))
"""


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv")
@pytest.mark.parametrize("mode", MODES)
def test_root_still_reaps_roots_own_orphans_in_every_mode(mode):
    got = _json(_run(ORPHAN + ROOT_ORPHANS, mode))
    assert got["ok"] and got["left"] == [], got
    assert got["ended"] >= 2 and got["uids"] == [0, USER]


# Receipts: a process of another uid in the tree's session, carrying the tree's id (here: a member
# that dropped its uid; another user who takes the keeper's pid as its session id looks the same to
# the receipt) is never taken through the receipt, whose members run as its writer. Both scrubbed
# PROCTREE_OWNER, so only the receipt can name them.
RECEIPT_UID = r"""
import json, os, signal, subprocess, sys, time
import proctree

orphan(
    "env -u PROCTREE_OWNER setpriv --reuid 4242 --regid 4242 --clear-groups sleep 300 &"
    " exec env -u PROCTREE_OWNER sleep 300",
    "session",
)
find = "import json, proctree; print(json.dumps([[f.proc.pid, f.proc.uid, f.via] for f in proctree.find_orphans()]))"
found = json.loads(subprocess.run([sys.executable, "-c", find], capture_output=True, text=True, check=True).stdout)
print(json.dumps({"found": found}))
"""


def test_a_receipt_leads_only_to_processes_of_its_writers_uid():
    got = _json(_run(ORPHAN + RECEIPT_UID))
    assert got["found"], "the scrubbed root member should be found through the receipt"
    assert all(uid == 0 for _, uid, _ in got["found"])
    assert all(via.startswith("session") for _, _, via in got["found"])


def test_a_full_receipt_directory_warns_once_and_reap_says_why():
    script = r"""
import json, os, subprocess, sys
os.makedirs("/run/proctree", mode=0o700)
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k,mode=0700", "full", "/run/proctree"], check=True)
fd = os.open("/run/proctree/filler", os.O_WRONLY | os.O_CREAT, 0o600)
try:
    while True:
        os.write(fd, b"x" * 1024)
except OSError:
    os.close(fd)
# The owner is not pid 1 (an owner at pid 1 keeps no receipt: no reaper could tell it gone).
owner = (
    "import json, warnings, proctree\n"
    "with warnings.catch_warnings(record=True) as caught:\n"
    "    warnings.simplefilter('always')\n"
    "    for _ in range(2):\n"
    "        with proctree.spawn(['sleep', '0.1'], contain='session') as t:\n"
    "            t.wait()\n"
    "print(json.dumps({'warned': [str(w.message) for w in caught if w.category is proctree.ReceiptWarning]}))\n"
)
print(subprocess.run([sys.executable, "-c", owner], capture_output=True, text=True, check=True).stdout)
"""
    got = _json(run_sandboxed(script))
    assert len(got["warned"]) == 1
    assert "/run/proctree" in got["warned"][0] and "No space" in got["warned"][0]


def test_a_receipt_location_taken_by_another_user_is_reported_by_reap():
    # Every kind of pre-emption is covered at the unit level (tests/containment/test_receipts.py); here a root
    # reaper with no /run of its own finds a symlink where its temp location should be, and names it.
    script = r"""
import json, os, tempfile
import proctree
os.symlink("/", os.path.join(tempfile.gettempdir(), "proctree-0"))
os.chmod("/run", 0o555)
from proctree._containment.evidence import receipt
receipt.RUN_ROOT = "/nonexistent-run"
rep = proctree.reap_orphans(dry_run=True)
print(json.dumps({"warnings": list(rep.warnings)}))
"""
    got = _json(run_sandboxed(script))
    assert any("proctree-0" in w and "symlink" in w for w in got["warnings"]), got


if sys.platform != "linux":  # pragma: no cover
    pytest.skip("Linux namespaces only", allow_module_level=True)
