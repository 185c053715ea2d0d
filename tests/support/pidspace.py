"""Script fragments for pid-exhaustion tests: a small pid_max, then a fork storm that takes every pid.

Both run inside a fresh pid namespace (support.treekit.run_in_pid_namespace,
support.sandbox.run_sandboxed), where the storm fills that namespace only and
dies with its pid 1.
"""

# For a script run as pid 1 of a fresh pid namespace: a small pid_max there (pid_max is per pid
# namespace on recent kernels), or a line {"skip": why} on stdout and exit 0 where it cannot be set.
SMALL_PID_MAX = r"""
import json, sys
try:
    with open("/proc/sys/kernel/pid_max", "w") as f:
        f.write("500")  # small: once pids wrap, the kernel hands out 300..499 only
except OSError as exc:
    print(json.dumps({"skip": f"pid_max is not per namespace here: {exc}"}))
    sys.exit(0)
"""


# A fork storm for pid-exhaustion tests, run in a pid namespace with a small pid_max (argv: W): forks
# children that sleep until fork fails, writes "full\n" to W once, then keeps taking every pid that is freed.
# Half the children are daemons (orphaned at once, in sessions of their own: session mode finds them by marker only).
FORK_STORM = r"""
import os, sys, time
w = int(sys.argv[1])
told = False
while True:
    try:
        pid = os.fork()
    except OSError:
        if not told:
            os.write(w, b"full\n")
            told = True
        time.sleep(0.001)
        continue
    if pid == 0:
        if os.getpid() % 2:
            try:
                if os.fork():
                    os._exit(0)  # half are daemons: orphaned at once, and in a session of their own
                os.setsid()
            except OSError:
                pass  # no pid for the daemon: this child stays as it is
        time.sleep(300)
        os._exit(0)
"""
