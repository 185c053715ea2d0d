"""What `proctree reap` and `proctree demo` leave behind, and what they say: one reap of an orphaned tree removes
its receipt (every mode), the demo leaves no receipt, a dry run lists only what the real run with the caller's
rights would do, and `reap --tag` says nothing about other trees unless -v.

The reaps run as root inside a sandbox (support.sandbox: fresh pid, mount and cgroup namespaces, private /tmp,
/run and cgroup2 mount): whatever they decide, they can end or remove nothing outside.
"""

import io
import json

import pytest

from proctree._reaper.model import ReapReport, Skipped
from proctree.cli import reap as reap_cli
from support.sandbox import run_sandboxed

ONE_REAP = r"""
import json, os, subprocess, sys, time
from proctree._containment.evidence import receipt
OWNER = '''
import sys, time, proctree
t = proctree.spawn(["sh", "-c", "sleep 300 & sleep 300"], contain=sys.argv[1])
print(t.keeper_pid, flush=True)
time.sleep(300)
'''
out = {}
for mode in sys.argv[1:]:
    o = subprocess.Popen([sys.executable, "-c", OWNER, mode], stdout=subprocess.PIPE, text=True, start_new_session=True)
    keeper = int(o.stdout.readline())
    d = receipt.directory()
    before = sorted(os.listdir(d))
    for pid in (o.pid, keeper):
        os.kill(pid, 19)  # both stopped, then both killed: neither ends the tree for the other
    for pid in (o.pid, keeper):
        os.kill(pid, 9)
    o.wait()
    r = subprocess.run([sys.executable, "-m", "proctree", "reap", "--grace", "1"], capture_output=True, text=True)
    out[mode] = {"before": before, "after": sorted(os.listdir(d)), "said": r.stdout}
print(json.dumps(out))
"""


def _last_json(r):
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_one_reap_removes_the_receipt_of_the_tree_it_ends_in_every_mode():
    got = _last_json(run_sandboxed(ONE_REAP.replace("sys.argv[1:]", repr(["cgroup", "subreaper", "session"]))))
    for mode, seen in got.items():
        assert len(seen["before"]) == 1, (mode, seen)
        assert seen["after"] == [], (mode, seen)
        assert f"removed receipt /run/proctree/{seen['before'][0]}" in seen["said"], (mode, seen)


DEMO = r"""
import json, os, subprocess, sys
from proctree._containment.evidence import receipt
d = receipt.directory()
codes = [subprocess.run([sys.executable, "-m", "proctree", "demo", "-q"], capture_output=True).returncode for _ in range(2)]
print(json.dumps({"codes": codes, "receipts": sorted(os.listdir(d))}))
"""


def test_the_demo_leaves_no_receipt():
    got = _last_json(run_sandboxed(DEMO, timeout=180))
    assert got == {"codes": [0, 0], "receipts": []}


DRY_AS_NOBODY = r"""
import json, os, subprocess, sys
import proctree
from proctree._containment import cgroup as _cgroup
from proctree._table import binding as _binding
mount = _cgroup.find_mount()
child = subprocess.Popen(["true"])
start = _binding.proc(child.pid).start_time
child.wait()  # reaped: its pid names nobody now
ns = os.stat("/proc/self/ns/pid").st_ino, os.stat("/proc/self/ns/time").st_ino
leftover = os.path.join(mount, f"proctree-{child.pid}-{start}-{ns[0]}-{ns[1]}")
os.mkdir(leftover)  # root's: an unprivileged reaper cannot remove it
nobody = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable]
runs = {}
for how in (["--dry-run"], []):
    r = subprocess.run([*nobody, "-c", "print('RAN', flush=True)"], capture_output=True, text=True, cwd="/")
    if "RAN" not in r.stdout:
        runs = None
        break
    r = subprocess.run([*nobody, "-m", "proctree", "reap", *how], capture_output=True, text=True, cwd="/")
    runs[" ".join(how) or "real"] = r.stdout
print(json.dumps({"path": leftover, "runs": runs, "kept": os.path.isdir(leftover)}))
os.rmdir(leftover)
"""


def test_a_dry_run_lists_only_what_the_callers_rights_let_the_real_run_do():
    got = _last_json(run_sandboxed(DRY_AS_NOBODY))
    if got["runs"] is None:
        pytest.skip("the unprivileged user cannot run this interpreter with proctree")
    assert got["kept"]
    assert f"cgroup {got['path']}" not in got["runs"]["real"], got
    assert f"would remove cgroup {got['path']}" not in got["runs"]["--dry-run"], got


def _said(report, tag, verbose):
    out, err = io.StringIO(), io.StringIO()
    reap_cli._print_text(report, out, err, verbose, tag)
    return out.getvalue() + err.getvalue()


def test_reap_with_a_tag_says_nothing_about_other_trees_unless_verbose():
    report = ReapReport(
        skipped=(Skipped(12, "marker 3:70:web@1.2.0: owner alive"), Skipped(13, "marker 4:80:db@1.2.0: owner alive")),
        warnings=("this reaper runs in a nested pid or time namespace: ...", "2 process(es) with a denied marker"),
        dry_run=True,
    )
    said = _said(report, "web", verbose=False)
    assert "web" in said and ":db@" not in said and "nested" not in said and "denied" not in said
    said = _said(report, "web", verbose=True)
    assert ":db@" in said and "nested" in said and "denied" in said
    said = _said(report, None, verbose=False)
    assert ":db@" in said and "nested" in said
