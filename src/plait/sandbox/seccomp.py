"""The seccomp filter bwrap loads (``--seccomp FD``): no new ``AF_UNIX`` sockets.

A read-only bind does not stop ``connect()`` to a Unix socket on it (``/run/docker.sock``, the
D-Bus buses, an ssh-agent): the kernel checks no write access on a read-only mount for sockets.
So, like Anthropic's sandbox-runtime, the sandbox refuses ``socket(AF_UNIX, …)`` with ``EPERM``.
``socketpair`` stays allowed (asyncio's self-pipe uses it; it cannot reach anything outside).
System calls of another ABI (i386 through ``int 0x80``, x32) are refused outright, so
``socketcall`` cannot get around the filter, and so are the io_uring calls (an io_uring
``IORING_OP_SOCKET`` makes a socket without the ``socket`` system call). Built here as
classic BPF, no library needed; x86_64 and aarch64 only (:func:`unix_socket_filter` returns
None elsewhere).
"""

from __future__ import annotations

import os
import platform
import struct

__all__ = ["unix_socket_filter", "write_filter"]

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
_ARCH, _NR, _ARG0 = 4, 0, 16  # offsets in struct seccomp_data (arg 0: its low 32 bits)
_AF_UNIX = 1
_X32_BIT = 0x40000000


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


_IO_URING = (425, 426, 427)  # io_uring_setup, _enter, _register: one numbering on both ABIs


def _program(arch: int, socket_nr: int, refuse_x32: bool) -> bytes:
    """Allow every system call except one of another ABI, ``socket(AF_UNIX, …)`` and the
    io_uring calls (``IORING_OP_SOCKET``/``IORING_OP_CONNECT`` create and connect sockets with
    no system call a filter could see, which is why Docker's default profile refuses them)."""
    checks = ([(_JGE, _X32_BIT)] if refuse_x32 else []) + [(_JEQ, nr) for nr in _IO_URING]
    deny = len(checks) + 7  # index of the final RET EPERM (see the layout below)
    ops = [_op(_LD_ABS, _ARCH), _op(_JEQ, arch, 0, deny - 2), _op(_LD_ABS, _NR)]
    for index, (code, k) in enumerate(checks, start=3):
        ops.append(_op(code, k, deny - index - 1, 0))  # matched: refuse
    ops += [
        _op(_JEQ, socket_nr, 0, 2),  # socket(), else allow
        _op(_LD_ABS, _ARG0),
        _op(_JEQ, _AF_UNIX, 1, 0),
        _op(_RET, _ALLOW),
        _op(_RET, _EPERM),
    ]
    return b"".join(ops)


def unix_socket_filter(machine: str | None = None) -> bytes | None:
    """The BPF program for ``machine`` (default: this one), or None if unsupported."""
    machine = machine or platform.machine()
    if machine == "x86_64":
        return _program(0xC000003E, 41, refuse_x32=True)  # AUDIT_ARCH_X86_64, socket()
    if machine in ("aarch64", "arm64"):
        return _program(0xC00000B7, 198, refuse_x32=False)  # AUDIT_ARCH_AARCH64, socket()
    return None


def write_filter(program: bytes) -> int:
    """A file descriptor (memfd, offset 0) holding ``program`` for ``bwrap --seccomp``; the
    caller closes it."""
    fd = os.memfd_create("plait-seccomp")
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
