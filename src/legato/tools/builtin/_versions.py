"""Version checks for the file tools: no lost update when runs share a workspace.

Two runs (two children of one parent, two agents on one checkout) that each read a file,
change it and write it back lose an update when their turns interleave: the second write
replaces the first without having seen it. `FileVersions` remembers, per run and file,
the version the run last read or wrote through the file tools; a write or an edit of a
file that has changed since then is refused with an error that tells the model to read
the file again, and nothing is written. Check and write happen under an advisory
`flock` on the workspace root, taken through a descriptor of its own by every writer:
threads of this process and other processes using legato's file tools on the same
directory exclude each other.

A version is the file's size and SHA-256 (files up to `hash_limit` bytes) or its inode,
size and modification time (larger files). A run that never read a file may still
overwrite it (a blind write is not a lost update); a run that read that a file does not
exist is refused when it has appeared since.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Generator
from typing import BinaryIO, TypeAlias

from legato.exceptions import ToolError
from legato.sandbox import Workspace

__all__ = ["ABSENT", "FileVersions", "Version"]

Version: TypeAlias = tuple[str, int, str]
"""`("sha256", size, digest)`, `("stat", size, "inode:mtime_ns")`, or `ABSENT`."""

ABSENT: Version = ("absent", 0, "")
"""The version of a file that does not exist."""

_CHUNK = 1 << 20


def _no_flock(fd: int) -> None:  # pragma: no cover - not POSIX
    pass


try:  # POSIX: a lock that threads and other processes on the same workspace honour
    import fcntl

    def _flock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

except ImportError:  # pragma: no cover - not POSIX: one lock per FileVersions only
    _flock = _no_flock


class FileVersions:
    """What each run last saw of each file of one workspace, and the lock for writes."""

    __slots__ = ("_fallback", "_mutex", "_seen", "hash_limit", "max_entries", "workspace")

    def __init__(
        self, workspace: Workspace, *, hash_limit: int = 16 << 20, max_entries: int = 10_000
    ) -> None:
        self.workspace = workspace
        self.hash_limit = hash_limit
        """Files up to this size are told apart by content; larger ones by inode and time."""
        self.max_entries = max_entries
        """(run, file) pairs remembered; the oldest is forgotten first (then a write of
        that file by that run is a blind write again)."""
        self._seen: OrderedDict[tuple[str, str], Version] = OrderedDict()
        self._mutex = threading.Lock()
        """Guards the table (never held while waiting for the write lock)."""
        self._fallback = threading.Lock() if _flock is _no_flock else contextlib.nullcontext()

    # -- versions ---------------------------------------------------------------------------

    def of_file(self, f: BinaryIO) -> Version:
        """The version of an open file (read from the same descriptor; the position is kept)."""
        st = os.fstat(f.fileno())
        if st.st_size > self.hash_limit or not stat.S_ISREG(st.st_mode):
            return _by_stat(st)
        at = f.tell()
        f.seek(0)
        digest = hashlib.sha256()
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
        f.seek(at)
        return ("sha256", st.st_size, digest.hexdigest())

    def of_bytes(self, data: bytes, path: str) -> Version:
        """The version of a file just written with `data`."""
        if len(data) > self.hash_limit:
            return _by_stat(self.workspace.stat(path))
        return ("sha256", len(data), hashlib.sha256(data).hexdigest())

    def current(self, path: str) -> Version:
        """The version of the file as it is now (`ABSENT` when it does not exist)."""
        try:
            with self.workspace.open_read(path) as f:
                return self.of_file(f)
        except (FileNotFoundError, NotADirectoryError):
            return ABSENT

    def key(self, path: str) -> str:
        """The file's canonical path in the workspace (symlinks inside resolved)."""
        try:
            return self.workspace.relative(path)
        except (FileNotFoundError, NotADirectoryError):
            return os.path.normpath(path)

    # -- what a run saw ----------------------------------------------------------------------

    def saw(self, run_id: str, path: str, version: Version) -> None:
        """Remember that `run_id` read (or wrote) `path` at `version`."""
        entry = (run_id, self.key(path))
        with self._mutex:
            self._seen[entry] = version
            self._seen.move_to_end(entry)
            while len(self._seen) > self.max_entries:
                self._seen.popitem(last=False)

    def seen(self, run_id: str, path: str) -> Version | None:
        """The version `run_id` last saw of `path`, or None if it never read it."""
        with self._mutex:
            return self._seen.get((run_id, self.key(path)))

    @contextlib.contextmanager
    def writing(self, run_id: str, path: str) -> Generator[None]:
        """Hold the workspace's write lock; refuse if `path` changed since `run_id` saw it.

        Raises:
            ToolError: the file changed (or appeared, or vanished) since this run read it;
                the message asks the model to read it again. Nothing is written.
        """
        with self._locked():
            seen = self.seen(run_id, path)
            if seen is not None:
                now = self.current(path)
                if now != seen:
                    raise ToolError(_changed(path, seen, now))
            yield

    @contextlib.contextmanager
    def _locked(self) -> Generator[None]:
        # each holder opens its own descriptor: flock then excludes threads of this
        # process as well as other processes, whichever FileVersions they use
        fd = os.open(self.workspace.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with self._fallback:
                _flock(fd)  # released when the descriptor is closed
                yield
        finally:
            os.close(fd)


def _by_stat(st: os.stat_result) -> Version:
    return ("stat", st.st_size, f"{st.st_ino}:{st.st_mtime_ns}")


def _changed(path: str, seen: Version, now: Version) -> str:
    if now == ABSENT:
        what = "was deleted"
    elif seen == ABSENT:
        what = "was created"
    else:
        what = "was changed"
    return (
        f"{path!r} {what} since you last read it (by another agent or process); nothing was "
        "written. Read the file again and redo your change on its current content."
    )
