"""legato's MCP client against servers that misbehave: typed errors in time, no leaks."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from legato import Agent
from legato.exceptions import (
    MCPConnectionError,
    MCPProtocolError,
    MCPRequestFailed,
    MCPTimeout,
    ToolError,
)
from legato.mcp import MCPClient, StdioServer
from legato.messages import TextPart
from legato.run._sync import run_sync
from legato.testing import ScriptedModel, call, reply

Server = Callable[..., StdioServer]

pytestmark = pytest.mark.usefixtures("no_leaked_children")


async def test_a_server_that_cannot_start_is_a_connection_error() -> None:
    client = MCPClient(StdioServer(command="/nonexistent/mcp-server"), name="ghost")
    with pytest.raises(MCPConnectionError, match="ghost.*cannot start"):
        await client.connect()
    assert not client.connected


async def test_a_server_that_exits_at_start_reports_its_stderr(python_server: Server) -> None:
    client = MCPClient(python_server("scripted", "crash"), name="crashy", connect_timeout=20)
    with pytest.raises(MCPConnectionError) as info:
        await client.connect()
    assert "cannot open the database" in str(info.value)


async def test_garbage_is_a_protocol_error_within_the_timeout(python_server: Server) -> None:
    client = MCPClient(python_server("scripted", "garbage"), name="noisy", connect_timeout=3)
    with pytest.raises(MCPProtocolError, match="invalid messages"):
        await client.connect()


async def test_no_answer_to_initialize_is_a_timeout(python_server: Server) -> None:
    client = MCPClient(python_server("scripted", "silent"), name="mute", connect_timeout=2)
    with pytest.raises(MCPTimeout, match="no answer to initialize within 2s"):
        await client.connect()


async def test_a_malformed_tool_schema_is_a_protocol_error(python_server: Server) -> None:
    async with MCPClient(python_server("scripted", "badschema"), name="bad") as client:
        with pytest.raises(MCPProtocolError, match=r"(?s)tools/list: invalid result.*inputSchema"):
            await client.list_tools()
        # the SDK checks results against the listing, so calls fail the same typed way
        with pytest.raises(MCPProtocolError):
            await client.call_tool("echo", {"text": "ok"})
        await client.ping()  # and the session itself is fine


async def test_an_agent_run_ends_cleanly_on_a_malformed_listing(python_server: Server) -> None:
    client = MCPClient(python_server("scripted", "badschema"), name="bad")
    async with client:
        with pytest.raises(MCPProtocolError):
            await Agent(ScriptedModel(["unused"]), tools=[client]).run("go")


async def test_a_server_dying_mid_call_is_a_clear_error_then_reconnects(
    python_server: Server,
) -> None:
    async with MCPClient(python_server("scripted", "ok"), name="fragile") as client:
        with pytest.raises(
            MCPConnectionError, match="connection closed during tools/call 'die'"
        ) as info:
            await client.call_tool("die", {})
        assert str(info.value).count("MCP server 'fragile'") == 1
        assert "out of memory" in str(info.value)  # the end of the server's stderr
        assert not client.connected
        result = await client.call_tool("echo", {"text": "back again"})
        assert result.content == (TextPart(text="back again"),)
        assert client.connections == 2


async def test_a_timed_out_call_is_cancelled_on_the_server(
    python_server: Server, tmp_path: Path
) -> None:
    log = tmp_path / "cancelled.txt"
    async with MCPClient(python_server("scripted", "ok", str(log)), name="slowpoke") as client:
        with pytest.raises(MCPTimeout, match="slow"):
            await client.call_tool("slow", {}, request_timeout=0.5)
        await client.ping()  # the server processed everything sent before the ping
        assert log.read_text().split()  # the server received notifications/cancelled


async def test_cancelling_the_caller_cancels_the_call_on_the_server(
    python_server: Server, tmp_path: Path
) -> None:
    log = tmp_path / "cancelled.txt"
    started = asyncio.Event()
    client = MCPClient(
        python_server("scripted", "ok", str(log)),
        name="slowpoke",
        on_progress=lambda _: started.set(),
    )
    async with client:
        task = asyncio.create_task(client.call_tool("slow", {}))
        await started.wait()  # the server is running the call
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await client.ping()
        assert len(log.read_text().split()) == 1
        # the session survives a cancelled call
        assert (await client.call_tool("echo", {"text": "x"})).is_error is False


async def test_without_cancel_propagation_the_server_would_not_know(
    python_server: Server, tmp_path: Path
) -> None:
    """The failure the propagation prevents: abandoning a call without telling the server."""
    log = tmp_path / "cancelled.txt"
    async with MCPClient(python_server("scripted", "ok", str(log)), name="slowpoke") as client:
        session = client._conn.client.session  # pyright: ignore[reportOptionalMemberAccess]
        from mcp import types

        request = types.CallToolRequest(params=types.CallToolRequestParams(name="slow"))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await asyncio.shield(session.send_request(request, types.CallToolResult))
        await client.ping()
        assert not log.exists()


async def test_phantom_tool_after_list_changed(python_server: Server) -> None:
    async with MCPClient(python_server("scripted", "ok"), name="shifty") as client:
        tools = {t.name: t for t in await client.list_tools()}
        echo = tools["echo"]
        assert (await client.call_tool("change", {})).content
        await client.ping()  # the list_changed notification has arrived
        with pytest.raises(ToolError, match="no longer offered.*removed after it was listed"):
            await echo.function(_ctx(), text="hi")
        assert "echo" not in {t.name for t in await client.list_tools()}


async def test_a_notification_before_the_initialize_answer_is_accepted(
    python_server: Server,
) -> None:
    async with MCPClient(python_server("scripted", "earlynotify"), name="eager") as client:
        await client.ping()  # everything the server sent before has been handled
        assert client.tool_list_changes == 1
        assert "echo" in {t.name for t in await client.list_tools()}


async def test_unknown_tool_is_a_request_failure(python_server: Server) -> None:
    async with MCPClient(python_server("scripted", "ok"), name="s") as client:
        with pytest.raises(MCPRequestFailed, match="Unknown tool: nope") as info:
            await client.call_tool("nope", {})
        assert info.value.code == -32602


async def test_names_providers_reject_are_renamed_reversibly(python_server: Server) -> None:
    async with MCPClient(python_server("scripted", "ok"), name="s", prefix="srv") as client:
        tools = {t.name: t for t in await client.list_tools()}
        renamed = [t for t in tools.values() if t.metadata["mcp_name"] == "dotted.name/with spaces"]
        assert len(renamed) == 1
        assert renamed[0].name.startswith("srv_dotted_name_with_spaces_")
        assert "srv_echo" in tools
        assert await renamed[0].function(_ctx()) == [TextPart(text="renamed ok")]


async def test_an_agent_run_continues_when_the_server_dies(python_server: Server) -> None:
    client = MCPClient(python_server("scripted", "ok"), name="fragile")
    model = ScriptedModel([reply(call("die", {})), reply(call("echo", {"text": "hi"})), "done"])
    async with client:
        result = await Agent(model, tools=[client]).run("go")
    assert result.output == "done"
    results = [p for m in result.messages for p in m.tool_results]
    assert results[0].is_error
    assert "connection closed" in str(results[0].content[0])
    assert not results[1].is_error


async def test_killing_the_server_process_mid_call(
    python_server: Server, children: Callable[[], set[int]]
) -> None:
    before = children()
    started = asyncio.Event()
    client = MCPClient(
        python_server("scripted", "ok"), name="victim", on_progress=lambda _: started.set()
    )
    async with client:
        (pid,) = children() - before
        task = asyncio.create_task(client.call_tool("slow", {}))
        await started.wait()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(MCPConnectionError):
            await task
        assert (await client.call_tool("echo", {"text": "again"})).is_error is False


def _ctx() -> object:
    from legato.tools import RunContext

    return RunContext(deps=None, run_id="test")


def test_run_sync_twice_with_a_stdio_server(python_server: Server) -> None:
    """Sync runs share the facade's background loop: the session (and its server process)
    is reused by the second run, and ends when the client is closed."""
    client = MCPClient(python_server("scripted", "ok"), name="sync")
    model = ScriptedModel(
        [reply(call("echo", {"text": "1"})), "one", reply(call("echo", {"text": "2"})), "two"]
    )
    agent = Agent(model, tools=[client])
    assert agent.run_sync("a").output == "one"
    assert agent.run_sync("b").output == "two"
    assert client.connections == 1
    run_sync(client.close())
