"""The workspace as a channel to the host (issue 24), each channel closed, each with its twin.

- programs the host's own `git` runs: a hook or a `core.fsmonitor` command planted in
  `.git/` by a sandboxed command or a file tool, run later by the test's real `git status`
  and `git commit` on the host;
- unix sockets in the workspace: a host server listening on a socket inside the workspace
  (present before the command, or made while it runs) and a sandboxed client;
- the workspace's total size: a command writing four times the quota.

Every check is an effect on the host (a marker file, a message the host server received,
the bytes the workspace holds), and every twin switches one protection off to show the
escape, so the tests can fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import Scene, host_git, host_server, host_uses_git

import legato.sandbox._runner as runner_module
from legato.exceptions import (
    ConfigurationError,
    ProtectedPathRefused,
    ToolError,
    WorkspaceQuotaExceeded,
)
from legato.sandbox import (
    BubblewrapRunner,
    CommandResult,
    Limits,
    ProtectedPaths,
    Workspace,
    python_paths,
)
from legato.sandbox._protect import workspace_usage
from legato.tools import RunContext, Tool
from legato.tools.builtin import workspace_tools

SH = "/bin/sh"
MB = 1_000_000


def plant_script(marker: Path) -> str:
    """A shell command planting three things git runs, each touching `marker`."""
    hook = f"#!/bin/sh\ntouch {marker}\n"
    return (
        "git init -q . 2>/dev/null; "
        f"printf '{hook}' > .git/hooks/post-commit; chmod +x .git/hooks/post-commit; "
        f"printf '{hook}' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; "
        f"git config core.fsmonitor 'touch {marker}'; "
        "mkdir -p .hooks-elsewhere; "
        f"printf '{hook}' > .hooks-elsewhere/post-commit; chmod +x .hooks-elsewhere/post-commit; "
        "git config core.hooksPath .hooks-elsewhere; "
        "echo planted"
    )


async def run_plant(root: Path, marker: Path) -> CommandResult:
    runner = BubblewrapRunner(Workspace(root))
    result = await runner.run([SH, "-c", plant_script(marker)])
    assert "planted" in result.stdout, result.render()
    return result


@pytest.mark.parametrize("repository", ["existing", "made by the command"])
async def test_a_sandboxed_command_cannot_plant_what_the_host_git_runs(
    scene: Scene, repository: str
) -> None:
    marker = scene.outside / "host-git-ran-it"
    if repository == "existing":
        assert host_git(scene.root, "init", "-q").returncode == 0
    result = await run_plant(scene.root, marker)
    host_uses_git(scene.root)
    assert not marker.exists(), result.render()
    assert any(p.startswith(".git") for p in result.refused_paths), result.render()
    assert "not applied: changes to protected paths" in result.render()


async def test_host_git_twin_without_the_layer(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner_module, "_WRITE_LAYER", False)
    marker = scene.outside / "host-git-ran-it"
    assert host_git(scene.root, "init", "-q").returncode == 0
    await run_plant(scene.root, marker)
    host_uses_git(scene.root)
    assert marker.exists()


async def test_host_git_twin_with_the_policy_switched_off(scene: Scene) -> None:
    """`ProtectedPaths.none()` is the documented opt-out: the plant reaches the host."""
    marker = scene.outside / "host-git-ran-it"
    assert host_git(scene.root, "init", "-q").returncode == 0
    runner = BubblewrapRunner(Workspace(scene.root, protected=ProtectedPaths.none()))
    await runner.run([SH, "-c", plant_script(marker)])
    host_uses_git(scene.root)
    assert marker.exists()


PLANTS_BY_OTHER_ROUTES = {
    "through a symbolic link to .git/hooks": (
        "ln -s .git/hooks h && printf '#!/bin/sh\\ntouch {m}\\n' > h/post-commit "
        "&& chmod +x h/post-commit"
    ),
    "a .git file pointing git at a directory of the command's": (
        "rm -rf .git && mkdir -p evil && git init -q --bare evil "
        "&& git -C evil config core.fsmonitor 'touch {m}' "
        "&& git -C evil config core.bare false && echo 'gitdir: evil' > .git"
    ),
    "rm -rf .git, then a repository of its own": (
        "rm -rf .git && git init -q . && git config core.fsmonitor 'touch {m}'"
    ),
    "a nested repository": (
        "mkdir -p sub && git init -q sub && git -C sub config core.fsmonitor 'touch {m}'"
    ),
    "a bare repository with a work tree, in an ordinary directory": (
        "git init -q --bare sub && git -C sub config core.bare false "
        '&& git -C sub config core.worktree "$PWD/sub" '
        "&& git -C sub config core.fsmonitor 'touch {m}'"
    ),
}


@pytest.mark.parametrize("route", list(PLANTS_BY_OTHER_ROUTES))
async def test_other_routes_to_a_plant_are_not_applied(scene: Scene, route: str) -> None:
    marker = scene.outside / "host-git-ran-it"
    assert host_git(scene.root, "init", "-q").returncode == 0
    (scene.root / "sub").mkdir()
    runner = BubblewrapRunner(Workspace(scene.root))
    result = await runner.run([SH, "-c", PLANTS_BY_OTHER_ROUTES[route].format(m=marker)])
    host_uses_git(scene.root)
    host_uses_git(scene.root / "sub")
    assert not marker.exists(), result.render()
    assert result.refused_paths, result.render()


@pytest.mark.parametrize("route", list(PLANTS_BY_OTHER_ROUTES))
async def test_other_routes_twin_without_the_policy(scene: Scene, route: str) -> None:
    """Each route is a real attack: with `ProtectedPaths.none()` the host's git runs it."""
    marker = scene.outside / "host-git-ran-it"
    assert host_git(scene.root, "init", "-q").returncode == 0
    (scene.root / "sub").mkdir()
    runner = BubblewrapRunner(Workspace(scene.root, protected=ProtectedPaths.none()))
    result = await runner.run([SH, "-c", PLANTS_BY_OTHER_ROUTES[route].format(m=marker)])
    host_uses_git(scene.root)
    host_uses_git(scene.root / "sub")
    assert marker.exists(), result.render()


