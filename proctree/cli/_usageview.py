"""How the commands show usage (`proctree tree --stats`, `proctree up --stats`): sizes, CPU seconds, sums.

Pure formatting over proctree.Facts and proctree.Usage, plus the one check that facts can be read here at all,
so a command asked for --stats on a system without them says so in one line instead of a traceback.
"""

import errno
import os

import proctree

from ._common import CliError

_UNITS = ("K", "M", "G", "T", "P")


def size(n):
    """Bytes as ps and top show them, 1024-based, three significant figures at most: 512B 4.0K 13M 1.2G."""
    if n < 1024:
        return f"{n}B"
    value = float(n)
    for unit in _UNITS:
        value /= 1024
        if value < 1024 or unit == _UNITS[-1]:
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    raise AssertionError("unreachable")  # the last unit returns


def cpu(seconds):
    """CPU seconds: 0.00s under a minute (two decimals), then m:ss as ps's TIME column, then h:mm:ss."""
    if seconds < 60:
        return f"{seconds:.2f}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def proc_columns(f):
    """The --stats columns of one process (a Facts): rss, then user+system CPU."""
    return f"rss {size(f.rss)} cpu {cpu(f.cpu_user + f.cpu_system)}"


def summary(u):
    """One Usage in words: '3 procs, rss 12M, vms 40M, cpu 1.50s (user 1.20s, sys 0.30s)'."""
    procs = "1 proc" if u.processes == 1 else f"{u.processes} procs"
    return (
        f"{procs}, rss {size(u.rss)}, vms {size(u.vms)}, cpu {cpu(u.cpu_total)} "
        f"(user {cpu(u.cpu_user)}, sys {cpu(u.cpu_system)})"
    )


def require_facts(option="--stats"):
    """CliError (status 2) when this system's process facts cannot be read (not Linux, for now)."""
    try:
        proctree.facts(os.getpid(), attrs=[])
    except OSError as exc:
        if exc.errno != errno.ENOSYS:
            raise
        raise CliError(
            f"{option} needs process facts (memory, CPU times), which proctree reads on Linux only for now",
            kind="OSError",
        ) from None


def facts_by_pid(procs):
    """pid -> Facts for the procs still there as the same processes (one pass), {} where facts are not read.

    Not Linux (ENOSYS): {} is the honest answer for the kernel-thread filter (no Linux kernel threads there);
    --stats checks require_facts() first, so its columns are never silently empty.
    """
    try:
        return {f.pid: f for f in proctree.facts_of(procs, attrs=[])}
    except OSError as exc:
        if exc.errno != errno.ENOSYS:
            raise
        return {}


def subtree_usage(steps, facts):
    """pid -> the Usage of pid and everything drawn below it, from a drawing-order walk and pid -> Facts.

    steps: (pid, depth, last, kids) in pre-order, as `proctree tree` walks; kids are the pids drawn below.
    A pid without facts (gone before the read) counts nowhere, nor does a zombie (proctree.Usage.of_facts's
    rule), but their drawn children still do. Pure.
    """
    own: dict[int, tuple[int, int, int, float, float]] = {}
    for pid, _, _, kids in reversed(steps):  # children before their parent
        f = facts.get(pid)
        n, rss, vms, user, system = proctree.Usage.of_facts(() if f is None else (f,))
        for kid in kids:
            k = own[kid]
            n, rss, vms, user, system = n + k[0], rss + k[1], vms + k[2], user + k[3], system + k[4]
        own[pid] = (n, rss, vms, user, system)
    return {pid: proctree.Usage(*sums) for pid, sums in own.items()}
