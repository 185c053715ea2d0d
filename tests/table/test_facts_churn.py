"""Facts while processes are born and die fast, with pids reused at once: never an exception, never one
process's facts under another's identity.

It runs as pid 1 of a fresh PID namespace whose pid_max is made small (400), so the churn wraps the pid space
every few hundred forks and every pid is reused again and again. The churner marks each child from birth: it
sets its own name to "g<k>" and its working directory to d<k> just before each fork, so the child's stat name
and cwd both say k from its first instant, and records (pid, start time, k) of every child in a file. A facts
read that mixed two processes behind one pid would show a name and a cwd that disagree, or a k that is not
the recorded one for that (pid, start time). 1,000 rounds of all_facts() and of facts_of() on the last
snapshot run against it; then every row is checked against the records.
"""

import json
import sys

import pytest

from support.treekit import run_in_pid_namespace

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux PID namespaces")

SCRIPT = r"""
import ctypes, json, os, sys, tempfile, time
import proctree

try:
    with open("/proc/sys/kernel/pid_max", "w") as f:
        f.write("400")
except OSError as exc:
    print(json.dumps({"skip": f"pid_max is not per namespace here: {exc}"}))
    sys.exit(0)

K = 8
top = tempfile.mkdtemp(prefix="facts-churn-")
dirs = [os.path.join(top, f"d{k}") for k in range(K)]
for d in dirs:
    os.mkdir(d)
records = os.path.join(top, "records")
libc = ctypes.CDLL(None, use_errno=True)

def start_time_of(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    return int(raw[raw.rfind(b")") + 2:].split()[19])

def churner(stop_r):
    # Forks children marked k by name and cwd; each lives 0-1 ms; records every one; stops when stop_r is readable.
    import random, select
    out = open(records, "w", buffering=1)
    n = 0
    while not select.select([stop_r], [], [], 0)[0]:
        k = n % K
        libc.prctl(15, ctypes.c_char_p(b"g%d" % k), 0, 0, 0)  # PR_SET_NAME: the child is born with it
        os.chdir(dirs[k])
        pid = os.fork()
        if pid == 0:
            if random.random() < 0.5:
                time.sleep(random.random() * 0.001)
            os._exit(0)
        out.write(f"{pid} {start_time_of(pid)} {k}\n")  # unreaped: the pid cannot be reused yet
        os.waitpid(pid, 0)
        n += 1
        if n % 64 == 0:
            time.sleep(0.002)  # a shared machine: bound the fork rate
    out.close()
    os._exit(0)

stop_r, stop_w = os.pipe()
cpid = os.fork()
if cpid == 0:
    os.close(stop_w)
    churner(stop_r)
os.close(stop_r)

seen = []  # (pid, start_time, name, cwd) of churn children in answers
while not os.path.exists(records):
    time.sleep(0.001)
errors = []
last = proctree.snapshot()
deadline = time.monotonic() + 60
i = 0
# 1,000 rounds at least, and on until the churner has made some 2,500 children (its records' size says so).
while i < 1000 or (os.stat(records).st_size < 2500 * 9 and time.monotonic() < deadline):
    i += 1
    try:
        rows = proctree.all_facts(["cwd", "cmdline"]) if i % 2 == 0 else proctree.facts_of(list(last.values()), ["cwd"])
        for f in rows:
            if f.ppid == cpid:
                seen.append((f.pid, f.start_time, f.name, f.cwd))
        if i % 2 == 1:
            wanted = {p.pid: p.start_time for p in last.values()}
            for f in rows:
                if wanted.get(f.pid) != f.start_time:
                    errors.append(f"facts_of gave {f.identity}, asked for {f.pid} started at {wanted.get(f.pid)}")
        last = proctree.snapshot()
    except Exception as exc:
        errors.append(f"round {i}: {type(exc).__name__}: {exc}")
os.close(stop_w)
os.waitpid(cpid, 0)

made = {}
with open(records) as f:
    for line in f:
        pid, start, k = map(int, line.split())
        made[(pid, start)] = k
wrong = 0
pids = set()
for pid, start, name, cwd in seen:
    pids.add(pid)
    k = made.get((pid, start))
    if k is None:
        errors.append(f"pid {pid} started at {start} ({name}) was never made by the churner")
        continue
    if name != f"g{k}" or cwd not in ("", dirs[k]):  # "" for a zombie: it has no cwd left
        wrong += 1
        errors.append(f"pid {pid} started at {start}: name {name}, cwd {cwd}, made as {k}")
import shutil
shutil.rmtree(top, ignore_errors=True)
print(json.dumps({"rounds": i, "children": len(made), "seen": len(seen), "pids": len(pids), "wrong": wrong, "errors": errors[:20]}))
"""


def test_facts_under_churn_with_pids_reused_never_mix_processes():
    res = run_in_pid_namespace(SCRIPT, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["errors"] == [], out
    assert out["rounds"] >= 1000 and out["children"] > 1000, (
        out
    )  # the pid space (300..399 after the first wrap) was reused many times
    assert out["seen"] > 100 and out["pids"] > 50, out  # the reads did meet the churn
    print(out)
