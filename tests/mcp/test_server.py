"""legato's MCP server: toolsets and agents served over MCP, checked with legato's client."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from legato import Agent, RunContext, tool
from legato.events import ToolCallFinished, ToolProgress
from legato.exceptions import ConfigurationError, MCPRequestFailed
from legato.mcp import MCPClient, ProgressUpdate, PromptArgumentInfo, StdioServer
from legato.mcp.server import (
    Prompt,
    Resource,
    ResourceTemplate,
    _RequestScope,
    agent_tool,
    as_server,
    build_server,
)
from legato.messages import DocumentPart, ImagePart, Message, TextPart
from legato.testing import FunctionModel, ScriptedModel, call, reply
from legato.tools import Toolset

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LEGATO = Path(sys.executable).parent / "legato"

calls: list[dict[str, int]] = []


@tool(side_effects="none")
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    calls.append({"a": a, "b": b})
    return a + b


async def test_tools_round_trip_through_the_validation_path() -> None:
    calls.clear()
    async with MCPClient(build_server([add], name="math"), name="math") as client:
        (listed,) = await client.list_tools()
        assert listed.parameters == add.parameters  # the schema as legato made it
        assert listed.side_effects == "none"  # via readOnlyHint
        ok = await client.call_tool("add", {"a": 2, "b": 3})
        assert ok.content == (TextPart(text="5"),)
        bad = await client.call_tool("add", {"a": 2})
        assert bad.is_error
        assert "b: missing required argument" in str(bad.content[0])
        unknown = await client.call_tool("nope", {})
        assert unknown.is_error
    assert calls == [{"a": 2, "b": 3}]  # the invalid call never reached the function


async def test_agent_as_a_tool() -> None:
    inner = Agent(FunctionModel(lambda r: f"echo: {r.messages[-1].text}"), name="inner")
    served = agent_tool(inner, description="Ask the inner agent.")
    assert served.side_effects == "irreversible"
    async with MCPClient(build_server([inner]), name="agents") as client:
        (listed,) = await client.list_tools()
        assert listed.name == "inner"
        result = await client.call_tool("inner", {"prompt": "hello"})
    assert result.content == (TextPart(text="echo: hello"),)


@tool(side_effects="none")
async def crawl(ctx: RunContext[None], pages: int) -> str:
    """Crawl some pages, reporting progress.

    Args:
        pages: How many pages.
    """
    for page in range(1, pages + 1):
        ctx.report_progress(page, pages, f"page {page}")
        await asyncio.sleep(0)
    return f"crawled {pages}"


@tool(side_effects="none")
def grind(ctx: RunContext[None], steps: int) -> str:
    """A blocking tool (runs in a worker thread) that reports progress.

    Args:
        steps: How many steps.
    """
    for step in range(1, steps + 1):
        ctx.report_progress(step, steps)
    return f"ground {steps}"


def _drop_progress(self: _RequestScope, event: ToolProgress) -> None:
    del self, event


@pytest.mark.parametrize("forwarded", [True, False])
async def test_a_served_tools_progress_reaches_the_client(
    forwarded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not forwarded:  # the twin: the server keeps a tool's progress to itself
        monkeypatch.setattr(_RequestScope, "progress", _drop_progress)
    updates: list[ProgressUpdate] = []
    client = MCPClient(build_server([crawl, grind]), name="work", on_progress=updates.append)
    model = ScriptedModel(
        [reply(call("crawl", {"pages": 3}, id="c"), call("grind", {"steps": 2}, id="g")), "done"]
    )
    async with client:
        events = [e async for e in Agent(model, tools=[client]).stream("go")]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert sorted(f.result.text for f in finished) == ["crawled 3", "ground 2"]
    seen = sorted((u.tool, u.progress, u.total, u.message) for u in updates)
    streamed = [e for e in events if isinstance(e, ToolProgress)]
    if forwarded:
        # every update, in order per call, before the call's result
        assert seen == [
            ("crawl", 1.0, 3.0, "page 1"),
            ("crawl", 2.0, 3.0, "page 2"),
            ("crawl", 3.0, 3.0, "page 3"),
            ("grind", 1.0, 2.0, None),
            ("grind", 2.0, 2.0, None),
        ]
        assert [u.progress for u in updates if u.tool == "crawl"] == [1.0, 2.0, 3.0]
        # and the run streams them (coalesced; the last of each call always arrives)
        assert {(p.tool, p.progress) for p in streamed} >= {("crawl", 3.0), ("grind", 2.0)}
    else:
        assert seen == []
        assert streamed == []


def _user(id: str) -> str:
    return f"user {id}"


def _greet(who: str) -> list[Message]:
    return [Message.user(f"Hello {who}"), Message.assistant("Hi!")]


async def test_resources_templates_and_prompts() -> None:
    server = build_server(
        [],
        resources=[
            Resource(uri="mem://note", name="note", read=lambda: "a note"),
            Resource(
                uri="mem://png",
                name="png",
                mime_type="image/png",
                read=lambda: b"\x89PNG\r\n\x1a\nxx",
            ),
        ],
        resource_templates=[
            ResourceTemplate(uri_template="mem://users/{id}", name="user", read=_user)
        ],
        prompts=[
            Prompt(
                name="greet",
                description="Greets.",
                arguments=(PromptArgumentInfo(name="who", required=True),),
                render=_greet,
            )
        ],
    )
    async with MCPClient(server, name="data") as client:
        assert [r.uri for r in await client.list_resources()] == ["mem://note", "mem://png"]
        assert await client.read_resource("mem://note") == (TextPart(text="a note"),)
        (image,) = await client.read_resource("mem://png")
        assert isinstance(image, ImagePart)
        assert await client.read_resource("mem://users/7") == (TextPart(text="user 7"),)
        with pytest.raises(MCPRequestFailed, match="unknown resource"):
            await client.read_resource("mem://missing")
        (template,) = await client.list_resource_templates()
        assert template.uri_template == "mem://users/{id}"
        (prompt,) = await client.list_prompts()
        assert prompt.arguments[0].required
        messages = await client.get_prompt("greet", {"who": "Ada"})
        assert [(m.role, m.text) for m in messages] == [("user", "Hello Ada"), ("assistant", "Hi!")]
        with pytest.raises(MCPRequestFailed, match="missing prompt arguments"):
            await client.get_prompt("greet")


async def test_documents_become_embedded_resources() -> None:
    @tool
    def report() -> list[object]:
        """A report."""
        return [
            TextPart(text="see attached"),
            DocumentPart(data=b"{}", media_type="application/json", title="mem://report"),
            DocumentPart(data=b"%PDF-1.4", media_type="application/pdf"),
        ]

    async with MCPClient(build_server([report]), name="docs") as client:
        result = await client.call_tool("report", {})
    text, json_doc, pdf = result.content
    assert text == TextPart(text="see attached")
    assert json_doc == TextPart(text="{}")  # embedded text resource
    assert isinstance(pdf, DocumentPart)
    assert pdf.data == b"%PDF-1.4"


def test_as_server_accepts_what_the_cli_loads() -> None:
    assert as_server(add).name == "add"
    assert as_server([add]).name == "legato"
    assert as_server(Toolset([add], name="math")).name == "math"
    with pytest.raises(ConfigurationError, match="cannot serve"):
        as_server(42)


@pytest.mark.usefixtures("no_leaked_children")
async def test_cli_serves_over_stdio() -> None:
    server = StdioServer(
        command=str(LEGATO),
        args=("mcp", "serve", "tests.mcp.servers.stdio_tools:toolset", "--allow", "shout"),
        cwd=str(ROOT),
        env={"PYTHONPATH": str(ROOT)},
    )
    async with MCPClient(server, name="cli") as client:
        names = {t.name: t for t in await client.list_tools()}
        assert set(names) == {"add", "shout"}
        assert names["shout"].side_effects == "irreversible"
        result = await client.call_tool("shout", {"text": "hey"})
        assert result.content == (TextPart(text="HEY"),)


@pytest.mark.usefixtures("no_leaked_children")
async def test_cli_serves_an_agent_over_http(free_port: int, http_process: object) -> None:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager
    from typing import cast

    from legato.mcp import HTTPServer

    start = cast(Callable[..., AbstractAsyncContextManager[object]], http_process)
    argv = [
        str(LEGATO),
        "mcp",
        "serve",
        "tests.mcp.servers.stdio_tools:helper",
        "--allow",  # a served agent is side-effecting by default, so it is asked about
        "helper",
        "--http",
        "--port",
        str(free_port),
    ]
    async with start(*argv, port=free_port, env={"PYTHONPATH": str(ROOT)}):
        url = f"http://127.0.0.1:{free_port}/mcp"
        async with MCPClient(HTTPServer(url=url), name="helper") as client:
            result = await client.call_tool("helper", {"prompt": "ping"})
    assert result.content == (TextPart(text="helper saw: ping"),)


def test_cli_reports_a_bad_target(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run(
        [str(LEGATO), "mcp", "serve", "no_such_module:thing"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "cannot import 'no_such_module'" in done.stderr


async def test_served_sinks_type_the_clients_checks_but_never_remove_one() -> None:
    from legato.injection._defence import _sinks_of  # the defence's view of a tool's sinks

    @tool(side_effects="irreversible", sinks={"to": "recipient"})
    def notify(to: str, note: str, count: int) -> str:
        """Notify someone.

        Args:
            to: Who.
            note: What.
            count: How often.
        """
        return "ok"

    async with MCPClient(build_server([notify, add], name="n"), name="n") as client:
        tools = {t.name: t for t in await client.list_tools()}
    assert tools["notify"].metadata["mcp_sinks"] == {"to": "recipient"}
    assert _sinks_of(tools["notify"]) == {"to": "recipient", "note": "text"}
    assert "mcp_sinks" not in tools["add"].metadata
