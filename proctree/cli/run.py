"""`proctree run [--contain MODE] [--grace S] [--stop-signal SIG] [-g] [-p SIG] [--keep-orphans] [--env-file FILE]
[-q|-v] [--json] [--no-pty] -- CMD ARGS...`

Runs CMD as a contained tree in the foreground: stdio and every inherited fd
pass through, SIGINT/SIGTERM/SIGHUP (and QUIT, USR1, USR2, WINCH) are forwarded
to CMD's process group (TERM, INT and HUP followed by SIGCONT, so a stopped CMD
still ends), every other signal but those in NOT_FORWARDED to CMD alone (SIGPWR,
SIGALRM, real-time signals, ...), and the exit status is CMD's (128+N for a
signal). Signals are blocked from main()'s first line (hold_signals), so one
sent while this starts is forwarded, not lost; CMD starts with none blocked.
What CMD leaves behind when it exits gets the stop signal (--stop-signal,
SIGTERM by default) once, and none at all if a forwarded TERM, INT or HUP
reached it already.
Nothing it started is left running when this returns; if this process is
killed outright, the keeper ends the tree (owner death). If the keeper is
killed, CMD's status cannot be known: exit 125 with the reason.

When stdin and stdout are terminals (and not --no-pty), CMD gets a pseudo-terminal of its
own and _pty.Relay carries keys and output between it and the user's terminal
(vim, less, `bash -i`, Ctrl+Z and `fg` work as under a shell).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import warnings

import proctree
from proctree._validate import any_signal

from ._common import CliError, add_output_options, parse_seconds, parse_signal, printable, subcommand

STATUSES = [
    ("N", "CMD's own exit status; 128+N when a signal N ended it"),
    ("2", "bad input"),
    ("125", "CMD's keeper was killed: CMD's status cannot be known"),
    ("126", "CMD could not be started"),
    ("127", "CMD was not found"),
    ("130", "interrupted (Ctrl+C) before CMD was started"),
]

# Every signal is forwarded to CMD but these (as dumb-init and tini): SIGKILL and SIGSTOP cannot be caught, the
# synchronous ones (a fault, abort) are about this process itself, SIGCHLD is ours, and job control (TSTP, TTIN,
# TTOU, CONT) stays this process's own: Ctrl+Z stops it as any job, and the pty relay passes it on itself.
NOT_FORWARDED = (
    "SIGKILL",
    "SIGSTOP",
    "SIGSEGV",
    "SIGBUS",
    "SIGILL",
    "SIGFPE",
    "SIGTRAP",
    "SIGSYS",
    "SIGABRT",
    "SIGCHLD",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGCONT",
)


def forwarded_signals():
    """The signals `proctree run` forwards to CMD (real-time ones included), in ascending order."""
    skip = {getattr(signal, n) for n in NOT_FORWARDED if hasattr(signal, n)}
    return sorted(s for s in signal.valid_signals() if s not in skip)


def hold_signals():
    """Block the forwarded signals from `proctree run`'s first line, so one sent while it starts (imports, option
    parsing) is queued, not lost (nor fatal to it): run() unblocks them once its handlers are in. Returns the mask
    this process was started with."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, forwarded_signals())


def release_signals(mask):
    """Return to mask, the one hold_signals() found; a held signal still pending (it came for CMD after CMD's run
    ended) is dropped, never acted on by this process (ignoring a pending signal discards it)."""
    late = signal.sigpending() - set(mask)
    old = {s: signal.signal(s, signal.SIG_IGN) for s in late}
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    for s, h in old.items():
        signal.signal(s, h)


