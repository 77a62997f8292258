"""Paths in the workspace that host programs run without being asked, and the workspace's size.

A sandboxed command cannot leave the workspace, but the workspace is read by programs on the
host afterwards. Some of them execute what they find there as a side effect of an ordinary
command: the host's `git status` runs `core.fsmonitor` from `.git/config` and `git commit`
runs `.git/hooks/*`; `hg` runs the hooks of `.hg/hgrc`; direnv evaluates `.envrc` on `cd`;
an editor runs the tasks of `.vscode/` or `.idea/` when the folder opens. Writing one of
them is writing a program the user will run with their full rights. `ProtectedPaths` names
them; the workspace refuses to write them (file tools get `ProtectedPathRefused`) and a
sandboxed command's changes to them are never applied to the host (see `_layer.py`).

Patterns are matched against the canonical path relative to the workspace root, without
regard to case (a case-insensitive file system has one `.git/config` for `.GIT/CONFIG`):
`*` matches within one component, `**/` any number of leading directories (none
included), a trailing `/**` everything below. A pattern protects the entry itself: it may
not be created, replaced, changed or deleted. `**/.git` therefore forbids a new repository
(or a `.git` file pointing git at a directory of the command's choosing) anywhere, while
an existing repository's objects, refs and index stay writable: only the patterns that name
its configuration and hooks protect what lies inside it. `**/HEAD` keeps a bare repository
from being made in an ordinary directory (git uses one it finds, with its `config`); the
policy's `allowed` patterns exempt a repository's own `HEAD`, reflogs and refs.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field

from legato.exceptions import ConfigurationError

__all__ = [
    "DEFAULT_ALLOWED_PATHS",
    "DEFAULT_PROTECTED_PATHS",
    "ProtectedPaths",
    "workspace_usage",
]

DEFAULT_PROTECTED_PATHS: tuple[str, ...] = (
    # git: no new repository or gitdir pointer; the files that name commands to run
    "**/.git",
    "**/.git/config",
    "**/.git/config.worktree",
    "**/.git/commondir",
    "**/.git/hooks",
    "**/.git/hooks/**",
    "**/.git/info",
    "**/.git/info/**",
    "**/.git/worktrees",
    "**/.git/worktrees/**",
    "**/.git/modules",
    "**/.git/modules/**",
    "**/.gitmodules",
    # a bare repository made from scratch (`HEAD`, `objects/`, `refs/` and a `config` in an
    # ordinary directory), which git uses when run inside it: no `HEAD` outside `.git`
    "**/HEAD",
    # Mercurial: a new repository, or hooks and extensions in its configuration
    "**/.hg",
    "**/.hg/hgrc",
    # direnv evaluates .envrc when a shell enters the directory
    "**/.envrc",
    # editors: tasks and settings that run programs when the folder is opened
    "**/.vscode",
    "**/.vscode/**",
    "**/.idea",
    "**/.idea/**",
)
"""The default policy; see the module docstring and docs/safety.md for why each is here."""

DEFAULT_ALLOWED_PATHS: tuple[str, ...] = (
    "**/.git/HEAD",
    "**/.git/logs/**",
    "**/.git/refs/**",
)
"""Paths the default policy leaves writable although a pattern names them: an existing
repository's own `HEAD`, reflogs and refs (`refs/remotes/origin/HEAD`)."""


def _translate(pattern: str) -> str:
    if not pattern or pattern.startswith("/") or "\0" in pattern:
        msg = f"a protected path pattern must be a non-empty relative path, got {pattern!r}"
        raise ConfigurationError(msg)
    out: list[str] = []
    rest = pattern
    if rest.startswith("**/"):
        out.append("(?:.*/)?")
        rest = rest[3:]
    tail = rest.endswith("/**")
    if tail:
        rest = rest[:-3]
    for i, part in enumerate(rest.split("/")):
        if part in ("", ".", "..") or "**" in part:
            msg = f"protected path pattern {pattern!r}: {part!r} is not a path component"
            raise ConfigurationError(msg)
        if i:
            out.append("/")
        out.extend("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in part)
    if tail:
        out.append("/.+")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class ProtectedPaths:
    """Which workspace paths no tool or sandboxed command may create, change or delete.

    ```python
    from legato.sandbox import ProtectedPaths, Workspace

    Workspace("/path/to/project")                     # the default policy
    Workspace("/path/to/project", protected=ProtectedPaths.default().adding("**/Makefile"))
    ProtectedPaths(("**/.envrc",), allowed=())        # a policy of one's own
    Workspace("/path/to/project", protected=ProtectedPaths.none())   # explicit opt-out
    ```

    Raises:
        ConfigurationError: a pattern that is absolute, empty, or has `..` in it.
    """

    patterns: tuple[str, ...] = DEFAULT_PROTECTED_PATHS
    """Glob patterns relative to the workspace root (see the module docstring)."""
    allowed: tuple[str, ...] = DEFAULT_ALLOWED_PATHS
    """Exceptions: paths these patterns match stay writable although a pattern names them."""
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        joined = "|".join(f"(?:{_translate(p)})" for p in self.patterns) or "(?!)"
        exempt = "|".join(f"(?:{_translate(p)})" for p in self.allowed)
        if exempt:
            joined = f"(?!(?:{exempt})\\Z)(?:{joined})"
        object.__setattr__(self, "_regex", re.compile(joined, re.IGNORECASE | re.DOTALL))

    @classmethod
    def default(cls) -> ProtectedPaths:
        """The default policy (`DEFAULT_PROTECTED_PATHS`)."""
        return cls()

    @classmethod
    def none(cls) -> ProtectedPaths:
        """No protected paths: host programs may run what a tool writes (an explicit opt-out)."""
        return cls((), ())

    def adding(self, *patterns: str) -> ProtectedPaths:
        """A policy with more patterns."""
        return ProtectedPaths((*self.patterns, *patterns), self.allowed)

    @property
    def compiled(self) -> re.Pattern[str]:
        """One regular expression (case-insensitive) matching every protected path."""
        return self._regex

    def match(self, relative: str) -> str | None:
        """The first pattern protecting `relative` (a canonical path), or None."""
        rel = relative.strip("/")
        if not rel or rel == "." or self._regex.fullmatch(rel) is None:
            return None
        return next(p for p in self.patterns if re.fullmatch(_translate(p), rel, re.I | re.S))

    def __bool__(self) -> bool:
        return bool(self.patterns)


def workspace_usage(root: str | os.PathLike[str]) -> int:
    """Bytes the tree under `root` holds: the sizes of its files and symbolic links.

    Directories and special files count nothing; links are not followed; a hard-linked file
    is counted once per name (the quota's view: what copying the tree would take).
    """
    total = 0
    stack = [os.fspath(root)]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)
            elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                total += st.st_size
    return total
