"""The workspace and the OS sandbox: where tools may read, write and run commands.

- `Workspace(root)`: path confinement for file tools (descriptor-based, race-free).
- `BubblewrapRunner` / `sandbox_runner(workspace, "bwrap")`: commands under bubblewrap with
  a read-only system, the workspace writable, no network unless granted, a new PID
  namespace, no set-id bits on any file (a seccomp filter), a sized private `/tmp`, and
  resource `Limits` (memory for the whole call in a cgroup where the host allows one), no
  unix sockets, and the workspace written through a layer applied after the command: never
  to the paths host programs run (`ProtectedPaths`), never past the workspace's quota.
- `UnsandboxedRunner` / `sandbox="none"`: an explicit, logged opt-out; its commands run
  under a subreaper, so every descendant dies with them.
"""

from legato.sandbox._limits import Limits
from legato.sandbox._process import CommandResult
from legato.sandbox._protect import (
    DEFAULT_ALLOWED_PATHS,
    DEFAULT_PROTECTED_PATHS,
    ProtectedPaths,
)
from legato.sandbox._runner import (
    DEFAULT_HIDDEN_PATHS,
    DEFAULT_SYSTEM_PATHS,
    BubblewrapRunner,
    Runner,
    SandboxKind,
    UnsandboxedRunner,
    find_bwrap,
    python_paths,
    sandbox_runner,
)
from legato.sandbox._workspace import Entry, Workspace

__all__ = [
    "DEFAULT_ALLOWED_PATHS",
    "DEFAULT_HIDDEN_PATHS",
    "DEFAULT_PROTECTED_PATHS",
    "DEFAULT_SYSTEM_PATHS",
    "BubblewrapRunner",
    "CommandResult",
    "Entry",
    "Limits",
    "ProtectedPaths",
    "Runner",
    "SandboxKind",
    "UnsandboxedRunner",
    "Workspace",
    "find_bwrap",
    "python_paths",
    "sandbox_runner",
]
