"""`Workspace`: the one directory file tools may touch.

Every path is resolved one component at a time from a file descriptor of the root, the way
`openat2(RESOLVE_BENEATH)` would: each directory is opened with `O_NOFOLLOW | O_DIRECTORY`
relative to its parent's descriptor, symbolic links are read and followed by hand (and
refused when they lead out), `..` never climbs above the root, and the final file is opened
with `O_NOFOLLOW` relative to its directory's descriptor. A path swapped for a link between
the check and the use therefore fails instead of escaping, and `/proc/self/root/...` or an
absolute link target outside the root is refused like any other outside path. Regular files
with more than one hard link are refused: the other name may live outside the workspace.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from legato.exceptions import (
    ConfigurationError,
    ProtectedPathRefused,
    SandboxViolation,
    WorkspaceNotFound,
    WorkspaceQuotaExceeded,
)
from legato.sandbox._protect import ProtectedPaths, workspace_usage

__all__ = ["Entry", "Workspace"]

_MAX_LINKS = 40
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, kw_only=True, slots=True)
class Entry:
    """One entry of a directory listing inside the workspace."""

    path: str
    """Path relative to the workspace root, with `/` separators."""
    kind: str
    """`file`, `dir`, `symlink` or `other`."""
    size: int
    """Size in bytes (of the link itself for symlinks)."""


@dataclass(kw_only=True)
class _Target:
    """A resolved path: the open directory chain and the final name in the last directory."""

    fds: list[int]
    parts: list[str]
    """Canonical components of the directory holding `name`, relative to the root."""
    name: str | None
    """The final component, or None when the path is the directory `fds[-1]` itself."""
    st: os.stat_result | None = None
    """`lstat` of the final component, or None when it does not exist."""
    owned: list[int] = field(default_factory=lambda: [])

    @property
    def dir_fd(self) -> int:
        return self.fds[-1]

    @property
    def relative(self) -> str:
        parts = self.parts if self.name is None else [*self.parts, self.name]
        return "/".join(parts) or "."

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


class Workspace:
    """A directory the agent may read and write; nothing outside it is reachable.

    ```python
    ws = Workspace("/path/to/project")
    ws.write_bytes("notes/todo.txt", b"ship it")
    ws.read_bytes("notes/todo.txt")
    ws.read_bytes("../secrets.txt")      # SandboxViolation
    ```

    Paths are relative to the root; absolute paths are accepted only when they lie inside
    it. Symbolic links inside the workspace are followed when their target stays inside.

    Args:
        root: The directory.
        protected: Paths host programs run that nothing may write (`ProtectedPaths`; by
            default git's hooks and configuration, `.hg/hgrc`, `.envrc`, `.vscode/`...).
            Writes fail with `ProtectedPathRefused`; a sandboxed command's changes to them
            are not applied.
        quota_bytes: The most the workspace may hold (file and link sizes, all together);
            None: no quota. Writes past it, and commands once it is reached, fail with
            `WorkspaceQuotaExceeded`.

    Raises:
        WorkspaceNotFound: the root does not exist or is not a directory.
        ConfigurationError: a quota below 1.
    """

    __slots__ = ("_ident", "_prefixes", "_protected", "_quota", "_root")

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        protected: ProtectedPaths | None = None,
        quota_bytes: int | None = None,
    ) -> None:
        if quota_bytes is not None and quota_bytes < 1:
            msg = f"Workspace quota_bytes must be at least 1 (or None), got {quota_bytes}"
            raise ConfigurationError(msg)
        self._protected = ProtectedPaths() if protected is None else protected
        self._quota = quota_bytes
        raw = os.fspath(root)
        if not raw or "\0" in raw:
            raise WorkspaceNotFound(raw, "is not a valid path")
        real = os.path.realpath(raw)
        try:
            st = Path(real).stat()
        except FileNotFoundError:
            raise WorkspaceNotFound(raw, "does not exist") from None
        except OSError as exc:
            raise WorkspaceNotFound(raw, f"cannot be read: {exc.strerror}") from exc
        if not stat.S_ISDIR(st.st_mode):
            raise WorkspaceNotFound(raw, "is not a directory")
        self._root = Path(real)
        self._ident = (st.st_dev, st.st_ino)
        self._prefixes = tuple({real, os.path.normpath(Path.cwd() / raw)})

    @property
    def root(self) -> Path:
        """The real path of the workspace root."""
        return self._root

    @property
    def protected(self) -> ProtectedPaths:
        """The paths no tool or command may write."""
        return self._protected

    @property
    def quota_bytes(self) -> int | None:
        """The most the workspace may hold, or None."""
        return self._quota

    def usage(self) -> int:
        """Bytes the workspace holds now (sizes of its files and symbolic links)."""
        return workspace_usage(self._root)

    def check_quota(self, adding: int = 0, *, path: str | None = None) -> int:
        """The room left once `adding` more bytes are written (no quota: -1).

        Raises:
            WorkspaceQuotaExceeded: the workspace holds, or would hold, more than its quota.
        """
        if self._quota is None:
            return -1
        used = self.usage()
        if used + adding > self._quota:
            what = f"writing {adding} more bytes would exceed" if adding > 0 else "exceeds"
            msg = (
                f"the workspace holds {used} bytes; {what} its quota of {self._quota} bytes "
                "(delete files, or give the workspace a larger quota)"
            )
            raise WorkspaceQuotaExceeded(msg, used=used, quota=self._quota, path=path)
        return self._quota - used - adding

    def check_writable(self, relative: str, *, original: str | None = None) -> None:
        """Refuse a canonical relative path that the protection policy names.

        Raises:
            ProtectedPathRefused: it is protected.
        """
        pattern = self._protected.match(relative)
        if pattern is not None:
            shown = original if original is not None else relative
            msg = (
                f"{shown!r} is a path that host programs run or trust ({pattern!r} in the "
                "workspace's ProtectedPaths); it may not be written"
            )
            raise ProtectedPathRefused(msg, path=shown, pattern=pattern)

    def __repr__(self) -> str:
        return f"Workspace({str(self._root)!r})"

    # -- resolution ---------------------------------------------------------------------------

    def open_root(self) -> int:
        """A descriptor of the root (`O_DIRECTORY | O_NOFOLLOW`); the caller closes it.

        Raises:
            SandboxViolation: the root was replaced by another directory since.
        """
        return self._open_root()

    def _open_root(self) -> int:
        fd = os.open(self._root, _DIR_FLAGS)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != self._ident:
            os.close(fd)
            msg = f"the workspace root {str(self._root)!r} was replaced by another directory"
            raise SandboxViolation(msg, path=str(self._root))
        return fd

    def _relative_parts(self, path: str, original: str) -> list[str]:
        """Components of `path` relative to the root; absolute paths must start inside it."""
        if path.startswith("/"):
            for prefix in self._prefixes:
                if path == prefix:
                    return []
                if path.startswith(prefix.rstrip("/") + "/"):
                    return path[len(prefix.rstrip("/")) + 1 :].split("/")
            msg = (
                f"{original!r} is outside the workspace; use a path relative to the workspace root"
            )
            raise SandboxViolation(msg, path=original)
        return path.split("/")

    def _link_parts(self, link: str, original: str, name: str) -> list[str]:
        try:
            return self._relative_parts(link, original)
        except SandboxViolation:
            msg = f"{original!r} leads outside the workspace through the symbolic link {name!r}"
            raise SandboxViolation(msg, path=original) from None

    def _resolve(
        self, path: str, *, follow_last: bool = True, create_dirs: bool = False
    ) -> _Target:
        """Walk `path` from the root's descriptor; see the module docstring."""
        if not isinstance(path, str) or "\0" in path:  # pyright: ignore[reportUnnecessaryIsInstance]
            msg = f"{path!r} is not a valid path"
            raise SandboxViolation(msg, path=str(path))
        todo = list(reversed(self._relative_parts(path, path)))
        target = _Target(fds=[self._open_root()], parts=[], name=None)
        try:
            self._walk(target, todo, path, follow_last=follow_last, create_dirs=create_dirs)
        except BaseException:
            target.close()
            raise
        return target

    def _walk(
        self, t: _Target, todo: list[str], original: str, *, follow_last: bool, create_dirs: bool
    ) -> None:
        links = 0
        while todo:
            comp = todo.pop()
            if comp in ("", "."):
                continue
            if comp == "..":
                if len(t.fds) == 1:
                    msg = f"{original!r} leads outside the workspace"
                    raise SandboxViolation(msg, path=original)
                os.close(t.fds.pop())
                t.parts.pop()
                continue
            last = all(c in ("", ".") for c in todo)
            try:
                st = os.stat(comp, dir_fd=t.dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                if last:
                    t.name, t.st = comp, None
                    return
                if not create_dirs:
                    raise FileNotFoundError(errno.ENOENT, "no such directory", original) from None
                self.check_writable("/".join([*t.parts, comp]), original=original)
                os.mkdir(comp, 0o777, dir_fd=t.dir_fd)
                st = os.stat(comp, dir_fd=t.dir_fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode) and (follow_last or not last):
                links += 1
                if links > _MAX_LINKS:
                    msg = f"{original!r}: too many levels of symbolic links"
                    raise SandboxViolation(msg, path=original)
                link = os.readlink(comp, dir_fd=t.dir_fd)
                if link.startswith("/"):
                    rest = self._link_parts(link, original, comp)
                    while len(t.fds) > 1:
                        os.close(t.fds.pop())
                    t.parts.clear()
                    todo.extend(reversed(rest))
                else:
                    todo.extend(reversed(link.split("/")))
                continue
            if last:
                t.name, t.st = comp, st
                return
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", original)
            t.fds.append(_open_dir(comp, t.dir_fd, original))
            t.parts.append(comp)

    def relative(self, path: str) -> str:
        """The canonical path relative to the root (`.` for the root), symlinks resolved.

        Raises:
            SandboxViolation: the path leads outside the workspace.
        """
        t = self._resolve(path)
        try:
            return t.relative
        finally:
            t.close()

    def resolve(self, path: str) -> Path:
        """The real absolute path inside the workspace (for display or external programs).

        Prefer the workspace's own read and write methods: they work on descriptors and
        cannot be raced; a path string handed to another program can.
        """
        rel = self.relative(path)
        return self._root if rel == "." else self._root / rel

    # -- reading --------------------------------------------------------------------------------

    def open_read(self, path: str) -> BinaryIO:
        """Open a regular file inside the workspace for binary reading.

        Raises:
            SandboxViolation: the path leads outside, or the file has other hard links.
            FileNotFoundError, IsADirectoryError: as for `open`.
        """
        t = self._resolve(path)
        try:
            if t.name is None or (t.st is not None and stat.S_ISDIR(t.st.st_mode)):
                raise IsADirectoryError(errno.EISDIR, "is a directory", path)
            if t.st is None:
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            _refuse_live_database(t.st, path)
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = _open_file(t.name, flags, t.dir_fd, path)
        finally:
            t.close()
        try:
            _check_regular(os.fstat(fd), path)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return os.fdopen(fd, "rb")

    def read_bytes(self, path: str, *, limit: int | None = None) -> bytes:
        """The file's bytes; with `limit`, at most that many (read no further)."""
        with self.open_read(path) as f:
            return f.read() if limit is None else f.read(limit)

    def stat(self, path: str) -> os.stat_result:
        """`stat` of the path, symlinks inside the workspace followed."""
        t = self._resolve(path)
        try:
            if t.name is None:
                return os.fstat(t.dir_fd)
            if t.st is None:
                raise FileNotFoundError(errno.ENOENT, "no such file or directory", path)
            return t.st
        finally:
            t.close()

    def exists(self, path: str) -> bool:
        """Whether the path exists inside the workspace (a path leading out raises)."""
        try:
            self.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def list_dir(self, path: str = ".") -> list[Entry]:
        """The entries of a directory, sorted by name; symlinks are listed, not followed."""
        with self._open_dir(path) as (fd, rel):
            with os.scandir(fd) as it:
                entries = [_entry(rel, e.name, e.stat(follow_symlinks=False)) for e in it]
        return sorted(entries, key=lambda e: e.path)

    def walk(self, path: str = ".", *, max_entries: int | None = None) -> Iterator[Entry]:
        """Every entry below a directory, depth first, never following symlinks."""
        count = 0
        with self._open_dir(path) as (fd, rel):
            stack: list[tuple[int, str]] = [(os.dup(fd), rel)]
            try:
                while stack:
                    dir_fd, dir_rel = stack.pop()
                    try:
                        with os.scandir(dir_fd) as it:
                            items = sorted(it, key=lambda e: e.name)
                        subdirs: list[tuple[int, str]] = []
                        for item in items:
                            st = item.stat(follow_symlinks=False)
                            entry = _entry(dir_rel, item.name, st)
                            yield entry
                            count += 1
                            if max_entries is not None and count >= max_entries:
                                return
                            if stat.S_ISDIR(st.st_mode):
                                with contextlib.suppress(OSError):
                                    subdirs.append(
                                        (_open_dir(item.name, dir_fd, entry.path), entry.path)
                                    )
                        stack.extend(reversed(subdirs))
                    finally:
                        os.close(dir_fd)
            finally:
                for dir_fd, _ in stack:
                    os.close(dir_fd)

    @contextlib.contextmanager
    def _open_dir(self, path: str) -> Generator[tuple[int, str]]:
        t = self._resolve(path)
        try:
            if t.name is not None:
                if t.st is None:
                    raise FileNotFoundError(errno.ENOENT, "no such directory", path)
                if not stat.S_ISDIR(t.st.st_mode):
                    raise NotADirectoryError(errno.ENOTDIR, "not a directory", path)
                fd = _open_dir(t.name, t.dir_fd, path)
            else:
                fd = os.dup(t.dir_fd)
            rel = t.relative
        finally:
            t.close()
        try:
            yield fd, ("" if rel == "." else rel)
        finally:
            os.close(fd)

    # -- writing --------------------------------------------------------------------------------

    def write_bytes(self, path: str, data: bytes, *, create_dirs: bool = True) -> str:
        """Replace (or create) a file atomically; return its canonical relative path.

        The bytes go to a temporary file in the same directory, which is then renamed over
        the target: readers see the old content or the new one, never a half-written file.
        An existing file keeps its permission bits.

        Raises:
            SandboxViolation: the path leads outside, or the file has other hard links.
        """
        self._before_writing(path, len(data))
        t = self._resolve(path, create_dirs=create_dirs)
        try:
            if t.name is None or (t.st is not None and stat.S_ISDIR(t.st.st_mode)):
                raise IsADirectoryError(errno.EISDIR, "is a directory", path)
            self.check_writable(t.relative, original=path)
            mode = 0o644
            if t.st is not None:
                _check_regular(t.st, path)
                _refuse_live_database(t.st, path)
                mode = stat.S_IMODE(t.st.st_mode)
            _replace(t.dir_fd, t.name, data, mode)
            return t.relative
        finally:
            t.close()

    def _before_writing(self, path: str, size: int) -> None:
        """Refuse before anything is created: a protected path, or a write past the quota.

        The path is checked as written (each directory the write would create, and the
        file); the resolved path is checked again while it is walked.
        """
        if isinstance(path, str) and not path.startswith("/"):  # pyright: ignore[reportUnnecessaryIsInstance]
            parts = [p for p in path.split("/") if p not in ("", ".")]
            if ".." not in parts:
                for end in range(1, len(parts) + 1):
                    prefix = "/".join(parts[:end])
                    if end == len(parts) or not self._is_dir(prefix):
                        self.check_writable(prefix, original=path)
        if self._quota is not None:
            try:
                old = self.stat(path).st_size
            except (FileNotFoundError, NotADirectoryError):
                old = 0
            self.check_quota(size - old, path=path)

    def _is_dir(self, path: str) -> bool:
        try:
            return stat.S_ISDIR(self.stat(path).st_mode)
        except (OSError, SandboxViolation):
            return False

    def mkdir(self, path: str) -> str:
        """Create a directory and its parents (existing ones are fine); return its path."""
        self._before_writing(path, 0)
        t = self._resolve(path, create_dirs=True)
        try:
            if t.name is not None and t.st is None:
                self.check_writable(t.relative, original=path)
                os.mkdir(t.name, 0o777, dir_fd=t.dir_fd)
            elif t.st is not None and not stat.S_ISDIR(t.st.st_mode):
                raise FileExistsError(errno.EEXIST, "exists and is not a directory", path)
            return t.relative
        finally:
            t.close()


def _open_dir(name: str, dir_fd: int, original: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            msg = f"{original!r} changed while it was being resolved (now a link or a file)"
            raise SandboxViolation(msg, path=original) from exc
        raise


def _open_file(name: str, flags: int, dir_fd: int, original: str) -> int:
    try:
        return os.open(name, flags, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            msg = f"{original!r} changed into a symbolic link while it was being opened"
            raise SandboxViolation(msg, path=original) from exc
        raise


def _refuse_live_database(st: os.stat_result, path: str) -> None:
    """Refuse a database file this process's store holds open (or its -wal, -shm).

    Closing any descriptor of it would drop the store's SQLite locks, and another process
    could then delete the write-ahead log under it: committed runs would be lost.
    """
    if "legato.store._db" not in sys.modules:
        return  # no legato store was opened in this process
    from legato.store._db import is_open_database

    if is_open_database(st):
        msg = f"{path!r} is a database file this process's store has open; refused"
        raise SandboxViolation(msg, path=path)


def _check_regular(st: os.stat_result, path: str) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", path)
    if not stat.S_ISREG(st.st_mode):
        msg = f"{path!r} is not a regular file (device, pipe or socket); refused"
        raise SandboxViolation(msg, path=path)
    if st.st_nlink > 1:
        msg = (
            f"{path!r} has {st.st_nlink} hard links; refused because another name for it "
            "may lie outside the workspace"
        )
        raise SandboxViolation(msg, path=path)


def _replace(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    tmp = f".{name[:64]}.legato-{uuid.uuid4().hex[:12]}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def _entry(parent: str, name: str, st: os.stat_result) -> Entry:
    return Entry(
        path=f"{parent}/{name}" if parent else name, kind=_kind(st.st_mode), size=st.st_size
    )
