"""MCP tools: arguments validated against the server's schema; `ctx` is an ordinary argument."""

from __future__ import annotations

from typing import Any

import pytest

from legato import RunContext, tool
from legato.exceptions import ToolArgumentsInvalid
from legato.mcp import MCPClient
from legato.mcp.server import build_server


@tool
def echo_ctx(ctx: str, times: int = 1) -> str:
    """Repeat a string (its parameter happens to be called ctx).

    Args:
        ctx: The text to repeat.
        times: How often.
    """
    return ctx * times


SERVER = build_server([echo_ctx], name="ctxserver")


def _run_context() -> RunContext[Any]:
    return RunContext(deps=None, run_id="r")


async def test_an_mcp_argument_named_ctx_reaches_the_server() -> None:
    async with MCPClient(SERVER, name="s") as client:
        (remote,) = await client.list_tools()
        result = await remote.invoke(remote.validate({"ctx": "ab", "times": 2}), _run_context())
    assert "abab" in str(result)


async def test_mcp_arguments_are_checked_against_the_whole_schema() -> None:
    async with MCPClient(SERVER, name="s") as client:
        (remote,) = await client.list_tools()
        with pytest.raises(ToolArgumentsInvalid) as info:
            remote.validate({"ctx": "ab", "times": "twice"})
    assert info.value.problems == ["times: expected an integer, got 'twice'"]
