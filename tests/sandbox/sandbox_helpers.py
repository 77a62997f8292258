"""Helpers for sandbox tests: a workspace beside a planted secret, and the process table."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class Scene:
    """A workspace directory, with a secret and a writable directory planted outside it."""

    root: Path
    secret: Path
    secret_text: str
    outside: Path


def _stat_fields(pid: str) -> tuple[str, int] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid = text.rpartition(")")[2].split()[:2]
    return state, int(ppid)


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose command line contains `marker`."""
    found: list[int] = []
    for entry in (p.name for p in Path("/proc").iterdir()):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


def children_of_this_process() -> list[tuple[int, str]]:
    """(pid, state) of every child of the test process, zombies included."""
    me = os.getpid()
    out: list[tuple[int, str]] = []
    for entry in (p.name for p in Path("/proc").iterdir()):
        if entry.isdigit():
            fields = _stat_fields(entry)
            if fields is not None and fields[1] == me:
                out.append((int(entry), fields[0]))
    return out


def memory_cgroup_available() -> bool:
    """Whether this host lets legato make a memory cgroup for a call."""
    from legato.sandbox._cgroup import CallCgroup

    group = CallCgroup.create(memory_bytes=64 << 20)
    if group is None:
        return False
    group.close()
    return group.memory