def register(sub):
    p = subcommand(
        sub,
        "run",
        run=run,
        description="Run CMD in the foreground as a contained tree; when it ends (or is "
        "interrupted, or this command is killed) nothing it started is left running. "
        "What CMD left running, and was ended, is said in one line on stderr.",
        statuses=STATUSES,
    )
    p.add_argument(
        "--contain",
        default="auto",
        metavar="{auto,cgroup,subreaper,session}",
        help="containment mode (default: auto, the strongest that works here)",
    )
    p.add_argument(
        "--grace",
        type=parse_seconds,
        default=2.0,
        metavar="S",
        help="seconds between SIGTERM and SIGKILL at teardown (default 2)",
    )
    p.add_argument(
        "--stop-signal",
        type=parse_signal,
        default="SIGTERM",
        metavar="SIG",
        help="the signal that stops what CMD leaves behind, once each (default SIGTERM; not KILL, STOP or CONT)",
    )
    p.add_argument(
        "-g",
        "--group",
        action="store_true",
        help="forward every signal to CMD's process group (tini's -g); by default only HUP, INT, QUIT, TERM, "
        "USR1, USR2 and WINCH go to the group, the rest to CMD alone",
    )
    p.add_argument(
        "-p",
        "--parent-death-signal",
        type=parse_parent_death_signal,
        default=None,
        metavar="SIG",
        help="when this command's parent dies, SIG comes to it and is forwarded as any signal (tini's -p; Linux; "
        "any signal but STOP: KILL ends CMD's tree at once)",
    )
    p.add_argument(
        "--keep-orphans", action="store_true", help="when CMD exits, let what it left run on; return once they end too"
    )
    p.add_argument(
        "--env-file",
        action="append",
        nargs="?",
        const=".env",
        default=None,
        metavar="FILE",
        help="run CMD with this .env file's variables (honcho's `run`; repeatable, later files win; alone: .env)",
    )
    add_output_options(
        p,
        quiet="say nothing about what CMD left running (errors only)",
        verbose="also say when CMD left nothing running, and name each process ended with its pid",
        json_help="print the teardown report (or the error) as one JSON object on stderr",
    )
    p.add_argument(
        "--no-pty",
        action="store_true",
        help="never give CMD a pseudo-terminal: it shares ours (default: one of its own when stdin is a terminal)",
    )
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...")
    # stdout belongs to CMD: the JSON report, errors included, goes to stderr.
    p.set_defaults(json_on_stderr=True)


def leftovers_line(report, verbose=False, most=8):
    """One line on what was ended after CMD exited (None when nothing was left, unless verbose)."""
    ended = [*report.exited, *report.killed, *report.late]
    if not ended and not report.survivors:
        return "proctree run: CMD left nothing running" if verbose else None
    if verbose:
        names = [f"{printable(p.name)} ({p.pid})" for p in ended]
    else:
        counts: dict[str, int] = {}
        for p in ended:
            counts[p.name] = counts.get(p.name, 0) + 1
        names = [printable(n) + (f" x{c}" if c > 1 else "") for n, c in counts.items()]
    listed = ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")
    line = f"proctree run: ended {len(ended)} process{'es' if len(ended) != 1 else ''} CMD left running"
    line += f": {listed}" if ended else ""
    if report.killed:
        line += f" ({len(report.killed)} needed SIGKILL)"
    if report.survivors:
        line += f"; {len(report.survivors)} SURVIVED: " + ", ".join(
            f"{printable(p.name)} ({p.pid})" for p in report.survivors[:most]
        )
    return line


def _exit_code(rc):
    return 128 - rc if rc < 0 else rc


# Our parent's pid when main() began (cli/__init__.py sets it), for -p's "already gone".
PARENT_AT_START: int | None = None


def parse_parent_death_signal(text):
    """An argparse type: -p's signal, by name or number; any but SIGSTOP (which would stop this command for
    good). ArgumentTypeError otherwise."""
    try:
        sig = any_signal(text, "signal")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (a name such as SIGUSR1 or USR1, or a number)") from None
    if sig == signal.SIGSTOP:
        raise argparse.ArgumentTypeError("SIGSTOP would stop proctree run itself for good: choose another signal")
    return int(sig)