async def test_ordinary_work_in_a_repository_still_lands(scene: Scene) -> None:
    """Commits, new files, deletions and modes made in the sandbox reach the host."""
    assert host_git(scene.root, "init", "-q").returncode == 0
    (scene.root / "old.txt").write_text("old\n")
    (scene.root / "gone").mkdir()
    (scene.root / "gone" / "f").write_text("x\n")
    runner = BubblewrapRunner(Workspace(scene.root))
    script = (
        "echo new > new.txt && chmod 755 new.txt && rm old.txt && rm -r gone && mkdir -p a/b "
        "&& echo deep > a/b/c && ln -s a/b/c link && git add -A "
        "&& git -c user.name=a -c user.email=a@example.invalid commit -qm inside && echo ok"
    )
    result = await runner.run([SH, "-c", script])
    assert result.ok and result.refused_paths == (), result.render()
    assert (scene.root / "new.txt").read_text() == "new\n"
    assert os.access(scene.root / "new.txt", os.X_OK)
    assert not (scene.root / "old.txt").exists() and not (scene.root / "gone").exists()
    assert (scene.root / "link").read_text() == "deep\n"
    log = host_git(scene.root, "log", "--format=%s")
    assert log.stdout.strip() == "inside", log.stderr


# -- the file tools ----------------------------------------------------------------------------


async def call_tool(root: Path, name: str, workspace: Workspace, **arguments: Any) -> str:
    tools = workspace_tools(workspace, commands=False)
    tool = tools.get(name)
    assert isinstance(tool, Tool)
    ctx: RunContext[None] = RunContext(deps=None, run_id="host-channels", tool_name=name)
    return str(await tool.invoke(tool.validate(arguments), ctx))


FSMONITOR = "[core]\n\tfsmonitor = touch {m}\n"


