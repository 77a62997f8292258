"""The write layer's supervisor: run bubblewrap over a sized layer, then apply what it wrote.

This file runs as a program (`python -I -S _layer_apply.py CONFIG -- BWRAP...`), outside
the sandbox and before it, with only the standard library. It:

1. enters a private mount namespace (and, for a user other than root, a user namespace
   mapping that user to root, which may mount a tmpfs);
2. mounts a tmpfs of the quota's size as the upper layer of an overlay that bubblewrap
   mounts on the workspace (the command reads the real workspace and writes the layer);
3. runs bubblewrap and waits for it: every process of the command is gone after that;
4. applies the layer to the real workspace unless it filled up: created and changed files,
   links and directories, deletions (overlay whiteouts) and replaced directories (opaque
   ones), never writing a path the protection policy names and never following a link on
   the host side; set-id bits are not carried over;
5. writes a JSON report (what was refused, skipped, whether the layer was full) to a file
   of legato's private temporary directory, and exits with bubblewrap's status.

When the namespace ends the tmpfs goes with it: a command killed on timeout leaves nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
_MS_NOSUID = 2
_MS_NODEV = 4
_OPAQUE = ("user.overlay.opaque", "trusted.overlay.opaque")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _enter_namespace(libc: Any) -> None:
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        _check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    else:
        _check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
        Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    # nothing mounted here may propagate back to the host's namespace
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate")


def _mount_layer(libc: Any, target: str, size: int | None, inodes: int | None) -> None:
    options = ["mode=0700"]
    if size is not None:
        options.append(f"size={size}")
    if inodes is not None:
        options.append(f"nr_inodes={inodes}")
    data = ",".join(options).encode()
    flags = _MS_NOSUID | _MS_NODEV
    _check(libc.mount(b"legato-layer", target.encode(), b"tmpfs", flags, data), "mount tmpfs")
    for name in ("up", "work"):
        Path(target, name).mkdir(mode=0o755)


class _Apply:
    """Applies an overlay upper directory to the host workspace (see the module docstring)."""

    def __init__(self, protected: str) -> None:
        self.protected = re.compile(protected, re.IGNORECASE | re.DOTALL)
        self.refused: list[str] = []
        self.skipped: list[str] = []
        self.errors: list[str] = []

    def guarded(self, path: str) -> bool:
        if self.protected.fullmatch(path) is None:
            return False
        self.refused.append(path)
        return True

    def directory(self, up: int, host: int, rel: str, *, opaque: bool) -> None:
        names = _names(up)
        if opaque:
            keep = set(names)
            for name in _names(host):
                if name not in keep:
                    self.remove(host, name, _join(rel, name))
        for name in names:
            try:
                self.entry(up, host, name, _join(rel, name))
            except OSError as exc:
                self.errors.append(f"{_join(rel, name)}: {exc.strerror or exc}")

    def entry(self, up: int, host: int, name: str, path: str) -> None:
        st = os.stat(name, dir_fd=up, follow_symlinks=False)
        old = _lstat(name, host)
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # a whiteout: deleted
            if old is not None:
                self.remove(host, name, path)
            return
        if stat.S_ISDIR(st.st_mode):
            self.subdirectory(up, host, name, path, st, old)
            return
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            self.skipped.append(path)  # sockets, fifos, devices: nothing to carry over
            return
        if self.guarded(path):
            return
        if old is not None and stat.S_ISDIR(old.st_mode) and not self.remove(host, name, path):
            return
        temp = f".{name[:64]}.legato-layer-{os.getpid()}.tmp"
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(name, dir_fd=up), temp, dir_fd=host)
        else:
            _copy_file(up, name, host, temp, st, old)
        try:
            os.utime(temp, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=host, follow_symlinks=False)
            os.rename(temp, name, src_dir_fd=host, dst_dir_fd=host)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=host)
            raise

    def subdirectory(
        self,
        up: int,
        host: int,
        name: str,
        path: str,
        st: os.stat_result,
        old: os.stat_result | None,
    ) -> None:
        up_fd = os.open(name, _DIR, dir_fd=up)
        try:
            opaque = _opaque(up_fd)
            merge = old is not None and stat.S_ISDIR(old.st_mode) and not opaque
            if not merge:
                if self.guarded(path):
                    return
                if old is not None and not self.remove(host, name, path):
                    return
                os.mkdir(name, 0o700, dir_fd=host)
            host_fd = os.open(name, _DIR, dir_fd=host)
            try:
                self.directory(up_fd, host_fd, path, opaque=False)
                if self.protected.fullmatch(path) is None:
                    os.fchmod(host_fd, stat.S_IMODE(st.st_mode) & 0o1777)
                    os.utime(host_fd, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(host_fd)
        finally:
            os.close(up_fd)

    def remove(self, host: int, name: str, path: str) -> bool:
        """Delete a host entry (what the policy protects is kept); True when it is gone."""
        if self.guarded(path):
            return False
        old = _lstat(name, host)
        if old is None:
            return True
        if not stat.S_ISDIR(old.st_mode):
            os.unlink(name, dir_fd=host)
            return True
        fd = os.open(name, _DIR, dir_fd=host)
        try:
            for child in _names(fd):
                self.remove(fd, child, _join(path, child))
        finally:
            os.close(fd)
        try:
            os.rmdir(name, dir_fd=host)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            return False
        return True


def _names(fd: int) -> list[str]:
    """The sorted entry names of an open directory."""
    with os.scandir(fd) as it:
        return sorted(entry.name for entry in it)


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _opaque(fd: int) -> bool:
    for key in _OPAQUE:
        with contextlib.suppress(OSError):
            if os.getxattr(fd, key) == b"y":
                return True
    return False


def _copy_file(
    up: int, name: str, host: int, temp: str, st: os.stat_result, old: os.stat_result | None
) -> None:
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=up)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        dst = os.open(temp, flags, 0o600, dir_fd=host)
        try:
            left = st.st_size
            while left > 0:
                sent = os.sendfile(dst, src, None, min(left, 1 << 30))
                if sent == 0:
                    break
                left -= sent
            if old is not None:
                with contextlib.suppress(OSError):
                    os.fchown(dst, old.st_uid, old.st_gid)
            os.fchmod(dst, stat.S_IMODE(st.st_mode) & 0o1777)  # never a set-id bit
        finally:
            os.close(dst)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=host)
        raise
    finally:
        os.close(src)


def _layer_full(mount: str, size: int | None) -> bool:
    if size is None:
        return False
    vfs = os.statvfs(mount)
    return vfs.f_bavail == 0 or vfs.f_favail == 0


def _held(path: str) -> int:
    """Bytes of the files and links in the layer (what applying it may add at most)."""
    total = 0
    for directory, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            st = Path(directory, name).lstat()
            if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                total += st.st_size
    return total


def main(argv: list[str]) -> int:
    """Run the command line after `--` over the layer; see the module docstring."""
    config = json.loads(argv[1])
    command = argv[argv.index("--") + 1 :]
    report: dict[str, Any] = {"applied": False, "full": False}
    libc = _libc()
    try:
        _enter_namespace(libc)
        _mount_layer(libc, config["mount"], config["size"], config["inodes"])
    except OSError as exc:
        report["setup_error"] = str(exc)
        _write_report(config["report"], report)
        return 125
    fds = tuple(config["pass_fds"])
    status = subprocess.call(command, pass_fds=fds, close_fds=True)
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    upper = str(Path(config["mount"], "up"))
    room = config["room"]
    if _layer_full(config["mount"], config["size"]) or (room is not None and _held(upper) > room):
        report["full"] = True
    else:
        apply = _Apply(config["protected"])
        up = os.open(upper, _DIR)
        host = os.open(config["root"], _DIR)
        try:
            apply.directory(up, host, "", opaque=False)
        finally:
            os.close(up)
            os.close(host)
        report.update(
            applied=True, refused=apply.refused, skipped=apply.skipped, errors=apply.errors
        )
    _write_report(config["report"], report)
    if status < 0:  # end the way the command ended, so the caller sees the signal
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    return status if status >= 0 else 128 - status


def _write_report(path: str, report: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(report), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
