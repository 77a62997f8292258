"""The write layer: a sandboxed command writes a sized overlay, applied to the host after it.

With the layer, bubblewrap mounts the workspace as an overlay: the command reads the real
files and writes a private tmpfs (the upper layer). A small shell supervisor, started by
`unshare` in a mount namespace of its own (and a user namespace mapping the caller to root
when the caller is not root), mounts that tmpfs, runs bubblewrap and, once every process of
the command is gone, reports its pid to legato, which opens the upper directory through
`/proc/PID/root` (the tmpfs outlives its namespace while that descriptor is open) and lets
the supervisor exit. legato then applies the layer to the real workspace
(`legato.sandbox._apply`):

- never a path the workspace's `ProtectedPaths` names, however the command made it (a
  hook, `core.fsmonitor`, a `.git` of its own, a new `.git` after `rm -rf .git`...);
- nothing at all when the layer holds more than the room the workspace's quota leaves (the
  tmpfs is sized to that room, so the command meets `ENOSPC` first); the runner then
  raises `WorkspaceQuotaExceeded`;
- otherwise files, links, directories, modes (never a set-id bit), times and deletions, but
  not sockets, pipes or devices.

What this costs: two small programs (`unshare`, `mount`) and a shell per command, and the
copy of what changed (see docs/benchmarks.md); changes reach the host when the command
ends, not while it runs, and not at all when it is killed (timeout, output cap,
cancellation); a changed file is copied whole into the layer, so editing a large file needs
room for all of it; the layer's pages are memory, charged to the call's memory limit; and
renaming a directory that existed before the command fails with `EXDEV` (`mv` copies
instead; a bare `rename(2)` does not).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from legato.exceptions import SandboxUnavailable, WorkspaceQuotaExceeded
from legato.sandbox._apply import MAX_DEPTH, Apply, scan
from legato.sandbox._workspace import Workspace

__all__ = ["Layer", "LayerReport"]

_PAGE = 4096
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

_SUPERVISOR = """L=$1 W=$2 R=$3 O=$4; shift 4
if ! mount -t tmpfs -o "$O" legato-layer "$L" || ! mkdir "$L/up" "$L/work"; then
  echo setup > "$W"; exit 125
fi
"$@"
rc=$?
echo "$$ $rc" > "$W"
read -r _ < "$R"
exit "$rc"
"""
"""Mount the layer, run bubblewrap, report, wait until legato holds the layer, exit."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LayerReport:
    """What became of a command's layer."""

    applied: bool
    """The layer was applied to the workspace (False: killed, or the layer was full)."""
    full: bool = False
    """The command wrote more than the room the quota left; nothing was applied."""
    refused: tuple[str, ...] = ()
    """Protected paths the command changed; they were not applied."""
    skipped: tuple[str, ...] = ()
    """Sockets, pipes and devices the command made; they were not applied."""
    errors: tuple[str, ...] = ()
    """Paths that could not be applied (a host error such as a full disk)."""
    setup_failed: bool = False
    """The layer could not be mounted (the command did not run)."""


