"""Resource limits for sandboxed commands, and the pids cgroup used when the caller is root.

Limits are set with `prlimit` inside the sandbox (after bubblewrap has created the user
namespace, so the process count is the sandbox's own), or with `setrlimit` in the child
before `exec` when `prlimit` is not installed. The kernel never applies `RLIMIT_NPROC` to
processes of the host's root user, so when legato runs as root the process limit is
enforced with a `pids` cgroup instead (v2, or v1 where that is what the machine has).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
import shutil
import signal
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from legato.exceptions import ConfigurationError

__all__ = ["Limits", "PidsCgroup"]

_log = logging.getLogger("legato.sandbox")


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """What one sandboxed command may use. `None` leaves a limit unset."""

    timeout: float = 60.0
    """Wall-clock seconds; then the whole process group (and the sandbox) is killed."""
    cpu_seconds: int | None = 60
    """CPU seconds per process (`RLIMIT_CPU`)."""
    memory_bytes: int | None = 1 << 30
    """Address space per process (`RLIMIT_AS`)."""
    max_processes: int | None = 64
    """Processes and threads in the sandbox (`RLIMIT_NPROC`, or a pids cgroup as root)."""
    file_size_bytes: int | None = 64 << 20
    """Largest file a process may write (`RLIMIT_FSIZE`)."""
    open_files: int | None = 1024
    """Open file descriptors per process (`RLIMIT_NOFILE`)."""
    output_bytes: int = 1 << 20
    """Bytes of stdout and stderr kept together; past that the command is killed."""

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            msg = f"Limits.timeout must be positive, got {self.timeout}"
            raise ConfigurationError(msg)
        if self.output_bytes < 0:
            msg = f"Limits.output_bytes must be >= 0, got {self.output_bytes}"
            raise ConfigurationError(msg)
        for name, value in self._rlimits():
            if value is not None and value < 1:
                msg = f"Limits.{name} must be at least 1 (or None), got {value}"
                raise ConfigurationError(msg)

    def replace(self, **changes: Any) -> Limits:
        """A copy with some limits changed."""
        return replace(self, **changes)

    def _rlimits(self) -> list[tuple[str, int | None]]:
        return [
            ("cpu_seconds", self.cpu_seconds),
            ("memory_bytes", self.memory_bytes),
            ("max_processes", self.max_processes),
            ("file_size_bytes", self.file_size_bytes),
            ("open_files", self.open_files),
        ]


_PRLIMIT_FLAGS = {
    "cpu_seconds": "--cpu",
    "memory_bytes": "--as",
    "max_processes": "--nproc",
    "file_size_bytes": "--fsize",
    "open_files": "--nofile",
}
_RESOURCES = {
    "cpu_seconds": resource.RLIMIT_CPU,
    "memory_bytes": resource.RLIMIT_AS,
    "max_processes": resource.RLIMIT_NPROC,
    "file_size_bytes": resource.RLIMIT_FSIZE,
    "open_files": resource.RLIMIT_NOFILE,
}


def prlimit_prefix(limits: Limits) -> list[str] | None:
    """`prlimit --cpu=N ... --` to put before the command, or None when prlimit is missing."""
    binary = shutil.which("prlimit")
    if binary is None:
        return None
    args = [f"{_PRLIMIT_FLAGS[n]}={v}" for n, v in limits._rlimits() if v is not None]  # pyright: ignore[reportPrivateUsage]
    return [binary, *args, "--"]


def rlimit_setter(limits: Limits) -> Callable[[], None]:
    """A function for the child, before `exec`, that sets the limits with `setrlimit`."""
    pairs = [(_RESOURCES[n], v) for n, v in limits._rlimits() if v is not None]  # pyright: ignore[reportPrivateUsage]

    def apply() -> None:
        for res, value in pairs:
            resource.setrlimit(res, (value, value))

    return apply


class PidsCgroup:
    """A fresh `pids` cgroup capping how many tasks a sandbox may hold (used as root).

    `create` returns None when no writable pids controller exists; `entering` wraps a command
    line so that it runs inside; `close` kills what is left and removes the group.
    """

    __slots__ = ("_dir",)

    def __init__(self, directory: Path) -> None:
        self._dir = directory

    @property
    def path(self) -> Path:
        """The cgroup's directory."""
        return self._dir

    @classmethod
    def create(cls, max_tasks: int) -> PidsCgroup | None:
        """A new cgroup with `pids.max = max_tasks`, or None when none can be made."""
        for parent in _pids_parents():
            _sweep(parent)
            directory = parent / f"legato-{uuid.uuid4().hex[:16]}"
            try:
                directory.mkdir()
            except OSError:
                continue
            try:
                (directory / "pids.max").write_text(str(max_tasks), encoding="ascii")
            except OSError:
                with contextlib.suppress(OSError):
                    directory.rmdir()
                continue
            return cls(directory)
        return None

    def entering(self, argv: Sequence[str]) -> list[str]:
        """`argv` prefixed by a shell that moves itself into the group, then execs `argv`.

        The process joins before anything runs, so every descendant is counted; and no
        `preexec_fn` is needed (which would force a slow `fork` of the whole interpreter).
        """
        script = 'echo $$ > "$0" && exec "$@"'
        return ["/bin/sh", "-c", script, str(self._dir / "cgroup.procs"), *argv]

    def pids(self) -> list[int]:
        """The processes currently in the group."""
        try:
            text = (self._dir / "cgroup.procs").read_text(encoding="ascii")
        except OSError:
            return []
        return [int(line) for line in text.split()]

    def close(self, *, wait: float = 5.0) -> None:
        """Kill every process left in the group and remove it."""
        deadline = time.monotonic() + wait
        while True:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self._dir.rmdir()
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    return
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    _log.warning("could not remove cgroup %s: %s", self._dir, exc)
                    return
                time.sleep(0.001)
            else:
                return


_STALE_SECONDS = 300.0


def _sweep(parent: Path) -> None:
    """Remove empty legato cgroups left by processes that were killed before cleaning up."""
    now = time.time()
    with contextlib.suppress(OSError):
        for stale in parent.glob("legato-*"):
            with contextlib.suppress(OSError):
                if now - stale.stat().st_mtime > _STALE_SECONDS and not PidsCgroup(stale).pids():
                    stale.rmdir()


def _pids_parents() -> list[Path]:
    """Directories where a child pids cgroup of this process could be created."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
        groups = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    own: dict[str, str] = {}
    for line in groups:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        key = "v2" if hierarchy == "0" and not controllers else controllers
        own[key] = path
    found: list[Path] = []
    for line in mounts:
        fields, _, tail = line.partition(" - ")
        parts, tails = fields.split(), tail.split()
        if len(parts) < 5 or len(tails) < 3:
            continue
        mount_root, mount_point, fstype, options = parts[3], parts[4], tails[0], tails[2]
        if fstype == "cgroup2" and "v2" in own:
            base = _join(mount_point, mount_root, own["v2"])
            controls = base / "cgroup.subtree_control"
            with contextlib.suppress(OSError):
                if "pids" in controls.read_text(encoding="ascii").split():
                    found.insert(0, base)
        elif fstype == "cgroup" and "pids" in options.split(","):
            key = next((k for k in own if "pids" in k.split(",")), None)
            if key is not None:
                found.append(_join(mount_point, mount_root, own[key]))
    return found


def _join(mount_point: str, mount_root: str, path: str) -> Path:
    if mount_root != "/" and (path == mount_root or path.startswith(mount_root + "/")):
        path = path[len(mount_root) :]
    return Path(mount_point) / path.lstrip("/")
