"""Foreground commands: short commands the host runs and waits for, kept apart from services.

One supervisor holds both, in two collections with two kill entry points
named for what they own: kill_foreground() ends foreground commands and never
a service; stopping services never touches a foreground command. Splitting
them into two registries is how a force-stop ends up killing the user's dev
server, or how a quit leaves a build running. Each command is a contained
tree (proctree.spawn_async) whose merged output goes to a bounded LogRing.

This module must never signal anything but the trees it spawned.
"""

from __future__ import annotations

import asyncio
import errno
import subprocess
from dataclasses import dataclass
from typing import Any

from .._containment.spawn import Tree
from .._validate import check_command, check_seconds
from .killnow import kill_now
from .logring import LogRing, Row
from .spec import build_env, check_cwd, check_env
from .treeio import close_reader, exit_fields, open_reader, quietly, wake
from .treerun import always_ended, spawn_command


@dataclass(frozen=True)
class ForegroundResult:
    """How a foreground command ended.

    exit_code / exit_signal as in ServiceSnapshot; output: its rows' text
    (control sequences stripped) joined with newlines; rows: the rows
    themselves (raw keeps the colours); dropped: rows lost because the output
    outgrew the ring; timed_out: the timeout ended it; killed: kill_foreground()
    or reap_sync() ended it; kill_incomplete: the teardown could not confirm
    its whole tree is gone.
    """

    command: str | tuple[str, ...]
    exit_code: int | None
    exit_signal: str | None
    output: str
    rows: tuple[Row, ...]
    dropped: int
    elapsed: float
    timed_out: bool = False
    killed: bool = False
    kill_incomplete: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class _Job:
    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.killed = False
        self.kill_event = asyncio.Event()
        self.loop = asyncio.get_running_loop()


class Foreground:
    """The foreground commands of one supervisor."""

    def __init__(self, *, contain: str, grace: float, log_rows: int, log_line: int) -> None:
        self.contain = contain
        self.grace = grace
        self.log_rows = log_rows
        self.log_line = log_line
        self._jobs: set[_Job] = set()

    def count(self) -> int:
        return len(self._jobs)

    async def run(
        self,
        command: Any,
        *,
        cwd: Any = None,
        env: Any = None,
        timeout: float | None = None,
        input: bytes | str | None = None,
    ) -> ForegroundResult:
        cmd = check_command(command)
        where = check_cwd(cwd)
        full_env = build_env(check_env(env))
        limit = None if timeout is None else check_seconds(timeout, "timeout")
        if input is not None and not isinstance(input, (bytes, str)):
            raise TypeError(f"input must be bytes, str or None, not {type(input).__name__}")
        data = input.encode() if isinstance(input, str) else input
        shell = isinstance(cmd, str)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        # A command that cannot start raises here, as subprocess.run does (FileNotFoundError, ...).
        try:
            tree = await spawn_command(
                cmd,
                cwd=where,
                env=full_env,
                stdin=subprocess.DEVNULL if data is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                contain=self.contain,
                grace=self.grace,
            )
        except OSError as exc:
            if exc.errno != errno.E2BIG:
                raise
            # Name the user's program, as subprocess.run would, not the keeper it runs through.
            raise OSError(
                errno.E2BIG,
                "Argument list too long (the command and its environment together exceed the kernel's limit)",
                "/bin/sh" if shell else cmd[0],
            ) from None
        job = _Job(tree)
        self._jobs.add(job)
        ring = LogRing(self.log_rows, self.log_line)
        transport = eof = None
        writer = None
        timed_out = False
        try:
            async with always_ended(tree) as run:
                transport, eof = await open_reader(tree, ring.feed)
                if data is not None:
                    writer = loop.create_task(asyncio.to_thread(_write_all, tree.stdin, data))
                exit_wait = run.watch_exit()
                killed = loop.create_task(job.kill_event.wait())
                try:
                    await asyncio.wait([exit_wait, killed], timeout=limit, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    killed.cancel()
                timed_out = not exit_wait.done() and not job.killed
                await run.stop_watching()
                report = await tree.terminate_async(self.grace if timed_out else 0)
        finally:
            self._jobs.discard(job)
            await close_reader(transport, eof)
            if writer is not None:
                await quietly(writer)
            if tree.stdin is not None:
                try:
                    tree.stdin.close()
                except OSError:
                    pass
        ring.close()
        page = ring.read()
        code, sig = exit_fields(tree.returncode)
        return ForegroundResult(
            command=cmd,
            exit_code=code,
            exit_signal=sig,
            output="\n".join(r.text for r in page.rows),
            rows=page.rows,
            dropped=ring.dropped_total,
            elapsed=loop.time() - t0,
            timed_out=timed_out,
            killed=job.killed,
            kill_incomplete=not report.ok,
        )

    def kill(self) -> int:
        """SIGKILL every running foreground command's tree, now; return how many commands. Never touches services."""
        jobs = list(self._jobs)
        for job in jobs:
            job.killed = True
            kill_now(job.tree)
            wake(job.kill_event, job.loop)
        return len(jobs)


def _write_all(pipe: Any, data: bytes) -> None:
    """Write data to the command's stdin and close it; a command that stops reading ends the write."""
    try:
        pipe.write(data)
        pipe.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass
    finally:
        try:
            pipe.close()
        except (OSError, ValueError):
            pass
