"""Resource limits for sandboxed commands.

Per-process limits are set with `prlimit` inside the sandbox (after bubblewrap has created
the user namespace, so the process count is the sandbox's own), or with `setrlimit` in the
child before `exec` when `prlimit` is not installed. Memory and, for the host's root user
(whom the kernel exempts from `RLIMIT_NPROC`), the process count are also enforced for the
whole call by a cgroup where the host allows one (see `legato.sandbox._cgroup`); where it
does not, memory is bounded per process only (`RLIMIT_AS`), with a logged warning.
"""

from __future__ import annotations

import resource
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from legato.exceptions import ConfigurationError

__all__ = ["Limits", "prlimit_prefix", "rlimit_setter"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """What one sandboxed command may use. `None` leaves a limit unset."""

    timeout: float = 60.0
    """Wall-clock seconds; then the whole process group (and the sandbox) is killed."""
    cpu_seconds: int | None = 60
    """CPU seconds per process (`RLIMIT_CPU`)."""
    memory_bytes: int | None = 1 << 30
    """Memory of the whole call: every process together, and what they leave in the
    sandbox's `/tmp`, under one cgroup limit (`memory.max`, or `memory.limit_in_bytes` on
    cgroup v1); the OOM killer ends processes of the call past it. Each process's address
    space is also capped at this size (`RLIMIT_AS`), which is all that is enforced, with a
    logged warning, where the host delegates no memory cgroup."""
    max_processes: int | None = 64
    """Processes and threads in the sandbox (`RLIMIT_NPROC`, or a pids cgroup as root)."""
    file_size_bytes: int | None = 64 << 20
    """Largest file a process may write (`RLIMIT_FSIZE`)."""
    open_files: int | None = 1024
    """Open file descriptors per process (`RLIMIT_NOFILE`)."""
    output_bytes: int = 1 << 20
    """Bytes of stdout and stderr kept together; past that the command is killed."""
    tmp_bytes: int | None = 64 << 20
    """Size of the sandbox's private `/tmp` and `/var/tmp` (each a tmpfs of this size;
    `None`: the kernel's default, half of the host's memory)."""
    workspace_entries: int | None = 200_000
    """Files, directories and links one command may create or change in the workspace
    (the inodes of its write layer; past it, creating one fails with `ENOSPC`)."""

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            msg = f"Limits.timeout must be positive, got {self.timeout}"
            raise ConfigurationError(msg)
        if self.output_bytes < 0:
            msg = f"Limits.output_bytes must be >= 0, got {self.output_bytes}"
            raise ConfigurationError(msg)
        for name, value in self._checked_sizes():
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

    def _checked_sizes(self) -> list[tuple[str, int | None]]:
        return [
            *self._rlimits(),
            ("tmp_bytes", self.tmp_bytes),
            ("workspace_entries", self.workspace_entries),
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


def _per_process(limits: Limits) -> list[tuple[str, int]]:
    pairs = limits._rlimits()  # pyright: ignore[reportPrivateUsage]
    return [(n, v) for n, v in pairs if v is not None]


def prlimit_prefix(limits: Limits) -> list[str] | None:
    """`prlimit --cpu=N ... --` to put before the command, or None when prlimit is missing."""
    binary = shutil.which("prlimit")
    if binary is None:
        return None
    args = [f"{_PRLIMIT_FLAGS[n]}={v}" for n, v in _per_process(limits)]
    return [binary, *args, "--"]


def rlimit_setter(limits: Limits) -> Callable[[], None]:
    """A function for the child, before `exec`, that sets the limits with `setrlimit`."""
    pairs = [(_RESOURCES[n], v) for n, v in _per_process(limits)]

    def apply() -> None:
        for res, value in pairs:
            resource.setrlimit(res, (value, value))

    return apply
