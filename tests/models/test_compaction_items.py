"""Compaction kept and sent back: Anthropic's `compaction` blocks (context management) and
OpenAI Responses' `compaction` items, read from payloads built by each SDK's own types."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic._models import construct_type
from anthropic.types import Message as AnthropicMessage
from anthropic.types import RawMessageStreamEvent
from openai.types.responses import Response

from legato.messages import Message
from legato.models.anthropic import AnthropicModel, _State, anthropic_messages
from legato.models.assembly import ResponseAssembler
from legato.models.openai_responses import OpenAIResponsesModel, responses_input
from legato.models.openai_responses import _State as ResponsesState

SUMMARY = "Summary: the user asked for the weather in Paris; it is 18 C."
COMPACTION = {"type": "compaction", "content": SUMMARY, "signature": None}


def _anthropic() -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-5", api_key="k", base_url="http://127.0.0.1:9")


def _whole() -> Message:
    model = _anthropic()
    wire = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [COMPACTION, {"type": "text", "text": "Anything else?", "citations": None}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 20},
    }
    typed: Any = construct_type(type_=AnthropicMessage, value=wire)  # shaped as the SDK's
    assert typed.content[0].type == "compaction"
    assembler, state = ResponseAssembler(provider="anthropic"), _State()
    model._whole(wire, assembler, state, None)  # the wire JSON, as the model reads it
    return model._completed(assembler, state, None).response.message


def _streamed() -> Message:
    model = _anthropic()
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [],
                "usage": {"input_tokens": 50, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "compaction"}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "compaction_delta", "content": SUMMARY},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "text", "text": ""},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "Anything else?"},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 20},
        },
        {"type": "message_stop"},
    ]
    assembler, state = ResponseAssembler(provider="anthropic"), _State()
    for raw in events:  # the wire JSON, as the model reads it (shaped as the SDK's types)
        event: Any = construct_type(type_=RawMessageStreamEvent, value=raw)
        assert event.type == raw["type"]
        model._event(raw, assembler, state, None)
    return model._completed(assembler, state, None).response.message


@pytest.mark.parametrize("read", [_whole, _streamed], ids=["whole", "streamed"])
def test_an_anthropic_compaction_block_goes_back_first_and_unchanged(read: Any) -> None:
    message = read()
    assert message.text == "Anything else?"
    _, wire = anthropic_messages((Message.user("Weather?"), message, Message.user("No, thanks.")))
    block, text = wire[1]["content"]
    assert block["type"] == "compaction" and block["content"] == SUMMARY
    assert text == {"type": "text", "text": "Anything else?"}


def _responses(output: list[dict[str, Any]]) -> Message:
    response = Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "gpt-5",
            "status": "completed",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": output,
        }
    )
    model = OpenAIResponsesModel("gpt-5", api_key="k", base_url="http://127.0.0.1:9")
    assembler, state = ResponseAssembler(provider="openai"), ResponsesState()
    # the wire JSON (checked against the SDK's types above) is what the model reads
    model._whole(response.to_dict(mode="json"), assembler, state)
    return model._completed(assembler, state).response.message


def test_a_responses_compaction_item_goes_back_before_the_answer() -> None:
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-opaque"}
    answer: dict[str, Any] = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Anything else?", "annotations": []}],
    }
    message = _responses([compaction, answer])
    request_items = responses_input(
        _request((Message.user("Weather?"), message, Message.user("No, thanks.")))
    )
    assert request_items[1] == compaction
    assert request_items[2]["content"][0]["text"] == "Anything else?"


def test_twin_other_builtin_items_are_still_not_sent_back() -> None:
    message = _responses([SEARCH])
    items = responses_input(_request((Message.user("Search"), message, Message.user("More"))))
    assert all(item.get("type") != "web_search_call" for item in items)


SEARCH = {
    "type": "web_search_call",
    "id": "ws_1",
    "status": "completed",
    "action": {"type": "search", "query": "weather Paris"},
}


def test_a_builtin_item_only_in_response_completed_is_kept() -> None:
    # A stream that announced the search in `response.completed` alone (no output_item
    # events for it): the item is still kept, with the search counted.
    from openai._models import construct_type as openai_construct
    from openai.types.responses import ResponseStreamEvent

    answer: dict[str, Any] = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "18 C.", "annotations": []}],
    }
    completed: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-5",
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": [SEARCH, answer],
    }
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "delta": "18 C.",
            "logprobs": [],
            "sequence_number": 1,
        },
        {"type": "response.completed", "response": completed, "sequence_number": 2},
    ]
    model = OpenAIResponsesModel("gpt-5", api_key="k", base_url="http://127.0.0.1:9")
    assembler, state = ResponseAssembler(provider="openai"), ResponsesState()
    for raw in events:  # the wire JSON, as the model reads it (shaped as the SDK's types)
        typed: Any = openai_construct(type_=ResponseStreamEvent, value=raw)
        assert typed.type == raw["type"]
        model._event(raw, assembler, state)
    response = model._completed(assembler, state).response
    assert response.message.text == "18 C."
    details = response.message.provider_details or {}
    assert details["openai_builtin_items"] == [SEARCH]
    assert response.usage.web_searches == 1


def _request(messages: tuple[Message, ...]) -> Any:
    from legato.models._base import ModelRequest

    return ModelRequest(messages=messages)


def test_an_anthropic_system_message_after_the_start_is_sent_in_its_place() -> None:
    # The Messages API takes `{"role": "system", ...}` among the messages (the SDK's
    # `SystemMessageParam`); leading system messages still go to the top-level field.
    system, wire = anthropic_messages(
        (
            Message.system("Be brief."),
            Message.user("Hi"),
            Message.assistant("Hello!"),
            Message.system("From now on, answer in French."),
            Message.user("Weather?"),
        )
    )
    assert system == [{"type": "text", "text": "Be brief."}]
    assert [m["role"] for m in wire] == ["user", "assistant", "system", "user"]
    assert wire[2]["content"] == [{"type": "text", "text": "From now on, answer in French."}]
