"""Pseudo-terminals for spawn(pty=True): the pair the owner opens, sized like the owner's own terminal.

The owner keeps the master; the slave goes to the keeper as its stdio, and
the keeper makes it the command's controlling terminal (protocol.py, pty
mode). This module only opens and sizes terminals: it must never start,
signal or wait for a process.
"""

from __future__ import annotations

import fcntl
import os
import sys
import termios

# struct winsize: four unsigned shorts, rows, cols, xpixel, ypixel (packed by hand: the struct module
# costs import time that a process's first proctree.Popen, which loads this module, should not pay).
_WINSIZE_BYTES = 8


def _unpack(raw: bytes) -> tuple[int, int, int, int]:
    rows, cols, xpix, ypix = (int.from_bytes(raw[i : i + 2], sys.byteorder) for i in range(0, 8, 2))
    return rows, cols, xpix, ypix


def _pack(size: tuple[int, int, int, int]) -> bytes:
    return b"".join(int(v).to_bytes(2, sys.byteorder) for v in size)


def window_size(fd: int) -> tuple[int, int, int, int] | None:
    """The window size of the terminal on fd as (rows, cols, xpixel, ypixel); None if fd is no terminal."""
    try:
        raw = fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * _WINSIZE_BYTES)
    except OSError:
        return None
    return _unpack(raw)


def set_window_size(fd: int, size: tuple[int, int, int, int]) -> None:
    """Set the window size of the terminal on fd (a pty master: the kernel then sends SIGWINCH to its foreground)."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, _pack(size))


def owner_window_size() -> tuple[int, int, int, int] | None:
    """The window size of the first of our stdin, stdout, stderr that is a terminal with a size; None if none is."""
    for fd in (0, 1, 2):
        size = window_size(fd)
        if size is not None and size[0] and size[1]:
            return size
    return None


def owner_modes() -> list | None:
    """The modes (tcgetattr) of the first of our stdin, stdout, stderr that is a terminal; None if none is."""
    for fd in (0, 1, 2):
        try:
            return termios.tcgetattr(fd)
        except (OSError, termios.error):
            continue
    return None


def open_pty() -> tuple[int, int]:
    """(master, slave) of a new pseudo-terminal, both close-on-exec, with the owner's terminal's modes and size if it
    has one, as script(1) and ssh -t give theirs: a user who turned echo off (stty -echo) sees no echo from the
    command's terminal either, and keeps their erase and interrupt keys."""
    master, slave = os.openpty()
    try:
        modes = owner_modes()
        if modes is not None:
            termios.tcsetattr(slave, termios.TCSANOW, modes)
        size = owner_window_size()
        if size is not None:
            set_window_size(slave, size)
    except BaseException:
        os.close(master)
        os.close(slave)
        raise
    return master, slave
