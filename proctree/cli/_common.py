"""Helpers shared by the subcommands: argument parsing and error output."""
import sys


def fail(message, code=2):
    """Print message as an error and return the exit code to use."""
    sys.stderr.write(f"proctree: {message}\n")
    return code


def parse_pid(text):
    """Parse a PID argument; exits with a clear message on anything but a positive integer."""
    try:
        pid = int(text, 10)
    except ValueError:
        raise SystemExit(fail(f"not a pid: {text!r}")) from None
    if pid <= 0:
        raise SystemExit(fail(f"not a pid: {text!r} (must be a positive integer)"))
    return pid
