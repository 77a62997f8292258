"""One control group per sandboxed call: its memory and its task count, across all its processes.

A limit set with `setrlimit` binds one process: four processes under a 1 GiB `RLIMIT_AS`
may hold 4 GiB together, and pages a command leaves in a tmpfs count against no process at
all. A cgroup's memory limit covers every process of the call and the tmpfs pages they
wrote (they are charged to the group that touched them); the kernel's OOM killer acts
inside the group when it is reached. The pids limit is the way to cap processes for the
host's root user, whom the kernel exempts from `RLIMIT_NPROC`.

Both cgroup versions are handled: v2 (one directory, `memory.max`, `pids.max`) where this
process's own group delegates the controllers, and v1 (one directory per hierarchy,
`memory.limit_in_bytes`, `pids.max`), which is what many container hosts still have. A
group is made only where this process may write; `CallCgroup.create` says which limits it
could enforce, so that the caller can log the downgrade.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CallCgroup", "cgroup_parents"]

_log = logging.getLogger("legato.sandbox")

_STALE_SECONDS = 300.0


@dataclass(frozen=True, kw_only=True, slots=True)
class _Parent:
    path: Path
    version: int
    """1 or 2."""


class CallCgroup:
    """Fresh cgroups (one per hierarchy used) holding every process of one call.

    `entering` wraps a command line so that it joins the groups before it runs; `close`
    kills whatever is left in them and removes them.
    """

    __slots__ = ("_dirs", "memory", "pids_limited")

    def __init__(self, dirs: Sequence[Path], *, memory: bool, pids_limited: bool) -> None:
        self._dirs = tuple(dirs)
        self.memory = memory
        """Whether the memory limit is enforced by the group."""
        self.pids_limited = pids_limited
        """Whether the task limit is enforced by the group."""

    @property
    def paths(self) -> tuple[Path, ...]:
        """The groups' directories."""
        return self._dirs

    @classmethod
    def create(
        cls, *, memory_bytes: int | None = None, max_tasks: int | None = None
    ) -> CallCgroup | None:
        """Groups enforcing what this host allows of the two limits, or None for neither.

        Check `memory` and `pids_limited` on the result for what is enforced.
        """
        wanted = {"memory": memory_bytes, "pids": max_tasks}
        made: dict[str, Path] = {}
        for controller, limit in wanted.items():
            if limit is None:
                continue
            shared = next((d for d in made.values() if _same(d, controller)), None)
            if shared is not None and _write_limit(shared, controller, limit, version=2):
                made[controller] = shared
                continue
            for parent in cgroup_parents(controller):
                directory = _make(parent.path)
                if directory is None:
                    continue
                if _write_limit(directory, controller, limit, version=parent.version):
                    made[controller] = directory
                    break
                _remove(directory)
        if not made:
            return None
        dirs = list(dict.fromkeys(made.values()))
        return cls(dirs, memory="memory" in made, pids_limited="pids" in made)

    def entering(self, argv: Sequence[str]) -> list[str]:
        """`argv` prefixed by a shell that moves itself into every group, then execs `argv`.

        The process joins before anything runs, so every descendant is counted; and no
        `preexec_fn` is needed (which would force a slow `fork` of the whole interpreter).
        """
        script = (
            'n="$0"; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; '
            'n=$((n - 1)); done; exec "$@"'
        )
        procs = [str(d / "cgroup.procs") for d in self._dirs]
        return ["/bin/sh", "-c", script, str(len(procs)), *procs, *argv]

    def pids(self) -> list[int]:
        """The processes currently in the groups."""
        found: set[int] = set()
        for directory in self._dirs:
            found.update(_procs(directory))
        return sorted(found)

    def peak_memory(self) -> int | None:
        """The most memory the group held at once, where the kernel reports it."""
        for directory in self._dirs:
            for name in ("memory.peak", "memory.max_usage_in_bytes"):
                with contextlib.suppress(OSError, ValueError):
                    return int((directory / name).read_text(encoding="ascii").strip())
        return None

    def oom_kills(self) -> int:
        """How many processes the OOM killer ended inside the group (v2; on v1 `failcnt` > 0)."""
        total = 0
        for directory in self._dirs:
            with contextlib.suppress(OSError, ValueError):
                for line in (directory / "memory.events").read_text(encoding="ascii").splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        total += int(value)
            with contextlib.suppress(OSError, ValueError):
                for line in (directory / "memory.oom_control").read_text("ascii").splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        total += int(value)
        return total

    def close(self, *, wait: float = 5.0) -> None:
        """Kill every process left in the groups and remove them."""
        for directory in self._dirs:
            _kill_all(directory, wait=wait)


