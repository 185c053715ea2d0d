"""proctree.create_subprocess_exec / create_subprocess_shell: asyncio's own, with the command started by proctree.Popen.

They return asyncio's own asyncio.subprocess.Process. The loop's own code
makes the transport (its subprocess_exec/_shell argument checks, its
_make_subprocess_transport with its child watcher, cancellation handling and
all), run with one change: the transport class is _ProctreeTransport, whose
_start is asyncio's own with proctree.Popen for subprocess.Popen (or
the mock or fake a test put there: popen.popen_for_dropins). The
command is therefore contained as proctree.Popen contains it, and its exit
(reaped by asyncio's child watcher, not by Popen) still ends what it left:
proctree.Popen watches every command's exit itself.

This module must never patch asyncio or subprocess: it runs copies of their
functions with different names bound, for the one call.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import types
from typing import Any

from . import detach as _detach
from . import exitwatch as _exitwatch
from . import popenhold as _hold
from .popen import popen_for_dropins

if sys.platform == "win32":  # pragma: no cover - proctree is POSIX-only
    raise ImportError("proctree's asyncio drop-ins are POSIX-only")

from asyncio import base_events, streams, unix_events
from asyncio import subprocess as _aio_subprocess


def _copy(fn: Any, names: dict[str, Any]) -> Any:
    return types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, fn.__closure__)


# subprocess as asyncio's _start sees it: the module's names, with popen_for_dropins() for Popen, looked up at
# each start as asyncio's own code looks subprocess.Popen up.
_subprocess_view = types.ModuleType("subprocess")
_subprocess_view.__dict__.update(vars(subprocess))
del _subprocess_view.Popen


def _view_attribute(name: str) -> Any:
    if name == "Popen":
        return popen_for_dropins()
    raise AttributeError(f"module 'subprocess' has no attribute {name!r}")


_subprocess_view.__getattr__ = _view_attribute  # type: ignore[method-assign]


class _ProctreeTransport(unix_events._UnixSubprocessTransport):  # type: ignore[name-defined]
    """asyncio's Unix subprocess transport, starting its process with proctree.Popen."""

    _start = _copy(
        unix_events._UnixSubprocessTransport._start,  # type: ignore[attr-defined]
        {**vars(unix_events), "subprocess": _subprocess_view},
    )


_make_transport = _copy(
    unix_events._UnixSelectorEventLoop._make_subprocess_transport,  # type: ignore[attr-defined]
    {**vars(unix_events), "_UnixSubprocessTransport": _ProctreeTransport},
)


class _LoopView:
    """The running loop, but for _make_subprocess_transport, which makes a _ProctreeTransport.

    Only base_events' subprocess_exec/_shell run against it (they check the
    arguments, log, and call _make_subprocess_transport); the transport itself
    gets the real loop.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._view_of = loop

    def __getattr__(self, name: str) -> Any:
        return getattr(self._view_of, name)

    def _make_subprocess_transport(self, *args: Any, **kwargs: Any) -> Any:
        return _make_transport(self._view_of, *args, **kwargs)


class _OtherLoopView(_LoopView):
    """Another loop (uvloop), which starts subprocesses its own way: asyncio's own transport over its pipes.

    uvloop forks in its own C code, so no Popen can be put in its place; the
    transport is asyncio's _UnixSubprocessTransport (proctree.Popen for its
    start; its pipes through the loop's connect_read_pipe/connect_write_pipe,
    which every loop has) and the command's exit is seen by exitwatch, not by
    asyncio's child watcher. base_events' subprocess_exec/_shell read
    _debug and call _log_subprocess, which are BaseEventLoop's own.
    """

    @property
    def _debug(self) -> bool:
        return self._view_of.get_debug()

    def _log_subprocess(self, *args: Any) -> None:
        base_events.BaseEventLoop._log_subprocess(self, *args)  # type: ignore[attr-defined]

    async def _make_subprocess_transport(
        self,
        protocol: Any,
        args: Any,
        shell: bool,
        stdin: Any,
        stdout: Any,
        stderr: Any,
        bufsize: int,
        extra: Any = None,
        **kwargs: Any,
    ) -> Any:
        loop = self._view_of
        waiter = loop.create_future()
        transport = _ProctreeTransport(
            loop, protocol, args, shell, stdin, stdout, stderr, bufsize, waiter=waiter, extra=extra, **kwargs
        )
        _exitwatch.on_exit(loop, transport.get_pid(), transport._process_exited, lambda: transport._proc.returncode)
        try:
            await waiter
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException:  # as asyncio's own: a failed or cancelled start leaves nothing running
            transport.close()
            await transport._wait()
            raise
        return transport


def _view(loop: asyncio.AbstractEventLoop) -> _LoopView:
    make = getattr(type(loop), "_make_subprocess_transport", None)
    if make is not unix_events._UnixSelectorEventLoop._make_subprocess_transport:  # type: ignore[attr-defined]
        return _OtherLoopView(loop)
    return _LoopView(loop)


# asyncio's default StreamReader limit (64 KiB), as its own create_subprocess_* take it.
_LIMIT: int = streams._DEFAULT_LIMIT  # type: ignore[attr-defined]


def _detached(kwds: dict[str, Any]) -> bool:
    """Whether the start will be detached (detach.py): then no holding tree is made for it."""
    try:
        rule = _detach.rule()
    except ValueError:
        return False  # proctree.Popen raises it, at the start
    return _detach.is_detached(bool(kwds.get("detach")), bool(kwds.get("start_new_session")), rule)


async def _contained(start: Any, what: tuple[Any, ...], limit: int, kwds: dict[str, Any]) -> asyncio.subprocess.Process:
    """asyncio's own start (BaseEventLoop.subprocess_exec or _shell), run on the loop's view, and its Process."""
    loop = asyncio.get_running_loop()
    if not _detached(kwds) and not _hold.prepared():
        # The holding tree (the first start) and the command's cgroup are made on a worker thread: the start
        # on the loop's thread then makes neither (cgrouppool.py).
        await loop.run_in_executor(None, _hold.prepare)
    transport, protocol = await start(
        _view(loop), lambda: _aio_subprocess.SubprocessStreamProtocol(limit=limit, loop=loop), *what, **kwds
    )
    return _aio_subprocess.Process(transport, protocol, loop)


async def create_subprocess_exec(
    program: Any,
    *args: Any,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
    limit: int = _LIMIT,
    **kwds: Any,
) -> asyncio.subprocess.Process:
    """asyncio.create_subprocess_exec, with the command contained as proctree.Popen contains it (keep_orphans= too)."""
    std = {"stdin": stdin, "stdout": stdout, "stderr": stderr}
    return await _contained(base_events.BaseEventLoop.subprocess_exec, (program, *args), limit, {**std, **kwds})


async def create_subprocess_shell(
    cmd: Any,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
    limit: int = _LIMIT,
    **kwds: Any,
) -> asyncio.subprocess.Process:
    """asyncio.create_subprocess_shell, with the command contained as proctree.Popen contains it (keep_orphans= too)."""
    std = {"stdin": stdin, "stdout": stdout, "stderr": stderr}
    return await _contained(base_events.BaseEventLoop.subprocess_shell, (cmd,), limit, {**std, **kwds})
