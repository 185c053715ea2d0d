"""What the benchmark scripts share: a crowd of extra processes, C helpers built with gcc, timing.

The crowd's processes are sleepers forked by a small C program (FORKER_C);
every one has PR_SET_PDEATHSIG, and Crowd.stop() ends them (SIGTERM, then
SIGKILL) and waits until init has collected them, so nothing outlives a run
and no zombie inflates the next measurement. Nothing here signals anything
it did not start. Linux only.
"""

import ctypes
import os
import signal
import statistics
import subprocess
import time

import proctree

# forker flat N: N sleepers. forker tree F G: F children with G children each.
# Prints "ready" once all exist; on SIGTERM (or stdin EOF) every process that
# has children SIGTERMs and reaps them before it exits, so no zombie is left
# for init to collect later (zombies would inflate the next measurement).
FORKER_C = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig; stop = 1; }

static pid_t *kids;
static int nkids;

static void guard(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
}

static void wait_and_reap(void)
{
    while (!stop)
        pause();
    for (int i = 0; i < nkids; i++)
        kill(kids[i], SIGTERM);
    for (int i = 0; i < nkids; i++)
        while (waitpid(kids[i], NULL, 0) < 0 && errno == EINTR)
            ;
    _exit(0);
}

static void spawn(int n, int grandkids)
{
    kids = calloc((size_t)n, sizeof *kids);
    for (int i = 0; i < n; i++) {
        pid_t me = getpid();
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            stop = 1;
            wait_and_reap();
        }
        if (pid == 0) {
            guard(me);
            free(kids);
            nkids = 0;
            if (grandkids > 0) {
                spawn(grandkids, 0);
                wait_and_reap();
            }
            signal(SIGTERM, SIG_DFL);
            for (;;)
                pause();
        }
        kids[nkids++] = pid;
    }
}

int main(int argc, char **argv)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    guard(getppid());
    if (argc == 3 && strcmp(argv[1], "flat") == 0)
        spawn(atoi(argv[2]), 0);
    else if (argc == 4 && strcmp(argv[1], "tree") == 0)
        spawn(atoi(argv[2]), atoi(argv[3]));
    else
        return 2;
    /* the grandchildren of a tree exist once each child has forked them */
    if (argc == 4)
        sleep(0), usleep(200000);
    printf("ready %d\n", nkids);
    fflush(stdout);
    wait_and_reap();
}
"""


def compile_c(src, out, shared=False):
    """Build C source src into out with gcc -O2 (a shared library when shared); return out."""
    c = out + ".c"
    with open(c, "w") as f:
        f.write(src)
    extra = ["-shared", "-fPIC"] if shared else []
    subprocess.run(["gcc", "-O2", "-Wall", *extra, "-o", out, c], check=True)
    return out


def build(tmp, floor_c):
    """(the floor library with floor_scan() -> int, the forker's path), built in tmp."""
    lib = ctypes.CDLL(compile_c(floor_c, os.path.join(tmp, "floor.so"), shared=True))
    lib.floor_scan.restype = ctypes.c_int
    return lib, compile_c(FORKER_C, os.path.join(tmp, "forker"))


class Crowd:
    """Extra processes from the forker; always ended by stop()."""

    def __init__(self, forker):
        self.forker = forker
        self.popens = []

    def start(self, *args, env=None):
        """Start the forker with args ("flat", N) or ("tree", F, G); return its pid once all exist."""
        p = subprocess.Popen([self.forker, *map(str, args)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
        self.popens.append(p)
        line = p.stdout.readline().decode()
        if not line.startswith("ready"):
            raise RuntimeError(f"forker {args} failed: {line!r} rc={p.poll()}")
        return p.pid

    def stop(self):
        for p in self.popens:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.popens:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()  # its descendants die by PR_SET_PDEATHSIG
                p.wait()
        self.popens = []
        # wait until the table is back to its size (init may reap late)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
            p.is_zombie for p in proctree.snapshot().values() if p.ppid in (1, os.getpid())
        ):
            time.sleep(0.05)


def time_ns(fn):
    t = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - t


def side_by_side(fns, rounds):
    """Interleave the functions round by round; return {name: median seconds}."""
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(time_ns(fn))
    return {name: statistics.median(v) / 1e9 for name, v in samples.items()}


def table(head, rows, markdown):
    """head, then rows of (measurement, value, target, verdict): a Markdown table or aligned text."""
    if markdown:
        lines = [head, "", "| measurement | value | target | |", "|---|---|---|---|"]
        lines += [f"| {w} | {v} | {tg} | {ok} |" for w, v, tg, ok in rows]
    else:
        width = max(len(w) for w, *_ in rows)
        lines = [head, ""] + [f"{w:<{width}}  {v:>14}  {tg:>8}  {ok}".rstrip() for w, v, tg, ok in rows]
    return "\n".join(lines)
