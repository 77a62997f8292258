"""OpenAI strict mode: free-form objects are never closed to `{}`; a tool that cannot be strict
is sent without strict (that tool only) with a logged warning, at definition and on the wire."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest

from legato import tool
from legato.exceptions import ToolDefinitionError
from legato.messages import JsonValue, Message, ToolDefinition
from legato.models._base import ModelRequest, OutputSpec
from legato.models.dialects import strict_or_plain, to_openai_strict
from legato.models.openai_chat import OPENAI, chat_body
from legato.models.openai_responses import responses_body

FREE_FORM_EMPTY: dict[str, JsonValue] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "extra": {"type": "object", "properties": {}, "description": "Any key-value pairs."},
    },
    "required": ["name", "extra"],
}
PLAIN: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


def test_an_object_with_empty_properties_is_free_form_not_empty() -> None:
    with pytest.raises(ToolDefinitionError, match=r"extra: a free-form object"):
        to_openai_strict(FREE_FORM_EMPTY)


def test_twin_an_explicitly_closed_empty_object_stays_empty() -> None:
    closed = cast(dict[str, Any], FREE_FORM_EMPTY["properties"])["extra"]
    schema: dict[str, JsonValue] = {
        **FREE_FORM_EMPTY,
        "properties": {
            "name": {"type": "string"},
            "extra": {**closed, "additionalProperties": False},
        },
    }
    out = to_openai_strict(schema)
    extra = cast(dict[str, Any], out["properties"])["extra"]
    assert extra["properties"] == {} and extra["additionalProperties"] is False


def test_a_tool_with_no_arguments_is_still_strict() -> None:
    out, strict = strict_or_plain("ping", {"type": "object", "properties": {}})
    assert strict
    assert out["additionalProperties"] is False


def _tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for t in body["tools"]:
        fn = t.get("function", t)
        found[fn["name"]] = fn
    return found


def _request(**fields: Any) -> ModelRequest:
    return ModelRequest(
        messages=(Message.user("hi"),),
        tools=(
            ToolDefinition(name="save", parameters=FREE_FORM_EMPTY, strict=True),
            ToolDefinition(name="weather", parameters=PLAIN, strict=True),
        ),
        **fields,
    )


def test_chat_falls_back_for_that_tool_only_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="legato.models"):
        body = chat_body(_request(), model="gpt", server=OPENAI, stream=False)
    tools = _tools(body)
    assert "strict" not in tools["save"]
    assert tools["save"]["parameters"] == FREE_FORM_EMPTY  # sent as given, not closed to {}
    assert tools["weather"]["strict"] is True
    assert tools["weather"]["parameters"]["additionalProperties"] is False
    assert any("'save' is sent without strict mode" in r.getMessage() for r in caplog.records)


def test_responses_falls_back_for_that_tool_only() -> None:
    output = OutputSpec(name="answer", schema=FREE_FORM_EMPTY)
    body = responses_body(_request(output=output), model="gpt", stream=False)
    tools = _tools(body)
    assert tools["save"]["strict"] is False
    assert tools["save"]["parameters"] == FREE_FORM_EMPTY
    assert tools["weather"]["strict"] is True
    assert body["text"]["format"]["strict"] is False
    assert body["text"]["format"]["schema"] == FREE_FORM_EMPTY


def test_chat_structured_output_falls_back_too() -> None:
    output = OutputSpec(name="answer", schema=FREE_FORM_EMPTY)
    request = ModelRequest(messages=(Message.user("hi"),), output=output)
    body = chat_body(request, model="gpt", server=OPENAI, stream=False)
    spec = body["response_format"]["json_schema"]
    assert "strict" not in spec
    assert spec["schema"] == FREE_FORM_EMPTY


def test_a_strict_tool_that_cannot_be_strict_warns_at_definition(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="legato.tools"):

        @tool(strict=True)
        def label(labels: dict[str, int]) -> None:
            """Attach labels."""

    assert label.strict is True
    assert any(
        "tool 'label' asks for strict mode" in r.getMessage() and "labels" in r.getMessage()
        for r in caplog.records
    )