@pytest.mark.parametrize(
    "path", [".git/config", ".git/hooks/post-commit", "sub/.git/config", ".GIT/CONFIG"]
)
async def test_file_tools_refuse_to_write_what_the_host_git_runs(scene: Scene, path: str) -> None:
    marker = scene.outside / "host-git-ran-it"
    assert host_git(scene.root, "init", "-q").returncode == 0
    (scene.root / "sub").mkdir()
    ws = Workspace(scene.root)
    with pytest.raises(ToolError, match="may not be written") as caught:
        await call_tool(scene.root, "write_file", ws, path=path, content=FSMONITOR.format(m=marker))
    assert isinstance(caught.value.__cause__, ProtectedPathRefused)
    host_uses_git(scene.root)
    assert not marker.exists()
    assert not (scene.root / "sub" / ".git").exists()


async def test_file_tools_twin_without_the_policy(scene: Scene) -> None:
    marker = scene.outside / "host-git-ran-it"
    assert host_git(scene.root, "init", "-q").returncode == 0
    ws = Workspace(scene.root, protected=ProtectedPaths.none())
    await call_tool(
        scene.root, "write_file", ws, path=".git/config", content=FSMONITOR.format(m=marker)
    )
    host_uses_git(scene.root)
    assert marker.exists()


def test_workspace_refuses_protected_paths_through_links_and_new_directories(
    scene: Scene,
) -> None:
    ws = Workspace(scene.root)
    (scene.root / ".git" / "hooks").mkdir(parents=True)
    (scene.root / "h").symlink_to(".git/hooks")
    for path in ("h/post-commit", ".envrc", "a/.hg/hgrc", ".vscode/tasks.json", "x/.git"):
        with pytest.raises(ProtectedPathRefused):
            ws.write_bytes(path, b"#!/bin/sh\n")
    with pytest.raises(ProtectedPathRefused):
        ws.mkdir("deep/down/.git")
    assert not (scene.root / "h" / "post-commit").exists()
    assert not (scene.root / "deep" / "down" / ".git").exists()
    assert ws.write_bytes(".git/objects/ab/cdef", b"object") == ".git/objects/ab/cdef"
    assert ws.write_bytes("docs/git.md", b"# .git/config") == "docs/git.md"


def test_protected_paths_policy() -> None:
    policy = ProtectedPaths.default()
    assert policy.match(".git/hooks/pre-push") == "**/.git/hooks/**"
    assert policy.match("a/b/.git/config") == "**/.git/config"
    assert policy.match(".git/objects/aa/bb") is None
    assert policy.match("sub/HEAD") == "**/HEAD"  # a bare repository's marker
    assert policy.match(".git/HEAD") is policy.match(".git/logs/HEAD") is None
    assert policy.match(".git/refs/remotes/origin/HEAD") is None
    assert policy.match(".gitignore") is None
    assert policy.adding("**/Makefile").match("x/Makefile") == "**/Makefile"
    assert not ProtectedPaths.none()
    for bad in ("/etc/passwd", "", "a/../b", "a/**b"):
        with pytest.raises(ConfigurationError):
            ProtectedPaths((bad,))


# -- unix sockets in the workspace ---------------------------------------------------------------


CLIENT = """
import os, socket, sys, time
path = sys.argv[1]
for _ in range(400):  # up to 20 s for a socket the host makes later
    if os.path.exists(path):
        break
    time.sleep(0.05)
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(b"hello from the sandbox")
    print("answer:", s.recv(100).decode().strip())
except OSError as exc:
    print("refused:", exc)
"""


async def connect_from_sandbox(root: Path, name: str, *, later: bool) -> tuple[str, list[bytes]]:
    interpreter, prefixes = python_paths()
    runner = BubblewrapRunner(Workspace(root), read_only_paths=prefixes)
    (root / "client.py").write_text(CLIENT)
    with host_server(root / name) as server:
        call = runner.run([interpreter, "-I", "client.py", name], limits=Limits(timeout=40))
        if later:
            task = asyncio.create_task(call)
            await asyncio.sleep(1.0)  # the command is waiting for the socket by then
            server.start()
            result = await task
        else:
            server.start()
            result = await call
    return result.render(), server.received


