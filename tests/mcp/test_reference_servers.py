"""legato's MCP client against the reference servers: mcp-server-time and mcp-server-git
(PyPI, stdio) and @modelcontextprotocol/server-everything (npm; stdio and Streamable HTTP)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from legato import Agent
from legato.exceptions import MCPConnectionError
from legato.mcp import HTTPServer, MCPClient, ProgressUpdate, StdioServer
from legato.messages import DocumentPart, ImagePart, TextPart
from legato.testing import ScriptedModel, call, reply

BIN = Path(sys.executable).parent
HERE = Path(__file__).resolve().parent
EVERYTHING_JS = (
    HERE.parents[1] / ".mcp-node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)

pytestmark = pytest.mark.usefixtures("no_leaked_children")


def _text(parts: tuple[Any, ...]) -> str:
    return "".join(p.text for p in parts if isinstance(p, TextPart))


# -- mcp-server-time, mcp-server-git ------------------------------------------------------------


async def test_time_server_tools() -> None:
    async with MCPClient(StdioServer(command=str(BIN / "mcp-server-time")), name="time") as time:
        tools = {t.name: t for t in await time.list_tools()}
        assert {"get_current_time", "convert_time"} <= set(tools)
        assert tools["get_current_time"].side_effects == "none"  # readOnlyHint
        result = await time.call_tool("get_current_time", {"timezone": "Asia/Tokyo"})
        assert isinstance(result.structured, dict)
        assert result.structured["timezone"] == "Asia/Tokyo"
        bad = await time.call_tool("get_current_time", {"timezone": "Nowhere/Nothing"})
        assert bad.is_error
        assert "Invalid timezone" in _text(bad.content)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit and an unstaged change."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("hello\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first commit"], check=True)
    (repo / "a.txt").write_text("hello\nworld\n")
    return repo


async def test_git_server_on_a_temporary_repository(repo: Path) -> None:
    server = StdioServer(command=str(BIN / "mcp-server-git"), args=("--repository", str(repo)))
    async with MCPClient(server, name="git", prefix="git") as client:
        names = {t.name for t in await client.list_tools()}
        assert {"git_git_status", "git_git_diff_unstaged", "git_git_log"} <= names
        status = await client.call_tool("git_status", {"repo_path": str(repo)})
        assert "a.txt" in _text(status.content)
        diff = await client.call_tool("git_diff_unstaged", {"repo_path": str(repo)})
        assert "+world" in _text(diff.content)
        log = await client.call_tool("git_log", {"repo_path": str(repo)})
        assert "first commit" in _text(log.content)


# -- server-everything ---------------------------------------------------------------------------


async def _exercise_everything(client: MCPClient) -> None:
    tools = {t.metadata["mcp_name"]: t for t in await client.list_tools()}
    assert {"echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"} <= set(tools)
    # schemas pass through unchanged ($schema included)
    assert "$schema" in tools["echo"].parameters
    assert _text((await client.call_tool("echo", {"message": "hi"})).content) == "Echo: hi"
    assert "3" in _text((await client.call_tool("get-sum", {"a": 1, "b": 2})).content)
    image = await client.call_tool("get-tiny-image", {})
    assert any(isinstance(p, ImagePart) and p.data for p in image.content)
    resources = await client.list_resources()
    assert resources
    text = await client.read_resource(resources[0].uri)
    assert text and isinstance(text[0], TextPart | DocumentPart)
    templates = await client.list_resource_templates()
    assert any("{resourceId}" in t.uri_template for t in templates)
    blob = await client.read_resource("demo://resource/dynamic/blob/1")
    assert isinstance(blob[0], DocumentPart)
    assert blob[0].data
    prompts = {p.name: p for p in await client.list_prompts()}
    assert "args-prompt" in prompts
    assert any(a.required for a in prompts["args-prompt"].arguments)
    messages = await client.get_prompt("args-prompt", {"city": "Paris"})
    assert "Paris" in messages[0].text


async def test_everything_over_stdio(everything_stdio: StdioServer) -> None:
    async with MCPClient(everything_stdio, name="everything") as client:
        await _exercise_everything(client)


async def test_everything_over_streamable_http(
    node: Path,
    free_port: int,
    http_process: Callable[..., AbstractAsyncContextManager[object]],
) -> None:
    loopback = HERE / "servers" / "loopback.cjs"
    argv = [str(node), "--require", str(loopback), str(EVERYTHING_JS), "streamableHttp"]
    async with http_process(*argv, port=free_port, env={"PORT": str(free_port)}):
        url = f"http://127.0.0.1:{free_port}/mcp"
        async with MCPClient(HTTPServer(url=url), name="everything-http") as client:
            await _exercise_everything(client)


async def test_everything_over_legacy_sse(
    node: Path,
    free_port: int,
    http_process: Callable[..., AbstractAsyncContextManager[object]],
) -> None:
    loopback = HERE / "servers" / "loopback.cjs"
    argv = [str(node), "--require", str(loopback), str(EVERYTHING_JS), "sse"]
    async with http_process(*argv, port=free_port, env={"PORT": str(free_port)}):
        url = f"http://127.0.0.1:{free_port}/sse"
        spec = HTTPServer(url=url, transport="sse")
        async with MCPClient(spec, name="everything-sse") as client:
            assert (
                _text((await client.call_tool("echo", {"message": "sse"})).content) == "Echo: sse"
            )
            assert await client.list_prompts()


async def test_everything_early_list_changed_is_handled(everything_stdio: StdioServer) -> None:
    """server-everything announces tools/list_changed before its initialize answer."""
    async with MCPClient(everything_stdio, name="everything") as client:
        first = await client.list_tools()
        assert len(first) >= 10
        await client.ping()
        assert client.tool_list_changes >= 1
        # the announcement marked the list stale; listing again fetches and agrees
        assert {t.name for t in await client.list_tools()} == {t.name for t in first}


async def test_everything_long_running_call_is_cancelled(everything_stdio: StdioServer) -> None:
    updates: list[ProgressUpdate] = []
    progressed = asyncio.Event()

    def on_progress(update: ProgressUpdate) -> None:
        updates.append(update)
        progressed.set()

    async with MCPClient(everything_stdio, name="everything", on_progress=on_progress) as client:
        task = asyncio.create_task(
            client.call_tool("trigger-long-running-operation", {"duration": 60, "steps": 60})
        )
        await progressed.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert updates[0].tool == "trigger-long-running-operation"
        assert updates[0].total == 60
        # the session is intact after the cancel
        assert _text((await client.call_tool("echo", {"message": "still here"})).content)


async def test_everything_killed_mid_call_then_reconnects(
    everything_stdio: StdioServer, children: Callable[[], set[int]]
) -> None:
    progressed = asyncio.Event()
    before = children()
    async with MCPClient(
        everything_stdio, name="everything", on_progress=lambda _: progressed.set()
    ) as client:
        (pid,) = children() - before
        task = asyncio.create_task(
            client.call_tool("trigger-long-running-operation", {"duration": 60, "steps": 60})
        )
        await progressed.wait()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(MCPConnectionError, match="connection closed"):
            await task
        assert (
            _text((await client.call_tool("echo", {"message": "again"})).content) == "Echo: again"
        )
        assert client.connections == 2


async def test_agent_with_everything_tools(everything_stdio: StdioServer) -> None:
    """A scripted model drives an agent whose tools come from server-everything."""
    client = MCPClient(everything_stdio, name="everything", prefix="ev")
    model = ScriptedModel(
        [
            reply(call("ev_get-sum", {"a": 20, "b": 22}), call("ev_echo", {"message": "hello"})),
            reply(call("ev_echo", {})),  # bad arguments: the server's error goes to the model
            "The sum is 42.",
            "Still 42.",
        ]
    )
    async with client:
        agent = Agent(model, tools=[client])
        result = await agent.run("Add 20 and 22, then echo hello.")
        second = await agent.run("again?", message_history=result.messages)  # same session
    assert result.output == "The sum is 42."
    results = [p for m in result.messages for p in m.tool_results]
    assert "42" in _text(results[0].content)
    assert _text(results[1].content) == "Echo: hello"
    assert results[2].is_error
    assert client.connections == 1
    assert second.output == "Still 42."
    request = model.requests[0]
    assert "ev_get-sum" in {t.name for t in request.tools}


async def test_everything_http_killed_mid_call_then_reconnects(
    node: Path,
    free_port: int,
    http_process: Callable[..., AbstractAsyncContextManager[asyncio.subprocess.Process]],
) -> None:
    loopback = HERE / "servers" / "loopback.cjs"
    argv = [str(node), "--require", str(loopback), str(EVERYTHING_JS), "streamableHttp"]
    env = {"PORT": str(free_port)}
    progressed = asyncio.Event()
    client = MCPClient(
        HTTPServer(url=f"http://127.0.0.1:{free_port}/mcp"),
        name="everything-http",
        on_progress=lambda _: progressed.set(),
    )
    async with http_process(*argv, port=free_port, env=env) as server:
        await client.connect()
        task = asyncio.create_task(
            client.call_tool("trigger-long-running-operation", {"duration": 60, "steps": 60})
        )
        await progressed.wait()
        server.kill()
        with pytest.raises(MCPConnectionError, match="connection closed"):
            await task
    async with http_process(*argv, port=free_port, env=env), client:
        result = await client.call_tool("echo", {"message": "again"})
        assert _text(result.content) == "Echo: again"
        assert client.connections == 2
