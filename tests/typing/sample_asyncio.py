"""proctree's asyncio drop-ins, typed as asyncio's own (checked and run by tests/dropin/test_dropin_typing.py)."""

from __future__ import annotations

import asyncio
import sys

import proctree

if sys.version_info >= (3, 11):
    from typing import assert_type
else:
    from typing_extensions import assert_type


async def echo() -> bytes:
    proc = await proctree.create_subprocess_exec("cat", stdin=proctree.PIPE, stdout=proctree.PIPE, keep_orphans=False)
    assert_type(proc, asyncio.subprocess.Process)
    out, _ = await proc.communicate(b"async")
    assert_type(out, bytes)
    assert_type(await proc.wait(), int)
    return out


async def shell() -> int | None:
    proc = await proctree.create_subprocess_shell("exit 5", stdout=asyncio.subprocess.DEVNULL)
    await proc.wait()
    return proc.returncode


async def typos_are_errors() -> None:
    await proctree.create_subprocess_exec("true", stdot=proctree.PIPE)  # type: ignore[call-arg]
    await proctree.create_subprocess_shell("true", text=True)  # type: ignore[arg-type]


async def main() -> None:
    assert await echo() == b"async"
    assert await shell() == 5


if __name__ == "__main__":
    asyncio.run(main())
    print("ok")
