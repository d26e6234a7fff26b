"""The seccomp filter bwrap loads (``--seccomp FD``): no new ``AF_UNIX`` sockets, and (where
bwrap cannot ``--disable-userns``) no new user namespaces.

A read-only bind does not stop ``connect()`` to a Unix socket on it (``/run/docker.sock``, the
D-Bus buses, an ssh-agent): the kernel checks no write access on a read-only mount for sockets.
So, like Anthropic's sandbox-runtime, the sandbox refuses ``socket(AF_UNIX, …)`` with ``EPERM``.
``socketpair`` stays allowed (asyncio's self-pipe uses it; it cannot reach anything outside).
System calls of another ABI (i386 through ``int 0x80``, x32) are refused outright, so
``socketcall`` cannot get around the filter, and so are the io_uring calls (an io_uring
``IORING_OP_SOCKET`` makes a socket without the ``socket`` system call).

The user-namespace rule (:func:`build_filter` with ``user_namespaces=False``, the fallback for
bwrap older than 0.8) refuses ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` (``EPERM``) and
answers ``clone3`` with ``ENOSYS`` (its flags sit in memory a filter cannot read; glibc then
falls back to ``clone``), as Flatpak does. Built here as classic BPF, no library needed;
x86_64 and aarch64 only (the functions return None elsewhere).
"""

from __future__ import annotations

import os
import platform
import struct
from dataclasses import dataclass

__all__ = ["build_filter", "unix_socket_filter", "write_filter"]

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
_ENOSYS = 0x00050000 | 38  # SECCOMP_RET_ERRNO | ENOSYS
_ARCH, _NR, _ARG0 = 4, 0, 16  # offsets in struct seccomp_data (arg 0: its low 32 bits)
_AF_UNIX = 1
_CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000
_IO_URING = (425, 426, 427)  # io_uring_setup, _enter, _register: one numbering on both ABIs
_CLONE3 = 435  # the same on both ABIs


@dataclass(frozen=True, slots=True)
class _Abi:
    arch: int  # AUDIT_ARCH_*
    socket: int
    clone: int
    unshare: int
    refuse_x32: bool


_ABIS = {
    "x86_64": _Abi(0xC000003E, socket=41, clone=56, unshare=272, refuse_x32=True),
    "aarch64": _Abi(0xC00000B7, socket=198, clone=220, unshare=97, refuse_x32=False),
}
_ABIS["arm64"] = _ABIS["aarch64"]

# An instruction: (code, k, where to go if true, where if false); a target is the label of a
# later instruction, or None for the next one.
_Op = tuple[int, int, str | None, str | None]


def _assemble(ops: list[tuple[str | None, _Op]]) -> bytes:
    """Classic BPF from labelled instructions (jumps are forward, relative, at most 255)."""
    at = {label: index for index, (label, _) in enumerate(ops) if label is not None}
    out = []
    for index, (_, (code, k, true, false)) in enumerate(ops):
        jt, jf = (0 if t is None else at[t] - index - 1 for t in (true, false))
        out.append(struct.pack("=HBBI", code, jt, jf, k))
    return b"".join(out)


def _program(abi: _Abi, unix_sockets: bool, user_namespaces: bool) -> bytes:
    ops: list[tuple[str | None, _Op]] = [
        (None, (_LD_ABS, _ARCH, None, None)),
        (None, (_JEQ, abi.arch, None, "eperm")),  # another ABI (i386): refused outright
        (None, (_LD_ABS, _NR, None, None)),
    ]
    if abi.refuse_x32:
        ops.append((None, (_JGE, _X32_BIT, "eperm", None)))
    if not unix_sockets:
        ops += [(None, (_JEQ, nr, "eperm", None)) for nr in _IO_URING]
    if not user_namespaces:
        ops.append((None, (_JEQ, _CLONE3, "enosys", None)))
        ops += [(None, (_JEQ, nr, "flags", None)) for nr in (abi.clone, abi.unshare)]
    if not unix_sockets:
        ops += [
            (None, (_JEQ, abi.socket, None, "allow")),
            (None, (_LD_ABS, _ARG0, None, None)),
            (None, (_JEQ, _AF_UNIX, "eperm", "allow")),
        ]
    ops.append(("allow", (_RET, _ALLOW, None, None)))
    if not user_namespaces:
        ops += [
            ("flags", (_LD_ABS, _ARG0, None, None)),
            (None, (_JSET, _CLONE_NEWUSER, "eperm", None)),
            (None, (_RET, _ALLOW, None, None)),
            ("enosys", (_RET, _ENOSYS, None, None)),
        ]
    ops.append(("eperm", (_RET, _EPERM, None, None)))
    return _assemble(ops)


def build_filter(
    *, unix_sockets: bool, user_namespaces: bool, machine: str | None = None
) -> bytes | None:
    """The BPF program for ``machine`` (default: this one) refusing what is ``False``
    (``unix_sockets``: ``socket(AF_UNIX)`` and io_uring; ``user_namespaces``: new user
    namespaces), or None if the CPU is unsupported. Other ABIs are always refused."""
    abi = _ABIS.get(machine or platform.machine())
    return None if abi is None else _program(abi, unix_sockets, user_namespaces)


def unix_socket_filter(machine: str | None = None) -> bytes | None:
    """The filter refusing ``socket(AF_UNIX)`` and io_uring only, or None if unsupported."""
    return build_filter(unix_sockets=False, user_namespaces=True, machine=machine)


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
