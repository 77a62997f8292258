"""Runs that share a workspace do not lose each other's updates through the file tools."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import legato
from legato import Agent
from legato.messages import JsonValue
from legato.models import ModelRequest
from legato.sandbox import Workspace
from legato.spawn import spawn_tools
from legato.testing import FunctionModel, ScriptedModel, call, reply
from legato.tools import RunContext, Toolset
from legato.tools.builtin import FileToolOptions, workspace_tools

FILE_TOOLS: list[JsonValue] = ["read_file", "write_file"]


def file_tools_of(root: Path, *, check_versions: bool = True) -> Toolset:
    return workspace_tools(
        Workspace(root), commands=False, options=FileToolOptions(check_versions=check_versions)
    )


def incrementer(both_read: asyncio.Barrier, errors: list[str]) -> Any:
    """A child model: read counter.txt, wait until the other child has read too, write +1;
    on an error, read again and retry."""

    async def turn(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.role != "tool":
            return reply(call("read_file", {"path": "counter.txt"}))
        result = last.tool_results[0]
        if result.name == "read_file":
            value = int(result.text.split("\t", 1)[1])
            if not errors:
                async with asyncio.timeout(5):
                    await both_read.wait()  # both children read before either writes
            return reply(call("write_file", {"path": "counter.txt", "content": str(value + 1)}))
        if result.is_error:
            errors.append(result.text)
            return reply(call("read_file", {"path": "counter.txt"}))
        return "incremented"

    return turn


async def two_children(root: Path, *, check_versions: bool) -> tuple[int, list[str]]:
    (root / "counter.txt").write_text("0")
    both_read = asyncio.Barrier(2)
    errors: list[str] = []
    spawner = spawn_tools(
        [file_tools_of(root, check_versions=check_versions)],
        model=FunctionModel(incrementer(both_read, errors)),
    )
    parent = ScriptedModel(
        [
            reply(
                call("spawn", {"task": "increment the counter", "tools": FILE_TOOLS}),
                call("spawn", {"task": "increment the counter", "tools": FILE_TOOLS}),
            ),
            "done",
        ]
    )
    await Agent(parent, tools=[spawner]).run("increment twice")
    return int((root / "counter.txt").read_text()), errors


async def test_two_children_incrementing_a_file_end_at_two(tmp_path: Path) -> None:
    count, errors = await two_children(tmp_path, check_versions=True)
    assert count == 2
    (refused,) = errors
    assert "changed since you last read it" in refused and "Read the file again" in refused


async def test_twin_without_version_checks_one_update_is_lost(tmp_path: Path) -> None:
    count, errors = await two_children(tmp_path, check_versions=False)
    assert count == 1  # both wrote 1: the second write silently replaced the first
    assert errors == []


async def test_separate_toolsets_on_one_directory_are_checked_too(tmp_path: Path) -> None:
    # two agents, each with its own workspace_tools on the same directory
    (tmp_path / "counter.txt").write_text("0")
    both_read = asyncio.Barrier(2)
    errors: list[str] = []
    agents = [
        Agent(FunctionModel(incrementer(both_read, errors)), tools=[file_tools_of(tmp_path)])
        for _ in range(2)
    ]
    await asyncio.gather(*(a.run("increment the counter") for a in agents))
    assert (tmp_path / "counter.txt").read_text() == "2"
    assert len(errors) == 1


def ctx(run_id: str) -> RunContext[None]:
    return RunContext(deps=None, run_id=run_id)


async def use(tools: Toolset, run_id: str, name: str, **arguments: Any) -> str:
    found = tools.get(name)
    assert found is not None
    return str(await found.invoke(found.validate(arguments), ctx(run_id)))


@pytest.fixture
def tools(tmp_path: Path) -> Toolset:
    (tmp_path / "notes.txt").write_text("alpha\n")
    return file_tools_of(tmp_path)


async def test_a_run_may_write_again_what_it_wrote_and_may_write_blind(
    tmp_path: Path, tools: Toolset
) -> None:
    await use(tools, "a", "read_file", path="notes.txt")
    await use(tools, "a", "write_file", path="notes.txt", content="beta\n")
    await use(tools, "a", "edit_file", path="notes.txt", old_text="beta", new_text="gamma")
    await use(tools, "a", "write_file", path="notes.txt", content="delta\n")  # its own versions
    await use(tools, "b", "write_file", path="notes.txt", content="blind\n")  # never read it
    assert (tmp_path / "notes.txt").read_text() == "blind\n"


async def test_an_edit_of_a_changed_file_is_refused(tmp_path: Path, tools: Toolset) -> None:
    await use(tools, "a", "read_file", path="notes.txt")
    (tmp_path / "notes.txt").write_text("alpha\nchanged by someone else\n")
    with pytest.raises(Exception, match="was changed since you last read it"):
        await use(tools, "a", "edit_file", path="notes.txt", old_text="alpha", new_text="x")
    assert "changed by someone else" in (tmp_path / "notes.txt").read_text()
    await use(tools, "a", "read_file", path="notes.txt")  # re-read: now it may
    await use(tools, "a", "edit_file", path="notes.txt", old_text="alpha", new_text="x")


async def test_a_file_created_after_a_run_saw_it_missing_is_not_clobbered(
    tmp_path: Path, tools: Toolset
) -> None:
    with pytest.raises(Exception, match="does not exist"):
        await use(tools, "a", "read_file", path="new.txt")
    await use(tools, "b", "write_file", path="new.txt", content="b was first\n")
    with pytest.raises(Exception, match="was created since you last read it"):
        await use(tools, "a", "write_file", path="new.txt", content="a\n")
    assert (tmp_path / "new.txt").read_text() == "b was first\n"


async def test_a_write_by_another_process_is_detected(tmp_path: Path, tools: Toolset) -> None:
    await use(tools, "a", "read_file", path="notes.txt")
    other = (
        "import asyncio\n"
        "from legato.sandbox import Workspace\n"
        "from legato.tools import RunContext\n"
        "from legato.tools.builtin import workspace_tools\n"
        f"tools = workspace_tools(Workspace({str(tmp_path)!r}), commands=False)\n"
        "write = tools.get('write_file')\n"
        "ctx = RunContext(deps=None, run_id='other-process')\n"
        "asyncio.run(write.invoke({'path': 'notes.txt', 'content': 'theirs\\n'}, ctx))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(legato.__file__).parents[1])}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", other],
        capture_output=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    with pytest.raises(Exception, match="was changed since you last read it"):
        await use(tools, "a", "write_file", path="notes.txt", content="mine\n")
    assert (tmp_path / "notes.txt").read_text() == "theirs\n"
