"""Fixtures for sandbox tests: a workspace beside a planted secret, and the process table."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True, kw_only=True)
class Scene:
    """A workspace directory, with a secret and a writable directory planted outside it."""

    root: Path
    secret: Path
    secret_text: str
    outside: Path


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    root = tmp_path / "ws"
    root.mkdir()
    token = f"SECRET-{uuid.uuid4().hex}"
    secret = tmp_path / "host-secret.txt"
    secret.write_text(token + "\n")
    secret.chmod(0o600)
    outside = tmp_path / "outside"
    outside.mkdir()
    return Scene(root=root, secret=secret, secret_text=token, outside=outside)


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
    for entry in os.listdir("/proc"):
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
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(entry)
            if fields is not None and fields[1] == me:
                out.append((int(entry), fields[0]))
    return out


@pytest.fixture
def process_table() -> Callable[[str], list[int]]:
    """`check(marker)`: live processes carrying `marker`, after asserting no child is left."""

    def check(marker: str) -> list[int]:
        assert children_of_this_process() == [], "a child process (or zombie) was left behind"
        return processes_with(marker)

    return check