def watch_parent(sig, parent):
    """Have sig sent to this process when its parent dies (tini's -p): prctl(PR_SET_PDEATHSIG), then sig at once if
    the parent (pid `parent` when this command began) is gone already. CliError where the system has no such call."""
    if not sys.platform.startswith("linux"):
        raise CliError("-p/--parent-death-signal needs Linux (prctl PR_SET_PDEATHSIG)")
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, int(sig), 0, 0, 0) != 0:
        raise CliError.from_exception(OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)"), code=126)
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def quiet_warnings(verbose):
    """CMD's terminal and output are CMD's: no Python warning (no receipt directory, say) is printed into them.
    With -v each is said in one line of ours on stderr ("proctree run: warning: ..."), else none."""

    def say(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(f"proctree run: warning: {printable(str(message))}\n")

    if verbose:
        warnings.simplefilter("always")
        warnings.showwarning = say
    else:
        warnings.simplefilter("ignore")


def run(args):
    from proctree import spawn

    quiet_warnings(getattr(args, "verbose", False))

    parent = PARENT_AT_START if PARENT_AT_START is not None else os.getppid()
    cmd = list(args.cmd)
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    if not cmd:
        raise CliError("no command given (usage: proctree run [options] -- CMD ARGS...)")
    grace = args.grace
    if args.env_file:
        from ._plan import read_env_files

        os.environ.update(read_env_files(args.env_file))  # CMD's environment is ours: spawn() passes it on
    # stdout too: `proctree run -- CMD | grep x` must not hand CMD a terminal (and its CRLFs) for a pipe.
    use_pty = not args.no_pty and os.isatty(0) and os.isatty(1)

    # Signals that arrive before the tree exists are held, then forwarded.
    pending: list[int] = []
    current: list[proctree.Tree] = []  # the tree, once it exists

    def forward(signum, frame):
        if not current:
            pending.append(signum)
        else:
            current[0].send_signal(signum, group=args.group)

    # A signal this process was started ignoring (SIGHUP under nohup, SIGINT and
    # SIGQUIT in a background job; SIGPIPE and SIGXFSZ, which Python ignores)
    # stays ignored: CMD inherits it ignored, as it would started on its own,
    # and nothing is forwarded.
    sigs = forwarded_signals()
    old = {s: signal.signal(s, forward) for s in sigs if signal.getsignal(s) is not signal.SIG_IGN}
    # Then nothing blocked: what main() held arrives now (and is forwarded once CMD exists), and a mask this
    # process inherited is not passed on to CMD (the keeper gives CMD the mask it was started with).
    old_mask = signal.pthread_sigmask(signal.SIG_SETMASK, ())
    tree = report = None
    try:
        if args.parent_death_signal is not None:
            watch_parent(args.parent_death_signal, parent)  # a handler is in: it is forwarded once CMD exists
        try:
            # keep_orphans in the keeper either way: what CMD leaves is ended here,
            # so that the report names it (the keeper still ends all if we die).
            tree = spawn(
                cmd,
                contain=args.contain,
                grace=grace,
                keep_orphans=True,
                close_fds=False,
                pty=use_pty,
                stop_signal=args.stop_signal,
            )
        except proctree.KeeperLost as exc:  # killed before it reported the start; what it started is ended
            raise CliError(str(exc), code=125, kind="KeeperLost") from None
        except FileNotFoundError:
            raise CliError(f"{cmd[0]}: command not found", code=127, kind="FileNotFoundError") from None
        except PermissionError:
            raise CliError(f"{cmd[0]}: permission denied", code=126, kind="PermissionError") from None
        except OSError as exc:
            raise CliError.from_exception(exc, code=126) from None
        except ValueError as exc:  # a bad --contain, said in spawn()'s words
            raise CliError(str(exc)) from None
        current.append(tree)
        # CMD has its cwd now: ours must not keep that directory busy (an umount under a container init); the
        # keeper leaves it too.
        os.chdir("/")
        for s in pending:
            tree.send_signal(s, group=args.group)
        try:
            if use_pty:
                from ._pty import Relay

                Relay(tree).run()  # until CMD exits; our terminal restored whatever happens
            rc = tree.wait()
        except proctree.KeeperLost as exc:  # CMD's status is unknowable; what was left has been ended
            raise CliError(str(exc), code=125, kind="KeeperLost") from None
        if args.keep_orphans:
            tree.join()  # until the last orphan has ended by itself
        report = tree.terminate(grace)
        if args.json:
            ended = [p.pid for p in (*report.exited, *report.killed, *report.late)]
            sys.stderr.write(
                json.dumps({"returncode": rc, "mode": tree.mode, "ended": ended, **report.to_dict()}) + "\n"
            )
        elif not getattr(args, "quiet", False):
            line = leftovers_line(report, verbose=getattr(args, "verbose", False))
            if line:
                sys.stderr.write(line + "\n")
        return _exit_code(rc)
    finally:
        if tree is not None and report is None:
            tree.terminate(grace)  # interrupted in here: still leave nothing behind
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)  # blocked again first: one arriving now waits
        for s, h in old.items():
            signal.signal(s, h)