def _same(directory: Path, controller: str) -> bool:
    """Whether a v2 group already made also offers `controller`."""
    try:
        return controller in (directory / "cgroup.controllers").read_text("ascii").split()
    except OSError:
        return False


def _make(parent: Path) -> Path | None:
    _sweep(parent)
    directory = parent / f"legato-{uuid.uuid4().hex[:16]}"
    try:
        directory.mkdir()
    except OSError:
        return None
    return directory


def _write_limit(directory: Path, controller: str, limit: int, *, version: int) -> bool:
    if controller == "pids":
        files = [("pids.max", str(limit))]
    elif version == 2:
        files = [("memory.max", str(limit)), ("memory.swap.max", "0")]
    else:
        files = [("memory.limit_in_bytes", str(limit)), ("memory.memsw.limit_in_bytes", str(limit))]
    for index, (name, value) in enumerate(files):
        try:
            (directory / name).write_text(value, encoding="ascii")
        except OSError:
            if index == 0:
                return False  # the limit itself; the swap limit is optional (no swap account)
    return True


def _procs(directory: Path) -> list[int]:
    try:
        text = (directory / "cgroup.procs").read_text(encoding="ascii")
    except OSError:
        return []
    return [int(line) for line in text.split()]


def _kill_all(directory: Path, *, wait: float) -> None:
    kill_file = directory / "cgroup.kill"
    with contextlib.suppress(OSError):
        kill_file.write_text("1", encoding="ascii")  # v2: the kernel kills the whole group
    deadline = time.monotonic() + wait
    while True:
        for pid in _procs(directory):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        try:
            directory.rmdir()
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                _log.warning("could not remove cgroup %s: %s", directory, exc)
                return
            time.sleep(0.001)
        else:
            return


def _remove(directory: Path) -> None:
    with contextlib.suppress(OSError):
        directory.rmdir()


def _sweep(parent: Path) -> None:
    """Remove empty legato cgroups left by processes that were killed before cleaning up."""
    now = time.time()
    with contextlib.suppress(OSError):
        for stale in parent.glob("legato-*"):
            with contextlib.suppress(OSError):
                if now - stale.stat().st_mtime > _STALE_SECONDS and not _procs(stale):
                    stale.rmdir()


def cgroup_parents(controller: str) -> list[_Parent]:
    """Groups under which a child group with `controller` could be made (v2 first)."""
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
    found: list[_Parent] = []
    for line in mounts:
        fields, _, tail = line.partition(" - ")
        parts, tails = fields.split(), tail.split()
        if len(parts) < 5 or len(tails) < 3:
            continue
        mount_root, mount_point, fstype, options = parts[3], parts[4], tails[0], tails[2]
        if fstype == "cgroup2" and "v2" in own:
            base = _join(mount_point, mount_root, own["v2"])
            with contextlib.suppress(OSError):
                controls = (base / "cgroup.subtree_control").read_text(encoding="ascii")
                if controller in controls.split():
                    found.insert(0, _Parent(path=base, version=2))
        elif fstype == "cgroup" and controller in options.split(","):
            key = next((k for k in own if controller in k.split(",")), None)
            if key is not None:
                found.append(_Parent(path=_join(mount_point, mount_root, own[key]), version=1))
    return found


def _join(mount_point: str, mount_root: str, path: str) -> Path:
    if mount_root != "/" and (path == mount_root or path.startswith(mount_root + "/")):
        path = path[len(mount_root) :]
    return Path(mount_point) / path.lstrip("/")
