"""Children a test starts with subprocess.Popen, each killed (through its Popen) and reaped at the end."""

import contextlib
import subprocess


@contextlib.contextmanager
def popens():
    """Yields start(args=("sleep", "60"), **popen_keywords) -> Popen; at the block's end every child started
    through it has its stdin closed, is killed if still running, and is reaped (one reaped elsewhere is fine)."""
    started: list[subprocess.Popen] = []

    def start(args=("sleep", "60"), **kw):
        p = subprocess.Popen(list(args), **kw)
        started.append(p)
        return p

    try:
        yield start
    finally:
        for p in started:
            if p.stdin is not None:
                p.stdin.close()
            if p.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
            with contextlib.suppress(ChildProcessError):
                p.wait(10)