@pytest.mark.parametrize("layer", [True, False], ids=["layer", "filter alone"])
@pytest.mark.parametrize("later", [False, True], ids=["present", "made while it runs"])
async def test_a_host_socket_in_the_workspace_is_unreachable(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, later: bool, layer: bool
) -> None:
    monkeypatch.setattr(runner_module, "_WRITE_LAYER", layer)
    out, received = await connect_from_sandbox(scene.root, "service.sock", later=later)
    assert received == [], out
    assert "refused:" in out and "Operation not permitted" in out, out


async def test_the_layer_alone_hides_host_sockets_too(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the filter, the overlay's socket is not the host's: nothing connects."""
    monkeypatch.setattr(runner_module, "_UNIX_FILTER", False)
    out, received = await connect_from_sandbox(scene.root, "service.sock", later=False)
    assert received == [], out
    assert "Connection refused" in out, out


async def test_host_socket_twin_without_the_filter_or_the_layer(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner_module, "_UNIX_FILTER", False)
    monkeypatch.setattr(runner_module, "_WRITE_LAYER", False)
    out, received = await connect_from_sandbox(scene.root, "service.sock", later=False)
    assert received == [b"hello from the sandbox"], out
    assert "answer: host secret" in out


async def test_unix_sockets_can_be_allowed_and_socketpair_always_works(scene: Scene) -> None:
    interpreter, prefixes = python_paths()
    code = "import socket; a, b = socket.socketpair(); a.send(b'x'); print(b.recv(1))"
    runner = BubblewrapRunner(Workspace(scene.root), read_only_paths=prefixes)
    result = await runner.run([interpreter, "-I", "-c", code])
    assert result.ok and "b'x'" in result.stdout, result.render()
    allowed = BubblewrapRunner(Workspace(scene.root), read_only_paths=prefixes, unix_sockets=True)
    code = "import socket; socket.socket(socket.AF_UNIX).close(); print('made')"
    result = await allowed.run([interpreter, "-I", "-c", code])
    assert result.ok and "made" in result.stdout, result.render()


# -- the workspace's total size ------------------------------------------------------------------

QUOTA = 5 * MB
WRITE = 20 * MB
BIG = Limits(file_size_bytes=64 << 20, timeout=60)


async def fill(root: Path, workspace: Workspace) -> CommandResult:
    runner = BubblewrapRunner(workspace)
    script = f"head -c {WRITE // 4} /dev/zero > a; head -c {WRITE // 4} /dev/zero > b; " + (
        f"head -c {WRITE // 2} /dev/zero > c; echo wrote"
    )
    return await runner.run([SH, "-c", script], limits=BIG)


async def test_a_command_cannot_grow_the_workspace_past_its_quota(scene: Scene) -> None:
    (scene.root / "existing.txt").write_bytes(b"x" * MB)
    before = workspace_usage(scene.root)
    with pytest.raises(WorkspaceQuotaExceeded, match="none of its changes were applied") as caught:
        await fill(scene.root, Workspace(scene.root, quota_bytes=QUOTA))
    grown = workspace_usage(scene.root) - before
    assert grown <= QUOTA - before
    assert grown == 0  # all or nothing
    assert caught.value.quota == QUOTA
    assert "No space left on device" in str(caught.value)


async def test_quota_twin_without_the_layer(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_module, "_WRITE_LAYER", False)
    before = workspace_usage(scene.root)
    result = await fill(scene.root, Workspace(scene.root, quota_bytes=QUOTA))
    assert result.ok, result.render()
    assert workspace_usage(scene.root) - before == WRITE


async def test_a_command_within_the_quota_lands(scene: Scene) -> None:
    ws = Workspace(scene.root, quota_bytes=QUOTA)
    result = await BubblewrapRunner(ws).run([SH, "-c", f"head -c {MB} /dev/zero > one"])
    assert result.ok, result.render()
    assert (scene.root / "one").stat().st_size == MB


async def test_a_workspace_over_its_quota_runs_nothing(scene: Scene) -> None:
    (scene.root / "big").write_bytes(b"x" * (QUOTA + 1))
    ws = Workspace(scene.root, quota_bytes=QUOTA)
    marker = scene.root / "ran"
    with pytest.raises(WorkspaceQuotaExceeded, match="exceeds its quota"):
        await BubblewrapRunner(ws).run([SH, "-c", f"touch {marker}"])
    assert not marker.exists()
    tools = {t.name: t for t in workspace_tools(ws)}
    ctx: RunContext[None] = RunContext(deps=None, run_id="quota", tool_name="shell")
    with pytest.raises(ToolError, match="exceeds its quota"):
        await tools["shell"].invoke(tools["shell"].validate({"command": "touch ran"}), ctx)
    with pytest.raises(ToolError, match="exceed its quota"):
        await call_tool(scene.root, "write_file", ws, path="note.txt", content="hi")
    assert sorted(p.name for p in scene.root.iterdir()) == ["big"]  # nothing half-written


async def test_file_tools_check_the_quota(scene: Scene) -> None:
    ws = Workspace(scene.root, quota_bytes=QUOTA)
    await call_tool(scene.root, "write_file", ws, path="a.txt", content="x" * (3 * MB))
    with pytest.raises(ToolError, match="would exceed") as caught:
        await call_tool(scene.root, "write_file", ws, path="b.txt", content="x" * (3 * MB))
    assert isinstance(caught.value.__cause__, WorkspaceQuotaExceeded)
    assert sorted(p.name for p in scene.root.iterdir()) == ["a.txt"]
    # replacing a file counts only the difference
    await call_tool(scene.root, "write_file", ws, path="a.txt", content="y" * (4 * MB))
    assert workspace_usage(scene.root) == 4 * MB


async def test_file_tools_quota_twin(scene: Scene) -> None:
    ws = Workspace(scene.root)
    await call_tool(scene.root, "write_file", ws, path="a.txt", content="x" * (3 * MB))
    await call_tool(scene.root, "write_file", ws, path="b.txt", content="x" * (3 * MB))
    assert workspace_usage(scene.root) == 6 * MB > QUOTA


def test_a_quota_below_one_is_a_configuration_error(scene: Scene) -> None:
    with pytest.raises(ConfigurationError):
        Workspace(scene.root, quota_bytes=0)


# -- what the layer changes for ordinary commands ------------------------------------------------


async def test_a_killed_command_leaves_nothing(scene: Scene) -> None:
    """All or nothing: a command killed on timeout has none of its changes applied."""
    runner = BubblewrapRunner(Workspace(scene.root))
    script = "echo partial > half.txt; rm -f keep.txt; sleep 30"
    (scene.root / "keep.txt").write_text("kept\n")
    result = await runner.run([SH, "-c", script], limits=Limits(timeout=1))
    assert result.timed_out
    assert not (scene.root / "half.txt").exists()
    assert (scene.root / "keep.txt").read_text() == "kept\n"
    assert "discarded" in result.render()


async def test_a_killed_command_twin_without_the_layer(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner_module, "_WRITE_LAYER", False)
    runner = BubblewrapRunner(Workspace(scene.root))
    result = await runner.run(
        [SH, "-c", "echo partial > half.txt; sleep 30"], limits=Limits(timeout=1)
    )
    assert result.timed_out
    assert (scene.root / "half.txt").exists()


async def test_a_working_directory_below_the_root(scene: Scene) -> None:
    (scene.root / "pkg").mkdir()
    runner = BubblewrapRunner(Workspace(scene.root))
    result = await runner.run([SH, "-c", "pwd && echo here > made.txt"], cwd="pkg")
    assert result.ok and result.stdout.strip() == str(scene.root / "pkg"), result.render()
    assert (scene.root / "pkg" / "made.txt").read_text() == "here\n"


async def test_without_unshare_the_layer_is_unavailable(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    import legato.sandbox._layer as layer_module
    from legato.exceptions import SandboxUnavailable

    runner = BubblewrapRunner(Workspace(scene.root))
    await runner.run(["true"])  # the probe, before `unshare` disappears

    def nowhere(_name: str) -> None:
        return None

    monkeypatch.setattr(layer_module.shutil, "which", nowhere)
    with pytest.raises(SandboxUnavailable, match="unshare"):
        await runner.run(["true"])


async def test_a_host_that_cannot_mount_the_layer_is_reported(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    import legato.sandbox._layer as layer_module
    from legato.exceptions import SandboxUnavailable

    def broken(self: layer_module.Layer) -> list[str]:
        root = str(self.workspace.root)
        return ["--overlay-src", root, "--overlay", "/nonexistent/up", "/nonexistent/work", root]

    monkeypatch.setattr(layer_module.Layer, "overlay_args", broken)
    with pytest.raises(SandboxUnavailable, match="write layer"):
        await BubblewrapRunner(Workspace(scene.root)).run(["true"])


# -- as a user other than root ---------------------------------------------------------------------

NOBODY = 65534
UNPRIVILEGED = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
from legato.exceptions import WorkspaceQuotaExceeded
from legato.sandbox import BubblewrapRunner, ProtectedPaths, Workspace

async def main():
    out = {}
    for name, policy in (("guarded", None), ("open", ProtectedPaths.none())):
        ws = Workspace(sys.argv[3] + "/" + name, protected=policy, quota_bytes=5_000_000)
        runner = BubblewrapRunner(ws, bwrap=sys.argv[2])
        result = await runner.run(["/bin/sh", "-c", "id -u; echo kept > kept.txt; " + sys.argv[4]])
        out[name] = [result.stdout.split()[0], list(result.refused_paths)]
        try:
            await runner.run(["/bin/sh", "-c", "head -c 20000000 /dev/zero > big"])
        except WorkspaceQuotaExceeded:
            out[name].append("quota")
    print(json.dumps(out))

asyncio.run(main())
"""


def _unprivileged_python(src: str) -> str | None:
    """A Python the unprivileged user may run that imports legato's sandbox from `src`.

    None when there is none: no such interpreter, or a checkout the user may not read (a
    clone inside a directory of mode 0700, for example).
    """
    probe_code = f"import sys; sys.path.insert(0, {src!r}); import legato.sandbox"
    for candidate in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if candidate is None:
            continue
        probe = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", candidate]
            + ["-c", probe_code],
            capture_output=True,
            check=False,
        )
        if probe.returncode == 0:
            return candidate
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to an unprivileged user (needs root)")
def test_as_an_unprivileged_user_the_layer_holds(scene: Scene) -> None:
    """The layer's user namespace (a user mapped to root, who may mount the tmpfs)."""
    import legato
    from legato.sandbox import find_bwrap

    src = str(Path(legato.__file__).parents[1])
    if shutil.which("setpriv") is None or (python := _unprivileged_python(src)) is None:
        pytest.skip(
            "no setpriv, or the unprivileged user cannot run Python with legato from "
            f"{src} (is a directory above the checkout unreadable to others?)"
        )
    base = Path(tempfile.mkdtemp(prefix="legato-nobody-"))
    try:
        markers: dict[str, Path] = {}
        for name in ("guarded", "open"):
            (base / name).mkdir()
            assert host_git(base / name, "init", "-q").returncode == 0
            markers[name] = scene.outside / f"ran-{name}"
        for path in [base, *base.rglob("*")]:
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
        plant = 'git config core.fsmonitor "touch $MARKER"'
        script = [python, "-I", "-c", UNPRIVILEGED, src, find_bwrap(), str(base)]
        results: dict[str, list[Any]] = {}
        for name in ("guarded", "open"):
            command = plant.replace("$MARKER", str(markers[name]))
            run = subprocess.run(
                ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
                + [*script, command],
                capture_output=True,
                text=True,
                check=False,
            )
            assert run.returncode == 0, run.stderr
            results[name] = json.loads(run.stdout)[name]
        for name in ("guarded", "open"):
            host_uses_git(base / name)
            assert (base / name / "kept.txt").stat().st_uid == NOBODY
            assert not (base / name / "big").exists()
        assert results["guarded"] == [str(NOBODY), [".git/config"], "quota"]
        assert not markers["guarded"].exists()
        assert results["open"][0] == str(NOBODY) and results["open"][2] == "quota"
        assert markers["open"].exists()  # the twin: without the policy, the host's git runs it
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def test_a_replaced_directory_keeps_its_protected_entries_and_gets_the_rest(
    scene: Scene,
) -> None:
    (scene.root / "sub").mkdir()
    assert host_git(scene.root / "sub", "init", "-q").returncode == 0
    (scene.root / "sub" / "old.txt").write_text("old\n")
    runner = BubblewrapRunner(Workspace(scene.root))
    result = await runner.run([SH, "-c", "rm -rf sub && mkdir sub && echo new > sub/new.txt"])
    assert (scene.root / "sub" / ".git" / "config").exists(), result.render()
    assert not (scene.root / "sub" / "old.txt").exists()
    assert (scene.root / "sub" / "new.txt").read_text() == "new\n"
    assert any(p.startswith("sub/.git") for p in result.refused_paths), result.render()


