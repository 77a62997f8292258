"""Helpers for sandbox tests: a workspace beside a planted secret, and the process table."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
from collections.abc import Generator
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


def host_git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The host's own git in the workspace, with no configuration of the user's."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CEILING_DIRECTORIES": str(root.parent),
        "GIT_AUTHOR_NAME": "host",
        "GIT_AUTHOR_EMAIL": "host@example.invalid",
        "GIT_COMMITTER_NAME": "host",
        "GIT_COMMITTER_EMAIL": "host@example.invalid",
        # a workspace owned by another user (the unprivileged test) is trusted all the same
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.directory",
        "GIT_CONFIG_VALUE_0": "*",
    }
    return subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=False
    )


def host_uses_git(root: Path) -> None:
    """What a user does after the agent: `git status`, then a commit."""
    host_git(root, "status")
    host_git(root, "add", "-A")
    host_git(root, "commit", "-q", "--allow-empty", "-m", "after the agent")


class HostServer:
    """A host service listening on a unix socket; records what clients send it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.received: list[bytes] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def start(self) -> None:
        self._sock.bind(str(self.path))
        self._sock.listen(4)
        self._sock.settimeout(0.2)
        self._thread.start()

    def _serve(self) -> None:
        while self._sock.fileno() != -1:
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    self.received.append(conn.recv(100))
                    conn.sendall(b"host secret\n")

    def stop(self) -> None:
        self._sock.close()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def host_server(path: Path) -> Generator[HostServer]:
    server = HostServer(path)
    try:
        yield server
    finally:
        server.stop()


def workspace_bytes(root: Path) -> int:
    """Bytes of the files and links under `root` (what a workspace quota counts)."""
    from legato.sandbox._protect import workspace_usage

    return workspace_usage(root)