@dataclass(kw_only=True)
class Layer:
    """One call's layer (see the module docstring)."""

    workspace: Workspace
    room: int | None
    """Bytes the quota leaves (None: no quota)."""
    size: int | None
    """Size of the tmpfs (None: the kernel's default)."""
    inodes: int | None = None
    """Entries the tmpfs may hold (None: the kernel's default)."""
    directory: str = ""
    """legato's private directory for the mount point and the FIFOs (made when empty)."""
    _fifos: tuple[int, int] | None = None
    """legato's ends of the report and release FIFOs (opened read-write: never blocking)."""
    _thread: threading.Thread | None = None
    _upper: int | None = None
    _setup_failed: bool = False

    def __post_init__(self) -> None:
        if not self.directory:
            self.directory = _private_directory(self.workspace.root)

    @classmethod
    def plan(
        cls, workspace: Workspace, memory_bytes: int | None, entries: int | None = None
    ) -> Layer:
        """The layer for the next call: sized by the quota's room, else by `memory_bytes`.

        `entries` bounds the files, directories and links it may hold.

        Raises:
            WorkspaceQuotaExceeded: the workspace already holds more than its quota.
        """
        room = workspace.check_quota()
        inodes = None if entries is None else entries + 3  # + its root, `up` and `work`
        if room < 0:
            return cls(workspace=workspace, room=None, size=memory_bytes, inodes=inodes)
        # the tmpfs counts whole pages; the exact room is checked when the layer is applied
        size = max(_PAGE, -(-room // _PAGE) * _PAGE)
        return cls(workspace=workspace, room=room, size=size, inodes=inodes)

    @property
    def mount(self) -> str:
        """Where the supervisor mounts the tmpfs (its `up` and `work` directories)."""
        return str(Path(self.directory, "layer"))

    def overlay_args(self) -> list[str]:
        """The bubblewrap arguments mounting the workspace as an overlay over the layer."""
        root = str(self.workspace.root)
        up, work = str(Path(self.mount, "up")), str(Path(self.mount, "work"))
        return ["--overlay-src", root, "--overlay", up, work, root]

    def wrap(self, bwrap_command: list[str]) -> list[str]:
        """The supervisor's command line around bubblewrap's.

        Raises:
            SandboxUnavailable: `unshare` (util-linux) is not installed.
        """
        unshare = shutil.which("unshare")
        if unshare is None:
            msg = (
                "`unshare` (util-linux) is not installed, so the sandbox's write layer cannot "
                "be mounted; install util-linux, or give the Workspace "
                "protected=ProtectedPaths.none() and no quota to run without the layer"
            )
            raise SandboxUnavailable(msg)
        Path(self.mount).mkdir(mode=0o700)
        report, release = str(Path(self.directory, "report")), str(Path(self.directory, "release"))
        os.mkfifo(report, 0o600)
        os.mkfifo(release, 0o600)
        flags = os.O_RDWR | os.O_CLOEXEC
        self._fifos = (os.open(report, flags), os.open(release, flags))
        self._thread = threading.Thread(target=self._hold, name="legato-layer", daemon=True)
        self._thread.start()
        options = ["mode=0700"]
        if self.size is not None:
            options.append(f"size={self.size}")
        if self.inodes is not None:
            options.append(f"nr_inodes={self.inodes}")
        user = ["--user", "--map-root-user"] if os.geteuid() != 0 else []
        return [
            unshare,
            "--mount",
            "--propagation",
            "private",
            *user,
            "/bin/sh",
            "-c",
            _SUPERVISOR,
            "legato-layer",
            self.mount,
            report,
            release,
            ",".join(options),
            *bwrap_command,
        ]

    def _hold(self) -> None:
        """Wait for the supervisor's report; open its upper directory; release it."""
        assert self._fifos is not None
        report, release = self._fifos
        with os.fdopen(report, "rb", closefd=False, buffering=0) as f:
            line = f.readline().split()  # the supervisor's line, or legato's "done"
        if line == [b"setup"]:
            self._setup_failed = True
        elif len(line) == 2 and line[0].isdigit():
            with contextlib.suppress(OSError):
                self._upper = os.open(f"/proc/{int(line[0])}/root{self.mount}/up", _DIR)
        with contextlib.suppress(OSError):
            os.write(release, b"go\n")

    def finish(self) -> LayerReport:
        """After the supervisor exited: apply the layer (or not) and say what happened."""
        self._stop_holder()
        if self._setup_failed:
            return LayerReport(applied=False, setup_failed=True)
        upper, self._upper = self._upper, None
        if upper is None:
            return LayerReport(applied=False)
        try:
            held, depth = scan(upper)
            if self._full(upper, held):
                return LayerReport(applied=False, full=True)
            if depth > MAX_DEPTH:
                deep = f"directories nested {depth} levels deep (more than {MAX_DEPTH})"
                return LayerReport(applied=False, errors=(deep,))
            apply = Apply(self.workspace.protected.compiled)
            host = self.workspace.open_root()  # the same directory, or SandboxViolation
            try:
                apply.directory(upper, host, "", opaque=False)
            finally:
                os.close(host)
        finally:
            os.close(upper)
        return LayerReport(
            applied=True,
            refused=tuple(apply.refused),
            skipped=tuple(apply.skipped),
            errors=tuple(apply.errors),
        )

    def _stop_holder(self) -> None:
        """Once the supervisor is gone: tell the holder (if still waiting), close the FIFOs."""
        if self._fifos is None:
            return
        fifos, self._fifos = self._fifos, None
        with contextlib.suppress(OSError):
            os.write(fifos[0], b"done\n")  # after the supervisor's own line, if it wrote one
        if self._thread is not None:
            self._thread.join()
        for fd in fifos:
            os.close(fd)

    def _full(self, upper: int, held: int) -> bool:
        if self.room is None:
            return False
        vfs = os.fstatvfs(upper)
        return vfs.f_bavail == 0 or vfs.f_favail == 0 or held > self.room

    def raise_for(self, report: LayerReport, output: str) -> None:
        """Raise for a layer that could not be mounted or that filled up.

        Raises:
            SandboxUnavailable: the layer could not be mounted on this machine.
            WorkspaceQuotaExceeded: the command wrote past the room the quota left.
        """
        if report.setup_failed:
            msg = (
                f"the sandbox's write layer cannot be mounted here ({output.strip()}); it "
                "needs user and mount namespaces and overlayfs (Linux 5.11 or later). Give "
                "the Workspace protected=ProtectedPaths.none() and no quota to run commands "
                "without it"
            )
            raise SandboxUnavailable(msg)
        if report.full and self.room is not None:
            quota = self.workspace.quota_bytes or 0
            msg = (
                f"the command wrote more than the {self.room} bytes left by the workspace's "
                f"quota of {quota} bytes; none of its changes were applied. Its output "
                f"ended with:\n{output[-1500:]}"
            )
            raise WorkspaceQuotaExceeded(msg, used=quota - self.room, quota=quota)

    def close(self) -> None:
        """Release everything (after `finish`, or when the call failed before it)."""
        self._stop_holder()
        if self._upper is not None:
            os.close(self._upper)
            self._upper = None
        with contextlib.suppress(OSError):
            shutil.rmtree(self.directory)


def _private_directory(root: Path) -> str:
    """A fresh directory of legato's, never inside the workspace.

    A command could reach the FIFOs there. The temporary directory, else `/tmp`.
    """
    for base in (tempfile.gettempdir(), "/tmp"):
        real = Path(base).resolve()
        if real != root and root not in real.parents:
            return tempfile.mkdtemp(prefix="legato-layer-", dir=real)
    msg = f"no temporary directory outside the workspace {str(root)!r} for the write layer"
    raise SandboxUnavailable(msg)
