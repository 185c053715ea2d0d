"""The terminal relay of `proctree run`: the user's terminal in raw mode, bytes both ways to the command's pty.

When `proctree run` has a terminal, the command runs on a pseudo-terminal of
its own (spawn(pty=True)) and this module stands between the two: keys go
to the pty (so Ctrl+C and Ctrl+Z reach the command through its own
terminal), the pty's output goes to our stdout, and window-size changes are
copied to the pty (the kernel then tells the command). When the command
stops (Ctrl+Z), the user's terminal is restored and this process stops
itself, as a shell's job would; on `fg` it takes the terminal back and
continues the command. A SIGTSTP sent to this process (`kill -TSTP`) stops
the command the same way. The user's terminal is restored on every way out.

It must never signal anything but this process itself (SIGTSTP, by its own
pid) and the tree (through Tree.send_signal).
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import signal
import termios
import tty
from typing import Any

import proctree

_READ = 65536
_INPUT_MAX = 1 << 20  # keys held for a command that does not read them: beyond this, we stop reading ours


def copy_window_size(src: int, dst: int) -> None:
    """Give the terminal dst the window size of the terminal src (nothing if either is no terminal)."""
    try:
        size = fcntl.ioctl(src, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(dst, termios.TIOCSWINSZ, size)
    except OSError:
        pass


class Relay:
    """Relays between the user's terminal (stdin, stdout) and a pty tree until its command exits."""

    def __init__(self, tree: proctree.Tree, stdin: int = 0, stdout: int = 1) -> None:
        if tree.pty is None:
            raise ValueError("the tree has no pty (spawn it with pty=True)")
        self.tree = tree
        self.master: int = tree.pty
        self.stdin = stdin
        self.stdout = stdout
        self._saved: list[Any] | None = None
        self._keys = b""  # typed, not yet taken by the pty
        self._stdin_open = True
        self._master_open = True
        self._stops_seen = tree.stops
        self._tstp_r = self._tstp_w = -1  # wakes the loop when we are sent SIGTSTP

    def run(self) -> None:
        """Relay until the command has exited and its last output is written; the terminal restored however it ends."""
        self._tstp_r, self._tstp_w = os.pipe()
        os.set_blocking(self._tstp_w, False)
        old_winch = signal.signal(signal.SIGWINCH, self._on_winch)
        old_tstp = signal.signal(signal.SIGTSTP, self._on_tstp)
        try:
            self._saved = termios.tcgetattr(self.stdin)
            self._take_typed_ahead()
            self._enter_raw()
            os.set_blocking(self.master, False)
            self._loop()
            self._drain()
        finally:
            self._restore()
            signal.signal(signal.SIGWINCH, old_winch)
            signal.signal(signal.SIGTSTP, old_tstp)
            os.close(self._tstp_r)
            os.close(self._tstp_w)

    # -- terminal modes ------------------------------------------------------
    def _take_typed_ahead(self) -> None:
        """Take what was typed before the relay began, still in the terminal's line buffer, in the terminal's own mode.

        Raw mode would hand it over as it lies in the buffer, where a Ctrl+D
        is an end-of-file mark that reads as a NUL byte: the command got
        "\0" where the user had typed end-of-file. Read line by line here,
        each end-of-file mark becomes the EOF key again. What is typed but
        not yet ended by Enter stays in the buffer and comes through raw.
        """
        assert self._saved is not None
        if not self._saved[3] & termios.ICANON:
            return
        eof = self._saved[6][termios.VEOF]
        eof = eof if isinstance(eof, bytes) else bytes([eof])
        ends = {
            b"\n",
            *(c for c in (self._saved[6][termios.VEOL], self._saved[6][termios.VEOL2]) if c not in (b"\0", 0)),
        }
        blocking = os.get_blocking(self.stdin)
        os.set_blocking(self.stdin, False)
        try:
            empty = 0
            while empty < 3 and len(self._keys) < _INPUT_MAX:  # three end-of-files in a row: a hung-up terminal
                try:
                    line = os.read(self.stdin, _READ)
                except OSError:  # BlockingIOError: nothing more is typed
                    break
                empty = empty + 1 if not line else 0
                self._keys += line if line[-1:] in ends else line + eof
        finally:
            os.set_blocking(self.stdin, blocking)

    def _enter_raw(self) -> None:
        tty.setraw(self.stdin, termios.TCSANOW)
        copy_window_size(self.stdin, self.master)

    def _restore(self) -> None:
        if self._saved is None:
            return
        try:
            termios.tcsetattr(self.stdin, termios.TCSANOW, self._saved)
        except (OSError, termios.error):
            pass  # the terminal hung up: nothing left to restore

    def _on_winch(self, signum: int, frame: object) -> None:
        copy_window_size(self.stdin, self.master)

    def _on_tstp(self, signum: int, frame: object) -> None:
        try:
            os.write(self._tstp_w, b"z")
        except OSError:
            pass  # one is pending already

    def _stop_command(self) -> None:
        """We were sent SIGTSTP (not typed: our terminal is raw): stop the command as its Ctrl+Z would."""
        try:
            os.read(self._tstp_r, 64)
            attrs = termios.tcgetattr(self.master)  # the pty's modes, as the command set them
        except (OSError, termios.error):
            return
        susp = attrs[6][termios.VSUSP]
        if attrs[3] & termios.ISIG and susp not in (b"\0", 0):
            self._keys += susp if isinstance(susp, bytes) else bytes([susp])  # the kernel stops its foreground group
        else:
            self.tree.send_signal(signal.SIGTSTP)  # a raw-mode program: its own suspend path

    def _suspend(self) -> None:
        """The command stopped: give the user back a cooked terminal and stop as a job does; on fg, go on."""
        self._restore()
        old = signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        try:
            # Our own pid only. Stopped here until SIGCONT (the shell's fg); if our
            # process group is orphaned (no job control) the kernel drops it and we go on at once.
            os.kill(os.getpid(), signal.SIGTSTP)
        finally:
            signal.signal(signal.SIGTSTP, old)
        self._enter_raw()
        self.tree.send_signal(signal.SIGCONT)  # the keeper gives the pty back to the command and continues it

    # -- the loop ------------------------------------------------------------
    def _loop(self) -> None:
        status = self.tree.status_fd
        while self.tree.poll() is None:
            if self.tree.stops != self._stops_seen:
                self._stops_seen = self.tree.stops
                self._suspend()
                continue
            readers = [self._tstp_r] if status is None else [status, self._tstp_r]
            if self._master_open:
                readers.append(self.master)
            if self._stdin_open and len(self._keys) < _INPUT_MAX:
                readers.append(self.stdin)
            writers = [self.master] if self._keys and self._master_open else []
            # The status fd wakes us for stops and the exit; the timeout only covers a keeper killed mid-line.
            r, w, _ = select.select(readers, writers, [], 1.0)
            if self._tstp_r in r:
                self._stop_command()
            if self.master in r:
                self._from_master()
            if self.stdin in r:
                self._from_stdin()
            if self.master in w:
                self._to_master()

    def _from_master(self) -> bool:
        """Copy what the pty has to stdout; False if nothing was there."""
        try:
            data = os.read(self.master, _READ)
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno != errno.EIO:  # EIO: every holder of the slave is gone
                raise
            data = b""
        if not data:
            self._master_open = False
            return False
        _write_all(self.stdout, data)
        return True

    def _from_stdin(self) -> None:
        try:
            data = os.read(self.stdin, _READ)
        except OSError:
            data = b""
        if not data:
            self._stdin_open = False
        self._keys += data

    def _to_master(self) -> None:
        try:
            n = os.write(self.master, self._keys)
        except BlockingIOError:
            return
        except OSError:
            self._keys = b""
            self._master_open = False
            return
        self._keys = self._keys[n:]

    def _drain(self) -> None:
        """The command's last output, already in the pty, written out (what orphans write later is theirs)."""
        while self._master_open and self._from_master():
            pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        view = view[n:]