async def test_a_layer_nested_too_deep_is_not_applied(scene: Scene) -> None:
    """Applying recurses per level: a tree deeper than it can walk is refused, all of it."""
    runner = BubblewrapRunner(Workspace(scene.root))
    script = "echo x > top.txt; for i in $(seq 300); do mkdir d && cd d; done; echo deep > f"
    result = await runner.run([SH, "-c", script])
    assert "nested 300 levels deep" in result.render(), result.render()
    assert not (scene.root / "top.txt").exists() and not (scene.root / "d").exists()


ENTRIES = 1000


async def many_files(root: Path, limits: Limits) -> CommandResult:
    script = "mkdir many && cd many && for i in $(seq 3000); do : > f$i; done; echo made"
    return await BubblewrapRunner(Workspace(root)).run([SH, "-c", script], limits=limits)


async def test_a_command_creates_at_most_its_entries(scene: Scene) -> None:
    result = await many_files(scene.root, Limits(workspace_entries=ENTRIES))
    assert "No space left on device" in result.stderr, result.render()
    assert len(list((scene.root / "many").iterdir())) <= ENTRIES


async def test_entries_twin_without_a_bound(scene: Scene) -> None:
    result = await many_files(scene.root, Limits(workspace_entries=None))
    assert result.ok, result.render()
    assert len(list((scene.root / "many").iterdir())) == 3000


