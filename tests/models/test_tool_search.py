"""Deferred tools: the provider's own tool search where it has one, legato's catalog
search elsewhere. Shapes checked against the SDKs' request types."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from legato import Agent, tool
from legato.messages import Message, ToolDefinition
from legato.models import ModelRequest
from legato.models._features import tools_for
from legato.models._provider import ProviderSettings
from legato.models.anthropic import PROFILE as ANTHROPIC
from legato.models.anthropic import AnthropicModel
from legato.models.openai_compatible import PROFILES, compatible_model
from legato.models.openai_responses import responses_body
from legato.models.retry import RetryPolicy
from legato.simulator import SimTurn, WireSimulator
from legato.tools import ToolCatalog

SEARCH = ToolDefinition(name="search_tools", search_fallback=True)
DEFERRED = ToolDefinition(name="create_issue", description="Open an issue.", defer_loading=True)
LOADED = ToolDefinition(name="get_issue", description="Read an issue.")
REQUEST = ModelRequest(messages=(Message.user("Open an issue"),), tools=(SEARCH, LOADED, DEFERRED))


def _names(request: ModelRequest) -> list[str]:
    return [t.name for t in request.tools]


def test_a_provider_with_tool_search_gets_the_deferred_tools_not_search_tools() -> None:
    assert _names(tools_for(REQUEST, ANTHROPIC)) == ["get_issue", "create_issue"]


def test_twin_a_provider_without_gets_search_tools_not_the_deferred_tools() -> None:
    assert _names(tools_for(REQUEST, PROFILES["groq"].model)) == ["search_tools", "get_issue"]


def test_anthropic_marks_deferred_tools_and_adds_its_tool_search() -> None:
    from anthropic.types import ToolParam, ToolSearchToolBm25_20251119Param

    model = AnthropicModel("claude-sonnet-4-5", api_key="k", base_url="http://127.0.0.1:9")
    tools = model.body(tools_for(REQUEST, ANTHROPIC))["tools"]
    loaded, deferred, search = tools
    TypeAdapter(ToolParam).validate_python(
        {k: v for k, v in deferred.items() if k != "cache_control"}
    )
    TypeAdapter(ToolSearchToolBm25_20251119Param).validate_python(
        {k: v for k, v in search.items() if k != "cache_control"}
    )
    assert deferred["defer_loading"] is True and "defer_loading" not in loaded


def test_responses_marks_deferred_tools_and_adds_tool_search() -> None:
    from openai.types.responses import ToolParam

    tools = responses_body(tools_for(REQUEST, ANTHROPIC), model="gpt-5", stream=False)["tools"]
    for entry in tools:
        TypeAdapter(ToolParam).validate_python(entry)
    assert [t.get("defer_loading", False) for t in tools] == [False, True, False]
    assert tools[-1] == {"type": "tool_search"}


def _catalog() -> ToolCatalog:
    def make(name: str) -> Any:
        def run(title: str) -> str:
            return f"{name}: {title}"

        run.__name__ = name
        run.__doc__ = f"{name.replace('_', ' ').capitalize()}.\n\nArgs:\n    title: The title.\n"
        return tool(run)

    names = ("create_issue", "close_issue", "list_issues", "get_issue")
    return ToolCatalog(*[make(n) for n in names], threshold=2, native=True)


async def _sent_tools(sim: WireSimulator, model: Any) -> list[dict[str, Any]]:
    sim.enqueue(SimTurn(text="ok"))
    try:
        await Agent(model, tools=[_catalog()]).run("Open an issue")
    finally:
        await model.aclose()
    return sim.requests[0].body["tools"]


async def test_an_agent_on_anthropic_lets_the_provider_search(sim: WireSimulator) -> None:
    settings = ProviderSettings(retry=RetryPolicy(max_attempts=1))
    model = AnthropicModel("claude-sonnet-4-5", base_url=sim.url, api_key="k", settings=settings)
    tools = await _sent_tools(sim, model)
    assert [t["name"] for t in tools] == [
        "create_issue",
        "close_issue",
        "list_issues",
        "get_issue",
        "tool_search_tool_bm25",
    ]
    assert all(t.get("defer_loading") for t in tools[:4])


async def test_twin_an_agent_elsewhere_falls_back_to_the_catalog(sim: WireSimulator) -> None:
    settings = ProviderSettings(retry=RetryPolicy(max_attempts=1))
    model = compatible_model(
        "groq", "llama", base_url=f"{sim.url}/v1", api_key="k", settings=settings
    )
    tools = await _sent_tools(sim, model)
    assert [t["function"]["name"] for t in tools] == ["search_tools"]
