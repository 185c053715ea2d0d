"""`proctree run`'s hand-over to the native runner, proctree-init, before anything slow is imported.

The runner (csrc/keeper/init.c, built beside the extension module, and installed on the PATH as `proctree-init`)
is `proctree run` without Python: it costs what tini costs. It is handed `--contain`, `--grace`, `--stop-signal`,
`-g`, `-p`, `-q` and `-v`; a command line with any other option (`--json`, `--keep-orphans`, `--help`, and tini's
`-s`, `-e`, `-w`, which `proctree run` does not take: only proctree-init itself reads them), or one that needs a pseudo-terminal (stdin and stdout both
terminals, without `--no-pty`), stays with the Python command, as does everything when the runner was not built
(a source checkout, macOS) or PROCTREE_RUN_NATIVE=0 is set. This module must import nothing but os and sys, and
must never hand over a command line the runner would read differently from run.py.
"""

import os
import sys

RUNNER_NAME = "proctree-init"  # build_keeper.INIT_NAME, in the package directory
_VALUED = ("--contain", "--grace", "--stop-signal", "-p", "--parent-death-signal")
_FLAGS = ("-q", "--quiet", "-v", "--verbose", "-g", "--group")


def runner_path():
    """The native runner beside this package, or None when it was not built here."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), RUNNER_NAME)
    return path if os.access(path, os.X_OK) else None


def _plain_seconds(text):
    """True for what run.py's --grace takes (_common.parse_seconds: a plain decimal, 2 or 0.5); the runner's reading
    is wider (1e3), so anything else goes to the Python command, which refuses it in its own words."""
    whole, _, frac = text.partition(".")
    return (whole + frac).isdigit() and (whole + frac).isascii()


def _signal_number(text, refused):
    """The number of the signal text names as run.py reads it (proctree._validate.any_signal: a name with or
    without SIG, any case, or a number the signal module names), or None where run.py refuses it (unknown, or
    one of refused): the runner is handed numbers only, so that its own reading of names never matters."""
    import signal  # here: only a hand-over with a signal option pays for it

    name = text.strip().upper()
    if name.isdigit():
        try:
            sig = signal.Signals(int(name))
        except ValueError:
            return None
    else:
        if not name.startswith("SIG"):
            name = "SIG" + name
        found = getattr(signal, name, None)
        if not isinstance(found, signal.Signals) or name.startswith("SIG_"):
            return None
        sig = found
    return None if sig.name in refused else str(int(sig))


# Per option taking a signal: the signals run.py refuses for it.
_REFUSED = {
    "--stop-signal": ("SIGKILL", "SIGSTOP", "SIGCONT"),
    "-p": ("SIGSTOP",),
    "--parent-death-signal": ("SIGSTOP",),
}


def runner_argv(args):
    """The runner's argv for `proctree run ARGS`, or None when only the Python command can run them."""
    out, no_pty, i = [], False, 0
    while i < len(args):
        a = args[i]
        name = a.split("=", 1)[0] if a.startswith("--") else a
        if a == "--":
            out += args[i:]
            break
        if name in _VALUED:
            if "=" in a and a.startswith("--"):
                value = a.split("=", 1)[1]
            elif i + 1 < len(args):
                value = args[i + 1]
                i += 1
            else:
                return None
            if name == "--grace" and not _plain_seconds(value):
                return None
            if name in _REFUSED:
                value = _signal_number(value, _REFUSED[name])
                if value is None:
                    return None  # run.py refuses it, in its own words
            out += [name, value]
        elif a in _FLAGS:
            out.append(a)
        elif a == "--no-pty":
            no_pty = True
        elif a.startswith("-"):
            return None  # --json, --keep-orphans, --help, or an error argparse words
        else:
            out += ["--", *args[i:]]
            break
        i += 1
    else:
        return None  # no command: the Python command says so
    if out[-1:] == ["--"]:
        return None
    if {"-q", "--quiet"} & set(out[: out.index("--")]) and {"-v", "--verbose"} & set(out[: out.index("--")]):
        return None  # argparse refuses the pair
    if not no_pty and os.isatty(0) and os.isatty(1):
        return None  # CMD gets a pseudo-terminal: the Python relay
    return out


# The pid of `proctree run`'s parent when its main() began, for -p's "already gone" (the runner removes it from
# the environment CMD gets).
PARENT_ENV = "PROCTREE_RUN_PARENT"
PROGRAM = "proctree run"  # the runner's argv[0]: the name its messages give


def hand_over(args, parent=None):
    """Replace this process by the native runner for `proctree run ARGS` where it can run them; else return.

    parent: our parent's pid when main() began: with -p, the runner judges "our parent died before we asked"
    against it, not against its own first look (after the interpreter's start)."""
    if os.environ.get("PROCTREE_RUN_NATIVE", "1") == "0":
        return
    argv = runner_argv(args)
    path = runner_path() if argv is not None else None
    if path is None:
        return
    import signal  # here: only a hand-over pays for it

    # What the interpreter ignores for itself, exec would pass on ignored to CMD (Popen's restore_signals).
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    # argv[0] names the program in its every message: it speaks as `proctree run`, the command the user typed.
    if parent is not None and ("-p" in argv[: argv.index("--")] or "--parent-death-signal" in argv[: argv.index("--")]):
        os.execve(path, [PROGRAM, *argv], {**os.environ, PARENT_ENV: str(parent)})
    os.execv(path, [PROGRAM, *argv])