async def test_the_layers_fifos_are_never_inside_the_workspace(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With TMPDIR inside the workspace, the layer's private directory goes elsewhere.

    Inside, a command could reach the FIFOs, and overlayfs refuses an upper layer within
    its lower one (the twin).
    """
    inside = scene.root / "tmp"
    inside.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(inside))
    command = "ls -A tmp; echo ok > made"
    result = await BubblewrapRunner(Workspace(scene.root)).run([SH, "-c", command])
    assert result.ok, result.render()
    assert "legato-layer" not in result.stdout  # not visible to the command while it ran
    assert (scene.root / "made").read_text() == "ok\n"


async def test_layer_directory_twin_inside_the_workspace(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    import legato.sandbox._layer as layer_module
    from legato.exceptions import SandboxUnavailable

    inside = scene.root / "tmp"
    inside.mkdir()

    def naive(_root: Path) -> str:
        return tempfile.mkdtemp(prefix="legato-layer-", dir=inside)

    monkeypatch.setattr(layer_module, "_private_directory", naive)
    with pytest.raises(SandboxUnavailable, match="Invalid argument"):
        await BubblewrapRunner(Workspace(scene.root)).run([SH, "-c", "ls -A tmp"])


def test_a_refused_write_creates_no_directory(scene: Scene) -> None:
    """Nothing half-written: the directories a refused write would need are not made."""
    ws = Workspace(scene.root, quota_bytes=10)
    with pytest.raises(ProtectedPathRefused):
        ws.write_bytes("a/b/.git/config", b"x")
    with pytest.raises(WorkspaceQuotaExceeded):
        ws.write_bytes("c/d/big.bin", b"x" * 11)
    assert list(scene.root.iterdir()) == []
    assert ws.write_bytes("e/small.txt", b"x" * 10) == "e/small.txt"
