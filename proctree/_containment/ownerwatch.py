"""Per-platform kernel hooks the keeper needs: learn that the owner died, become a subreaper.

Each platform section defines the same functions:
  watch_owner(pid) -> object with fileno() that polls readable once pid has exited, or None
  parent_death_signal(sig) -> bool   ask for sig when our parent goes (a wakeup only)
  become_subreaper() -> None         raise OSError where it is impossible

The proof of the owner's death is always ``os.getppid() != owner``: the keeper's
parent is the owner, and a child is only reparented away from a process when
its whole thread group is gone. PR_SET_PDEATHSIG is not proof: Linux sends it
when the parent THREAD that forked us exits, so a tree spawned from a
short-lived thread would die with that thread (prctl(2), "the parent" is the
thread). Here it only wakes the keeper, which then checks getppid().

Stdlib only and no relative imports: the keeper loads this file directly.
"""

import os
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


class _Fd:
    def __init__(self, fd, keep=None):
        self.fd = fd
        self._keep = keep  # a kqueue object must stay referenced for its fd to stay open

    def fileno(self):
        return self.fd

    def close(self):
        if self._keep is not None:
            self._keep.close()
        elif self.fd >= 0:
            os.close(self.fd)
        self.fd = -1


if sys.platform.startswith("linux"):
    _libc = None

    def _prctl(option, arg):
        global _libc
        import ctypes  # only here: it costs the keeper ~4 ms of startup

        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        if (
            _libc.prctl(
                ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
            )
            != 0
        ):
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))

    def watch_owner(pid):
        # A pidfd of a thread-group leader polls readable when the whole
        # process has exited, not when one thread (the spawning one) does.
        # PROCTREE_NO_PIDFD=1 (tests) takes the old-kernel path: PDEATHSIG + getppid.
        if os.environ.get("PROCTREE_NO_PIDFD") == "1":
            return None
        try:
            return _Fd(os.pidfd_open(pid))
        except (AttributeError, OSError):
            return None  # kernel < 5.3: the keeper polls getppid() instead

    def parent_death_signal(sig):
        try:
            _prctl(PR_SET_PDEATHSIG, sig)
            return True
        except OSError:
            return False

    def become_subreaper():
        _prctl(PR_SET_CHILD_SUBREAPER, 1)

elif sys.platform == "darwin" or "bsd" in sys.platform:

    def watch_owner(pid):
        import select

        # kqueue NOTE_EXIT fires once for the process (macOS has no thread trap).
        try:
            kq = select.kqueue()
            kq.control(
                [
                    select.kevent(
                        pid, select.KQ_FILTER_PROC, select.KQ_EV_ADD | select.KQ_EV_ONESHOT, select.KQ_NOTE_EXIT
                    )
                ],
                0,
                0,
            )
        except (AttributeError, OSError):
            return None
        return _Fd(kq.fileno(), keep=kq)

    def parent_death_signal(sig):
        return False

    def become_subreaper():
        raise OSError(95, "child subreapers are Linux-only (PR_SET_CHILD_SUBREAPER)")

else:  # fallbacks: the keeper polls getppid()

    def watch_owner(pid):
        return None

    def parent_death_signal(sig):
        return False

    def become_subreaper():
        raise OSError(95, f"child subreapers are not available on {sys.platform}")
