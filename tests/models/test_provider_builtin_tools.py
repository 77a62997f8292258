"""Provider-run tools in neutral form: each provider's request shape (validated against the
SDK's own request types), typed refusals before sending, and results kept in the journal."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from legato import Agent
from legato.events import ModelResponded
from legato.exceptions import UnsupportedFeature
from legato.messages import Message
from legato.models import ModelRequest, ModelSettings
from legato.models._builtin_wire import anthropic_builtin, gemini_builtin, responses_builtin
from legato.models._provider import ProviderSettings
from legato.models.anthropic import AnthropicModel
from legato.models.builtin import (
    CodeExecution,
    FileSearch,
    MCPConnector,
    UserLocation,
    WebFetch,
    WebSearch,
)
from legato.models.gemini import GeminiModel
from legato.models.openai_compatible import compatible_model
from legato.models.openai_responses import OpenAIResponsesModel, responses_body
from legato.models.retry import RetryPolicy
from legato.simulator import SimServerTool, SimTurn, WireSimulator

PARIS = UserLocation(city="Paris", country="FR", timezone="Europe/Paris")
SEARCH = WebSearch(max_uses=2, allowed_domains=("meteo.fr",), user_location=PARIS)
MCP = MCPConnector(name="docs", url="https://mcp.example/mcp", allowed_tools=("search",))


def _validate(param: Any, value: object) -> None:
    """Raise unless `value` fits the SDK's request type (a TypedDict or a pydantic model)."""
    TypeAdapter(param).validate_python(value)


def test_anthropic_shapes_match_the_sdk_types() -> None:
    from anthropic.types import (
        CodeExecutionTool20250825Param,
        WebFetchTool20250910Param,
        WebSearchTool20250305Param,
    )
    from anthropic.types.beta import BetaMCPToolsetParam, BetaRequestMCPServerURLDefinitionParam

    tools, servers = anthropic_builtin((SEARCH, WebFetch(max_uses=1), CodeExecution(), MCP))
    search, fetch, code, toolset = tools
    _validate(WebSearchTool20250305Param, search)
    _validate(WebFetchTool20250910Param, fetch)
    _validate(CodeExecutionTool20250825Param, code)
    _validate(BetaMCPToolsetParam, toolset)
    [server] = servers
    _validate(BetaRequestMCPServerURLDefinitionParam, server)
    assert search["allowed_domains"] == ["meteo.fr"] and search["max_uses"] == 2
    assert search["user_location"]["city"] == "Paris"
    assert toolset["configs"] == {"search": {"enabled": True}}


def test_responses_shapes_match_the_sdk_types() -> None:
    from openai.types.responses import ToolParam

    tools = responses_builtin(
        (
            WebSearch(allowed_domains=("meteo.fr",), user_location=PARIS),
            CodeExecution(),
            FileSearch(stores=("vs_1",), max_results=5),
            MCP,
        )
    )
    for entry in tools:
        _validate(ToolParam, entry)
    assert [t["type"] for t in tools] == ["web_search", "code_interpreter", "file_search", "mcp"]


def test_gemini_shapes_match_the_sdk_types() -> None:
    from google.genai.types import Tool

    tools = gemini_builtin(
        (
            WebSearch(blocked_domains=("spam.example",)),
            WebFetch(),
            CodeExecution(),
            FileSearch(stores=("fileSearchStores/s1",), max_results=3),
        )
    )
    for entry in tools:
        Tool.model_validate(entry)
    assert tools[0] == {"google_search": {"exclude_domains": ["spam.example"]}}


def _request(*tools: Any) -> ModelRequest:
    return ModelRequest(
        messages=(Message.user("Weather in Paris?"),),
        settings=ModelSettings(builtin_tools=tools),
    )


@pytest.mark.parametrize(
    ("provider", "tool", "option"),
    [
        ("anthropic", FileSearch(stores=("vs_1",)), "the built-in tool 'file_search'"),
        ("openai", WebFetch(), "the built-in tool 'web_fetch'"),
        ("gemini", MCP, "the built-in tool 'mcp'"),
        ("openai", WebSearch(max_uses=3), "web_search.max_uses"),
        ("openai", WebSearch(blocked_domains=("x.example",)), "web_search.blocked_domains"),
        ("gemini", WebSearch(allowed_domains=("x.example",)), "web_search.allowed_domains"),
        ("gemini", WebFetch(max_uses=1), "web_fetch.max_uses"),
        (
            "anthropic",
            WebSearch(allowed_domains=("a.example",), blocked_domains=("b.example",)),
            "web_search.blocked_domains",
        ),
        ("llamacpp-server", WebSearch(), "the built-in tool 'web_search'"),
        ("groq", CodeExecution(), "the built-in tool 'code_execution'"),
    ],
)
async def test_what_a_provider_does_not_offer_is_refused_before_sending(
    sim: WireSimulator, provider: str, tool: Any, option: str
) -> None:
    model = _model(sim, provider)
    try:
        with pytest.raises(UnsupportedFeature) as caught:
            [e async for e in model.stream(_request(tool))]
    finally:
        await model.aclose()
    assert caught.value.provider == provider
    assert caught.value.option == option
    assert provider in str(caught.value) and option in str(caught.value)
    assert sim.requests == []


