"""Applying a command's write layer (an overlay's upper directory) to the real workspace.

Called by `_layer.py` once every process of the command is gone, with a descriptor of the
upper directory (the tmpfs outlives its mount namespace while the descriptor is open). It
carries over created and changed files, links and directories, deletions (overlay
whiteouts) and replaced directories (opaque ones), never writing or deleting a path the
protection policy names and never following a link on the host side; modes lose set-id
bits; sockets, pipes and devices are skipped.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat

__all__ = ["MAX_DEPTH", "Apply", "scan"]

_OPAQUE = ("user.overlay.opaque", "trusted.overlay.opaque")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

MAX_DEPTH = 200
"""Directories nested deeper than this are not applied (applying recurses per level)."""


class Apply:
    """Applies an overlay upper directory to the host workspace (see the module docstring)."""

    def __init__(self, protected: re.Pattern[str]) -> None:
        self.protected = protected
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
                    # protected entries inside were kept: apply the rest around them
                    kept = _lstat(name, host)
                    if kept is None or not stat.S_ISDIR(kept.st_mode):
                        return
                else:
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


def scan(up: int) -> tuple[int, int]:
    """What the open directory `up` holds, walked without recursion.

    Returns the bytes of its files and links (what applying may add at most) and how deep
    its directories nest.
    """
    total, deepest = 0, 0
    stack: list[tuple[int, int]] = [(os.dup(up), 0)]
    try:
        while stack:
            fd, depth = stack.pop()
            deepest = max(deepest, depth)
            try:
                for name in _names(fd):
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        stack.append((os.open(name, _DIR, dir_fd=fd), depth + 1))
                    elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                        total += st.st_size
            finally:
                os.close(fd)
    finally:
        for fd, _ in stack:
            os.close(fd)
    return total, deepest
