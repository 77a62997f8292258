"""legato's MCP client features, against in-process servers (no subprocess, no socket)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from legato import Agent, tool
from legato.exceptions import ConfigurationError, MCPTimeout
from legato.mcp import (
    ElicitationRequest,
    ElicitationResponse,
    HTTPServer,
    MCPClient,
    ProgressUpdate,
    SamplingRequest,
    StdioServer,
    accept_defaults,
    clients_from_config,
    parse_mcp_servers,
)
from legato.mcp.server import build_server, current_request
from legato.messages import TextPart
from legato.run._sync import run_sync
from legato.testing import ScriptedModel, call, reply
from legato.tools import Tool


def _request() -> Any:
    request = current_request()
    assert request is not None
    return request


@tool
async def ask_model(question: str) -> str:
    """Ask the client's model.

    Args:
        question: The question.
    """
    return await _request().sample(question, max_tokens=50)


@tool
async def ask_user() -> str:
    """Ask the user for a name."""
    schema = {"type": "object", "properties": {"name": {"type": "string", "default": "Ada"}}}
    answer = await _request().elicit("Your name?", schema)
    return f"{answer.action}:{json.dumps(dict(answer.content or {}))}"


@tool
async def roots() -> str:
    """List the client's roots."""
    import warnings

    from mcp import MCPDeprecationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        listed = await _request().context.session.list_roots()
    return ",".join(str(r.uri) for r in listed.roots)


@tool
async def count(n: int) -> str:
    """Count with progress.

    Args:
        n: How far.
    """
    for i in range(1, n + 1):
        await _request().progress(i, n, f"step {i}")
    return "counted"


@tool
async def hang() -> str:
    """Never finishes."""
    import asyncio

    await asyncio.Event().wait()
    return "never"


SERVER = build_server([ask_model, ask_user, roots, count, hang], name="features")


async def test_no_task_outlives_the_session() -> None:
    import asyncio

    before = asyncio.all_tasks()
    async with MCPClient(SERVER, name="f") as client:
        await client.call_tool("count", {"n": 1})
        assert len(asyncio.all_tasks() - before) >= 1  # the session's owner task
    assert asyncio.all_tasks() - before == set()


async def test_sampling_is_refused_without_a_handler() -> None:
    async with MCPClient(SERVER, name="f") as client:
        result = await client.call_tool("ask_model", {"question": "2+2?"})
    assert result.is_error
    assert "Sampling not supported" in str(result.content[0])


async def test_sampling_goes_to_the_application_handler() -> None:
    seen: list[SamplingRequest] = []

    async def sampler(request: SamplingRequest) -> str:
        seen.append(request)
        return "four"

    async with MCPClient(SERVER, name="f", sampling=sampler) as client:
        result = await client.call_tool("ask_model", {"question": "2+2?"})
    assert result.content == (TextPart(text="four"),)
    assert seen[0].messages[0].text == "2+2?"
    assert seen[0].max_tokens == 50
    assert seen[0].server == "f"


async def test_sampling_with_a_legato_model() -> None:
    from legato.mcp import sample_with
    from legato.testing import FunctionModel

    def answer(request: Any) -> str:
        return f"model saw {request.messages[-1].text!r}, max {request.settings.max_tokens}"

    async with MCPClient(SERVER, name="f", sampling=sample_with(FunctionModel(answer))) as c:
        result = await c.call_tool("ask_model", {"question": "2+2?"})
    assert result.content == (TextPart(text="model saw '2+2?', max 50"),)


async def test_elicitation_refused_by_default_and_routed_when_handled() -> None:
    async with MCPClient(SERVER, name="f") as client:
        refused = await client.call_tool("ask_user", {})
    assert refused.is_error

    async def decline(request: ElicitationRequest) -> ElicitationResponse:
        assert request.message == "Your name?"
        return ElicitationResponse(action="decline")

    async with MCPClient(SERVER, name="f", elicitation=decline) as client:
        declined = await client.call_tool("ask_user", {})
    assert declined.content == (TextPart(text="decline:{}"),)
    async with MCPClient(SERVER, name="f", elicitation=accept_defaults) as client:
        accepted = await client.call_tool("ask_user", {})
    assert accepted.content == (TextPart(text='accept:{"name": "Ada"}'),)


async def test_roots_come_from_the_workspace(tmp_path: Path) -> None:
    async with MCPClient(SERVER, name="f", roots=[tmp_path]) as client:
        result = await client.call_tool("roots", {})
    assert result.content == (TextPart(text=tmp_path.as_uri()),)


