"""Responses reasoning items that carry their text in clear (`reasoning_text` content) and no
encrypted content, as DeepSeek's and gpt-oss servers' Responses endpoints return them: read
whole as well as streamed, and sent back as they came. The payload is validated by the
`openai` SDK's own `Response` type."""

from __future__ import annotations

from typing import Any

from openai.types.responses import Response

from legato.messages import Message, ThinkingPart, ToolResultPart
from legato.models._base import ModelRequest
from legato.models.assembly import ResponseAssembler
from legato.models.openai_responses import OpenAIResponsesModel, _State, responses_input

REASONING = "Paris: the weather tool answers that."


def _response(reasoning: dict[str, Any]) -> Response:
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "deepseek-reasoner",
            "status": "completed",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                reasoning,
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": '{"city": "Paris"}',
                    "status": "completed",
                },
            ],
            "usage": {
                "input_tokens": 20,
                "output_tokens": 9,
                "total_tokens": 29,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 7},
            },
        }
    )


CLEAR = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [],
    "content": [{"type": "reasoning_text", "text": REASONING}],
}


def _read(response: Response) -> Message:
    model = OpenAIResponsesModel("deepseek-reasoner", api_key="k", base_url="http://127.0.0.1:9")
    assembler = ResponseAssembler(provider="openai")
    state = _State()
    # the wire JSON (checked against the SDK's types) is what the model reads
    model._whole(response.to_dict(mode="json"), assembler, state)
    return model._completed(assembler, state).response.message


def _sent_back(message: Message) -> list[dict[str, Any]]:
    [call] = message.tool_calls
    result = ToolResultPart.text_result(call_id=call.id, name=call.name, text="18 C")
    request = ModelRequest(
        messages=(Message.user("Weather?"), message, Message(role="tool", parts=(result,)))
    )
    return [item for item in responses_input(request) if item.get("type") == "reasoning"]


def test_reasoning_text_is_read_from_a_whole_response() -> None:
    message = _read(_response(CLEAR))
    [thinking] = [p for p in message.parts if isinstance(p, ThinkingPart)]
    assert thinking.text == REASONING
    assert thinking.signature is None


def test_clear_reasoning_without_encrypted_content_is_sent_back_as_it_came() -> None:
    [item] = _sent_back(_read(_response(CLEAR)))
    assert item == CLEAR


def test_twin_a_summary_without_encrypted_content_is_not_sent_back() -> None:
    # OpenAI with `store: false`: a reasoning item without its encrypted content refers to
    # one the server did not keep, so it stays out (its summary is still read).
    summary = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": REASONING}],
    }
    message = _read(_response(summary))
    assert [p.text for p in message.parts if isinstance(p, ThinkingPart)] == [REASONING]
    assert _sent_back(message) == []
