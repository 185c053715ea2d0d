"""A seccomp filter, installed with prctl through ctypes, that makes one system call fail: as sandboxes do.

prelude(nr, err, arg0=None) is Python source for the start of a child
script: it installs a filter (inherited by everything the script starts)
under which system call nr (only when its first argument equals arg0, if
given) fails with errno err, and everything else is allowed. arch() gives the
(AUDIT_ARCH, {name: nr}) of this machine, or None where the test does not know it.
"""

import platform

# AUDIT_ARCH_* and the numbers of the calls the tests refuse.
_ARCHES = {
    "x86_64": (0xC000003E, {"prctl": 157, "clone3": 435}),
    "aarch64": (0xC00000B7, {"prctl": 167, "clone3": 435}),
}

_PRELUDE = r"""
import ctypes, struct
def _install_filter(arch, nr, err, arg0):
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    LD_ABS, JEQ, RET = 0x20, 0x15, 0x06
    ALLOW, ERRNO = 0x7FFF0000, 0x00050000 | err
    if arg0 is None:
        prog = [(LD_ABS, 0, 0, 4), (JEQ, 0, 3, arch), (LD_ABS, 0, 0, 0), (JEQ, 0, 1, nr),
                (RET, 0, 0, ERRNO), (RET, 0, 0, ALLOW)]
    else:
        prog = [(LD_ABS, 0, 0, 4), (JEQ, 0, 5, arch), (LD_ABS, 0, 0, 0), (JEQ, 0, 3, nr),
                (LD_ABS, 0, 0, 16), (JEQ, 0, 1, arg0), (RET, 0, 0, ERRNO), (RET, 0, 0, ALLOW)]
    raw = b"".join(struct.pack("=HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))
    class FProg(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    fprog = FProg(len(prog), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    assert libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    assert libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) == 0, ctypes.get_errno()
_install_filter(%(arch)d, %(nr)d, %(err)d, %(arg0)r)
"""


def arch():
    return _ARCHES.get(platform.machine())


def prelude(call, err, arg0=None):
    """Python source that makes system call `call` (a name in this module's table) fail with errno err."""
    known = arch()
    assert known is not None, f"no seccomp numbers for {platform.machine()}"
    return _PRELUDE % {"arch": known[0], "nr": known[1][call], "err": err, "arg0": arg0}