def _model(sim: WireSimulator, provider: str) -> Any:
    settings = ProviderSettings(retry=RetryPolicy(max_attempts=1))
    if provider == "anthropic":
        return AnthropicModel("claude-sonnet-4-5", base_url=sim.url, api_key="k", settings=settings)
    if provider == "openai":
        return OpenAIResponsesModel(
            "gpt-5", base_url=f"{sim.url}/v1", api_key="k", settings=settings
        )
    if provider == "gemini":
        return GeminiModel("gemini-2.5-flash", base_url=sim.url, api_key="k", settings=settings)
    return compatible_model(provider, "m", base_url=f"{sim.url}/v1", api_key="k", settings=settings)


async def test_twin_offered_tools_go_out_and_their_results_stay_in_the_journal(
    sim: WireSimulator,
) -> None:
    sim.enqueue(SimTurn(server_tools=(SimServerTool(kind="web_search"),), text="18 C, sunny."))
    model = _model(sim, "anthropic")
    agent = Agent(model, model_settings=ModelSettings(builtin_tools=(SEARCH,)))
    try:
        result = await agent.run("Weather in Paris?")
    finally:
        await model.aclose()
    assert result.output == "18 C, sunny."
    [sent] = sim.requests[0].body["tools"]
    assert sent["type"] == "web_search_20250305"
    [responded] = [e for e in result.journal if isinstance(e, ModelResponded)]
    blocks: Any = (responded.response.message.provider_details or {})["anthropic_server_blocks"]
    assert [b["block"]["type"] for b in blocks] == ["server_tool_use", "web_search_tool_result"]
    assert result.usage.web_searches == 1


async def test_the_mcp_connector_sends_its_beta_header(sim: WireSimulator) -> None:
    sim.enqueue(SimTurn(text="ok"))
    model = _model(sim, "anthropic")
    try:
        [e async for e in model.stream(_request(MCP))]
    finally:
        await model.aclose()
    request = sim.requests[0]
    assert request.headers.get("anthropic-beta") == "mcp-client-2025-11-20"
    assert request.body["mcp_servers"][0]["url"] == "https://mcp.example/mcp"


def test_responses_body_keeps_function_tools_and_adds_builtin_ones() -> None:
    body = responses_body(_request(CodeExecution()), model="gpt-5", stream=False)
    assert body["tools"] == [{"type": "code_interpreter", "container": {"type": "auto"}}]


def test_gemini_code_and_search_results_are_kept_and_code_goes_back_in_place() -> None:
    from google.genai.types import GenerateContentResponse

    from legato.models._gemini_read import ReadState
    from legato.models.assembly import ResponseAssembler
    from legato.models.gemini import gemini_contents

    wire = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Let me compute."},
                        {"executable_code": {"language": "PYTHON", "code": "print(6 * 7)"}},
                        {"code_execution_result": {"outcome": "OUTCOME_OK", "output": "42\n"}},
                        {"text": "It is 42."},
                    ],
                },
                "finish_reason": "STOP",
                "grounding_metadata": {"web_search_queries": ["six times seven"]},
            }
        ],
        "usage_metadata": {"prompt_token_count": 9, "candidates_token_count": 12},
        "model_version": "gemini-2.5-flash",
    }
    chunk = GenerateContentResponse.model_validate(wire)
    model = GeminiModel("gemini-2.5-flash", api_key="k")
    assembler, state = ResponseAssembler(provider="gemini"), ReadState()
    model._chunk(chunk, assembler, state)
    response = model._completed(assembler, state).response
    details: Any = response.message.provider_details
    assert [e["part"] for e in details["gemini_builtin_parts"]] == [
        {"executable_code": {"language": "PYTHON", "code": "print(6 * 7)"}},
        {"code_execution_result": {"outcome": "OUTCOME_OK", "output": "42\n"}},
    ]
    assert details["gemini_grounding"]["grounding_metadata"]["web_search_queries"] == [
        "six times seven"
    ]
    assert response.usage.web_searches == 1
    _, contents = gemini_contents((Message.user("6 x 7?"), response.message))
    assert contents[1]["parts"] == [
        {"text": "Let me compute."},
        {"executable_code": {"language": "PYTHON", "code": "print(6 * 7)"}},
        {"code_execution_result": {"outcome": "OUTCOME_OK", "output": "42\n"}},
        {"text": "It is 42."},
    ]
