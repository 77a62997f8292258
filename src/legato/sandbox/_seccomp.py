"""A seccomp filter: no set-id bits on any file a sandboxed command creates, no unix sockets.

In bubblewrap's user namespace the only mapped user is the caller's. When legato runs as
root (containers, CI), every file a command writes in the workspace is owned by the host's
root, whatever uid the command has inside; and the owner of a file may always set its
set-user-id bit. `cp /bin/sh x && chmod 4755 x` would leave a root-owned set-uid shell on
the host for any local user. No uid chosen inside the namespace changes who owns the file
outside, so the bits themselves are refused: this classic BPF program makes every system
call that sets a file mode (`chmod`, `fchmod`, `fchmodat`, `fchmodat2`, `open`, `openat`,
`creat`, `mkdir`, `mkdirat`, `mknod`, `mknodat`) fail with `EPERM` when the mode carries
`S_ISUID` or `S_ISGID`; `openat2` and `io_uring_setup` (whose modes a filter cannot read)
fail with `ENOSYS`, so programs fall back to `openat`. Calls through another ABI (32-bit
`int 0x80`, x32) fail with `ENOSYS`. Everything else is allowed.

The same program refuses `socket(AF_UNIX, ...)` with `EPERM` unless the runner allows unix
sockets. A socket file in the workspace may belong to a host service (a database, a
container engine's API, an SSH agent): `connect` reaches it through any mount, read-only or
overlay, and a filter cannot read the address `connect` is given. Refusing the socket
itself closes every path-named socket, present or made later; `socketpair` (which reaches
nothing outside the process tree, and which asyncio needs) stays allowed, and abstract
sockets are already private to the sandbox's network namespace.

bubblewrap loads the program (`--seccomp FD`) after setting `no_new_privs`, just before it
runs the command, so the command and all its descendants are bound by it.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

__all__ = ["seccomp_filter", "setid_filter", "setid_filter_supported"]

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000

_SETID = 0o6000
"""S_ISUID | S_ISGID."""

_NR_OFFSET = 0
_ARCH_OFFSET = 4
_ARGS_OFFSET = 16
_X32_BIT = 0x40000000

_AF_UNIX = 1
_SOCKET = {"x86_64": 41, "aarch64": 198}
"""`socket(domain, type, protocol)`."""

# (audit arch, {syscall number: index of its mode argument}, numbers refused outright)
_ARCHES: dict[str, tuple[int, dict[int, int], tuple[int, ...]]] = {
    "x86_64": (
        0xC000003E,
        {
            90: 1,  # chmod(path, mode)
            91: 1,  # fchmod(fd, mode)
            268: 2,  # fchmodat(dirfd, path, mode)
            452: 2,  # fchmodat2(dirfd, path, mode, flags)
            2: 2,  # open(path, flags, mode)
            257: 3,  # openat(dirfd, path, flags, mode)
            85: 1,  # creat(path, mode)
            83: 1,  # mkdir(path, mode)
            258: 2,  # mkdirat(dirfd, path, mode)
            133: 1,  # mknod(path, mode, dev)
            259: 2,  # mknodat(dirfd, path, mode, dev)
        },
        (437, 425),  # openat2, io_uring_setup
    ),
    "aarch64": (
        0xC00000B7,
        {
            52: 1,  # fchmod
            53: 2,  # fchmodat
            452: 2,  # fchmodat2
            56: 3,  # openat
            34: 2,  # mkdirat
            33: 2,  # mknodat
        },
        (437, 425),
    ),
}


def _machine() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def setid_filter_supported() -> bool:
    """Whether this machine's architecture has a filter (x86-64 and AArch64 do)."""
    return _machine() in _ARCHES and os.uname().sysname == "Linux"


def setid_filter() -> bytes | None:
    """The set-id program alone (an array of `struct sock_filter`), or None on other machines."""
    return seccomp_filter(setid=True, unix_sockets=True)


def seccomp_filter(*, setid: bool = True, unix_sockets: bool = False) -> bytes | None:
    """The compiled program: set-id bits and unix sockets refused, as asked.

    None on machines without a filter, or when it would refuse nothing.
    """
    if not setid_filter_supported() or (not setid and unix_sockets):
        return None
    arch, all_modes, refused = _ARCHES[_machine()]
    modes = all_modes if setid else {}
    ops: list[tuple[int, int, int, int]] = []  # code, jt, jf, k; jumps patched below
    deny_setid = ("deny", errno.EPERM)
    no_such = ("deny", errno.ENOSYS)
    # Jumps name a label; the labels are the return instructions at the end.
    pending: list[tuple[int, object, object]] = []

    def emit(code: int, k: int, jt: object = 0, jf: object = 0) -> None:
        pending.append((len(ops), jt, jf))
        ops.append((code, 0, 0, k))

    emit(_LD_W_ABS, _ARCH_OFFSET)
    emit(_JEQ_K, arch, 0, no_such)
    emit(_LD_W_ABS, _NR_OFFSET)
    if _machine() == "x86_64":
        emit(_JGE_K, _X32_BIT, no_such, 0)
    for number in refused:
        emit(_JEQ_K, number, no_such, 0)
    for number, index in modes.items():
        emit(_JEQ_K, number, 0, 2)
        emit(_LD_W_ABS, _ARGS_OFFSET + 8 * index)  # the low 32 bits (little-endian)
        emit(_JSET_K, _SETID, deny_setid, "allow")
    if not unix_sockets:
        emit(_JEQ_K, _SOCKET[_machine()], 0, 2)
        emit(_LD_W_ABS, _ARGS_OFFSET)  # the domain
        emit(_JEQ_K, _AF_UNIX, deny_setid, "allow")
    labels = {"allow": len(ops)}
    ops.append((_RET_K, 0, 0, _ALLOW))
    labels[repr(deny_setid)] = len(ops)
    ops.append((_RET_K, 0, 0, _ERRNO | errno.EPERM))
    labels[repr(no_such)] = len(ops)
    ops.append((_RET_K, 0, 0, _ERRNO | errno.ENOSYS))

    def offset(at: int, target: object) -> int:
        if isinstance(target, int):
            return target
        key = target if isinstance(target, str) else repr(target)
        return labels[key] - at - 1

    out = bytearray()
    for at, jt, jf in pending:
        code, _, _, k = ops[at]
        ops[at] = (code, offset(at, jt), offset(at, jf), k)
    for code, jt, jf, k in ops:
        out += struct.pack("=HBBI", code, jt, jf, k)
    return bytes(out)
