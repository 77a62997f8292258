"""The write layer: a sandboxed command writes a sized overlay, applied to the host after it.

With the layer, bubblewrap mounts the workspace as an overlay: the command reads the real
files and writes a private tmpfs (the upper layer), mounted by a small supervisor
(`_layer_apply.py`) in a mount namespace of its own. Only when every process of the command
is gone does the supervisor apply the layer to the real workspace, and then it

- skips every path the workspace's `ProtectedPaths` names, however the command made it (a
  hook, `core.fsmonitor`, a `.git` of its own, a new `.git` after `rm -rf .git`...);
- applies nothing when the layer holds more than the room the workspace's quota leaves (the
  tmpfs is sized to that room, so the command meets `ENOSPC` first), and the runner raises
  `WorkspaceQuotaExceeded`;
- carries over files, links, directories, modes (never a set-id bit), times and deletions,
  but not sockets, pipes or devices.

What this costs: the supervisor's start (a Python interpreter) and the copy of what changed
(see docs/benchmarks.md); changes reach the host when the command ends, not while it runs,
and not at all when it is killed (timeout, output cap, cancellation); a changed file is
copied whole into the layer, so editing a large file needs room for all of it; the layer's
pages are memory, charged to the call's memory limit; and renaming a directory that
existed before the command fails with `EXDEV` (`mv` copies instead; `os.rename` does not).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legato.exceptions import SandboxUnavailable, WorkspaceQuotaExceeded
from legato.sandbox._workspace import Workspace

__all__ = ["Layer", "LayerReport"]

_SCRIPT = str(Path(__file__).with_name("_layer_apply.py"))
_PAGE = 4096


@dataclass(frozen=True, kw_only=True, slots=True)
class LayerReport:
    """What the supervisor did with a command's layer."""

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
    setup_error: str | None = None
    """The layer could not be mounted (the command did not run)."""


@dataclass(kw_only=True)
class Layer:
    """One call's layer: a private temporary directory for the mount point and the report."""

    workspace: Workspace
    room: int | None
    """Bytes the quota leaves (None: no quota)."""
    size: int | None
    """Size of the tmpfs (None: the kernel's default)."""
    directory: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="legato-layer-"))

    @classmethod
    def plan(cls, workspace: Workspace, memory_bytes: int | None) -> Layer:
        """The layer for the next call: sized by the quota's room, else by `memory_bytes`.

        Raises:
            WorkspaceQuotaExceeded: the workspace already holds more than its quota.
        """
        room = workspace.check_quota()
        if room < 0:
            return cls(workspace=workspace, room=None, size=memory_bytes)
        # the tmpfs counts whole pages; the exact room is checked when the layer is applied
        return cls(workspace=workspace, room=room, size=max(_PAGE, -(-room // _PAGE) * _PAGE))

    @property
    def mount(self) -> str:
        """Where the supervisor mounts the tmpfs (its `up` and `work` directories)."""
        return str(Path(self.directory, "layer"))

    def overlay_args(self) -> list[str]:
        """The bubblewrap arguments mounting the workspace as an overlay over the layer."""
        root = str(self.workspace.root)
        return [
            "--overlay-src",
            root,
            "--overlay",
            str(Path(self.mount, "up")),
            str(Path(self.mount, "work")),
            root,
        ]

    def wrap(self, bwrap_command: list[str], pass_fds: tuple[int, ...]) -> list[str]:
        """The supervisor's command line around bubblewrap's."""
        Path(self.mount).mkdir(mode=0o700)
        config = {
            "root": str(self.workspace.root),
            "mount": self.mount,
            "report": str(Path(self.directory, "report.json")),
            "size": self.size,
            "inodes": None,
            "room": self.room,
            "protected": self.workspace.protected.regex,
            "pass_fds": list(pass_fds),
        }
        return [sys.executable, "-I", "-S", _SCRIPT, json.dumps(config), "--", *bwrap_command]

    def report(self) -> LayerReport:
        """What the supervisor reported (nothing applied when it wrote no report)."""
        try:
            raw: dict[str, Any] = json.loads(
                Path(self.directory, "report.json").read_text(encoding="utf-8")
            )
        except (OSError, ValueError):
            return LayerReport(applied=False)
        return LayerReport(
            applied=bool(raw.get("applied")),
            full=bool(raw.get("full")),
            refused=tuple(raw.get("refused", ())),
            skipped=tuple(raw.get("skipped", ())),
            errors=tuple(raw.get("errors", ())),
            setup_error=raw.get("setup_error"),
        )

    def raise_for(self, report: LayerReport, output: str) -> None:
        """Raise for a layer that could not be mounted or that filled up.

        Raises:
            SandboxUnavailable: the layer could not be mounted on this machine.
            WorkspaceQuotaExceeded: the command wrote past the room the quota left.
        """
        if report.setup_error is not None:
            msg = (
                f"the sandbox's write layer cannot be mounted here ({report.setup_error}); "
                "it needs user and mount namespaces and overlayfs (Linux 5.11 or later), or "
                "run as root. Pass protected=ProtectedPaths.none() and no quota to the "
                "Workspace to run commands without it"
            )
            raise SandboxUnavailable(msg)
        if report.full and self.room is not None:
            quota = self.workspace.quota_bytes or 0
            tail = output[-1500:]
            msg = (
                f"the command wrote more than the {self.room} bytes left by the workspace's "
                f"quota of {quota} bytes; none of its changes were applied. Its output "
                f"ended with:\n{tail}"
            )
            raise WorkspaceQuotaExceeded(msg, used=quota - self.room, quota=quota)

    def close(self) -> None:
        """Remove the temporary directory (the tmpfs went with the supervisor's namespace)."""
        with contextlib.suppress(OSError):
            shutil.rmtree(self.directory)