async def test_progress_reaches_the_callback_with_the_call_id() -> None:
    updates: list[ProgressUpdate] = []
    client = MCPClient(SERVER, name="f", on_progress=updates.append)
    model = ScriptedModel([reply(call("count", {"n": 3}, id="call-1")), "done"])
    async with client:
        await Agent(model, tools=[client]).run("count")
    assert [(u.progress, u.total, u.message) for u in updates] == [
        (1, 3, "step 1"),
        (2, 3, "step 2"),
        (3, 3, "step 3"),
    ]
    assert {u.tool_call_id for u in updates} == {"call-1"}


async def test_a_request_timeout_is_typed() -> None:
    async with MCPClient(SERVER, name="f", timeout=0.3) as client:
        with pytest.raises(MCPTimeout, match="hang"):
            await client.call_tool("hang", {})


async def test_tool_list_changed_refreshes_the_tools() -> None:
    offered: list[Tool] = [ask_model]

    class Changing:
        name = "changing"

        async def list_tools(self) -> list[Tool]:
            return list(offered)

    @tool
    async def grow() -> str:
        """Offer one more tool."""
        offered.append(count)
        await _request().context.session.send_tool_list_changed()
        return "grown"

    offered.append(grow)
    async with MCPClient(build_server([Changing()]), name="f") as client:
        assert {t.name for t in await client.list_tools()} == {"ask_model", "grow"}
        await client.call_tool("grow", {})
        await client.ping()
        assert {t.name for t in await client.list_tools()} == {"ask_model", "grow", "count"}


async def test_filtering_and_prefix() -> None:
    only = MCPClient(SERVER, name="f", include=["count", "hang"], exclude=["hang"], prefix="x")
    async with only:
        assert [t.name for t in await only.list_tools()] == ["x_count"]
    predicate = MCPClient(SERVER, name="f", include=lambda n: n.startswith("ask"))
    async with predicate:
        assert {t.name for t in await predicate.list_tools()} == {"ask_model", "ask_user"}


def test_run_sync_twice_reuses_or_reopens_cleanly(no_leaked_children: None) -> None:
    client = MCPClient(SERVER, name="f")
    model = ScriptedModel(
        [reply(call("count", {"n": 1})), "one", reply(call("count", {"n": 1})), "two"]
    )
    agent = Agent(model, tools=[client])
    assert agent.run_sync("a").output == "one"
    assert agent.run_sync("b").output == "two"
    # sync runs share one background event loop, so the session is reused across runs
    assert client.connections == 1
    run_sync(client.close())  # the server process ends with its session


# -- configuration --------------------------------------------------------------------------


def test_mcp_servers_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN", "s3cret")
    config = {
        "mcpServers": {
            "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
            "remote": {
                "url": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": "Bearer ${TOKEN}"},
            },
            "legacy": {"url": "http://127.0.0.1:9/sse", "type": "sse"},
            "off": {"command": "x", "disabled": True},
        }
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config))
    specs = parse_mcp_servers(path)
    assert specs == {
        "time": StdioServer(command="mcp-server-time", args=("--local-timezone", "UTC")),
        "remote": HTTPServer(
            url="http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer s3cret"}
        ),
        "legacy": HTTPServer(url="http://127.0.0.1:9/sse", transport="sse"),
    }
    clients = clients_from_config(json.dumps(config), prefix_names=True, timeout=5)
    assert [c.name for c in clients] == ["time", "remote", "legacy"]
    assert clients[0].timeout == 5


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ("not json", "not valid JSON"),
        ({"servers": {}}, "'mcpServers' object"),
        ({"mcpServers": {"a": {}}}, "needs either 'command'"),
        ({"mcpServers": {"a": {"command": "x", "args": "y"}}}, "args must be a list"),
        ({"mcpServers": {"a": {"url": "http://x", "type": "ws"}}}, "type must be one of"),
    ],
)
def test_bad_configuration_is_a_configuration_error(config: Any, error: str) -> None:
    with pytest.raises(ConfigurationError, match=error):
        parse_mcp_servers(config)


async def test_a_catalog_over_mcp_servers() -> None:
    from legato.tools import ToolCatalog

    client = MCPClient(SERVER, name="f")
    catalog = ToolCatalog(client, threshold=2)
    model = ScriptedModel(
        [
            reply(call("search_tools", {"query": "count with progress"})),
            reply(call("count", {"n": 2})),
            "counted twice",
        ]
    )
    async with client:
        result = await Agent(model, tools=[catalog]).run("count to two")
    assert result.output == "counted twice"
    assert [t.name for t in model.requests[0].tools] == ["search_tools"]
    assert "count" in {t.name for t in model.requests[1].tools}
    results = [p for m in result.messages for p in m.tool_results]
    assert results[1].content == (TextPart(text="counted"),)
