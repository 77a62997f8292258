"""ToolCatalog: a compact index and `search_tools` instead of hundreds of schemas."""

from __future__ import annotations

from typing import Any

import pytest

from legato import Agent
from legato.exceptions import ToolError
from legato.testing import ScriptedModel, call, reply
from legato.tools import Tool, ToolCatalog, Toolset
from legato.tools._catalog import tokenize


async def _echo(**arguments: Any) -> str:
    return f"called with {arguments}"


def _tools(n: int) -> list[Tool]:
    kinds = ["invoice", "ticket", "file", "contact", "event"]
    verbs = ["create", "delete", "list", "get"]
    out: list[Tool] = []
    for i in range(n):
        kind, verb = kinds[i % len(kinds)], verbs[(i // len(kinds)) % len(verbs)]
        out.append(
            Tool.from_schema(
                name=f"svc{i // 20}_{verb}_{kind}",
                description=f"{verb.capitalize()} a {kind} in service {i // 20}.",
                parameters={"type": "object", "properties": {"id": {"type": "string"}}},
                function=_echo,
            )
        )
    return out


def test_tokenize_splits_names_and_folds_synonyms() -> None:
    assert tokenize("removeFile from the drive_folders") == ["delete", "file", "drive", "folder"]
    assert tokenize("Make a new invoice") == ["create", "create", "invoice"]


async def test_small_sets_pass_through() -> None:
    tools = _tools(10)
    catalog = ToolCatalog(Toolset(tools), threshold=10)
    assert [t.name for t in await catalog.list_tools()] == [t.name for t in tools]


async def test_large_sets_send_only_the_meta_tool_then_what_was_loaded() -> None:
    catalog = ToolCatalog(*_tools(100), threshold=10)
    listed = await catalog.list_tools()
    assert [t.name for t in listed] == ["search_tools"]
    assert "svc0_create_invoice" in listed[0].description  # the compact index
    text = await listed[0].function(query="remove a ticket in service 3")
    assert "svc3_delete_ticket" in text
    names = [t.name for t in await catalog.list_tools()]
    assert names[0] == "search_tools"
    assert "svc3_delete_ticket" in names
    assert len(names) <= 1 + catalog.max_results


async def test_load_by_name_and_unknown_names() -> None:
    catalog = ToolCatalog(*_tools(100), threshold=10, index="none")
    meta = (await catalog.list_tools())[0]
    assert "svc0_create_invoice" not in meta.description
    text = await meta.function(names=["svc1_list_file", "nope"])
    assert "svc1_list_file" in text
    assert "Unknown names: ['nope']" in text
    with pytest.raises(ToolError, match="no tools match"):
        await meta.function(query="zzzz qqqq")


async def test_loaded_set_is_bounded() -> None:
    catalog = ToolCatalog(*_tools(100), threshold=10, max_loaded=3)
    await catalog.list_tools()
    catalog.load(["svc0_create_invoice", "svc0_create_ticket", "svc0_create_file"])
    catalog.load(["svc0_create_contact"])
    assert catalog.loaded == ["svc0_create_ticket", "svc0_create_file", "svc0_create_contact"]
    catalog.reset()
    assert catalog.loaded == []


async def test_an_agent_searches_then_calls_the_loaded_tool() -> None:
    catalog = ToolCatalog(*_tools(100), threshold=10)
    model = ScriptedModel(
        [
            reply(call("search_tools", {"query": "delete ticket service 2"})),
            reply(call("svc2_delete_ticket", {"id": "T-1"})),
            "Deleted.",
        ]
    )
    result = await Agent(model, tools=[catalog]).run("delete ticket T-1 in service 2")
    assert result.output == "Deleted."
    first, second, _ = model.requests
    assert [t.name for t in first.tools] == ["search_tools"]
    assert "svc2_delete_ticket" in {t.name for t in second.tools}
    results = [p for m in result.messages for p in m.tool_results]
    assert not results[1].is_error


async def test_without_the_catalog_every_schema_is_sent() -> None:
    """The cost the catalog removes: every definition in every request."""
    model = ScriptedModel(["ok"])
    await Agent(model, tools=[Toolset(_tools(100))]).run("hi")
    assert len(model.requests[0].tools) == 100
