"""pytest plugin (loaded with -p): asyncio's create_subprocess_exec/_shell are proctree's.

Counts the calls that went through the swap and prints the count at the end,
so a run shows whether the project's tests reach these functions at all (a
library that calls loop.subprocess_exec, as anyio does, never does).
"""

import asyncio
import asyncio.subprocess
import functools
from typing import Any

import proctree

calls = {"create_subprocess_exec": 0, "create_subprocess_shell": 0}


def _counted(name: str, swapped: Any) -> Any:
    @functools.wraps(swapped)
    async def call(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return await swapped(*args, **kwargs)

    return call


for _name in calls:
    _swapped = _counted(_name, getattr(proctree, _name))
    setattr(asyncio, _name, _swapped)
    setattr(asyncio.subprocess, _name, _swapped)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    counts = ", ".join(f"{name} {n}" for name, n in calls.items())
    terminalreporter.write_line(f"outside_suites swap-asyncio: calls through proctree in this process: {counts}")
