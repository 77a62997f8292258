"""Answers read once from their wire JSON: the SSE decoder and the Chat Completions readers.

The decoder is checked against the OpenAI SDK's own `SSEDecoder` on the same bytes cut at
every place; the readers against the SDK's typed objects on the simulator's answers (the
conformance suite runs every scenario through them as well).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai._streaming import SSEDecoder

from legato.exceptions import RateLimited, StreamInterrupted
from legato.models._chat_read import ChatState, read_chunk, read_completion, stream_chunks
from legato.models._sse import server_sent_events
from legato.models.assembly import ResponseAssembler

STREAM = (
    b": keep-alive comment\n\n"
    b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
    b'data: {"id":"c1",\r\ndata: "choices":[]}\r\n\r\n'
    b"event: note\nid: 7\nretry: 100\ndata: two\ndata: lines\n\n"
    b"data:no-space\r\rdata: [DONE]\n\n"
    b"data: after done\n\n"
    b"data: never ended"
)


async def _chunks(data: bytes, cuts: list[int]) -> AsyncIterator[bytes]:
    start = 0
    for cut in sorted(set(cuts)):
        yield data[start:cut]
        start = cut
    yield data[start:]


async def _ours(data: bytes, cuts: list[int]) -> list[tuple[str, str]]:
    return [event async for event in server_sent_events(_chunks(data, cuts))]


async def _theirs(data: bytes, cuts: list[int]) -> list[tuple[str, str]]:
    # the SDK's decoder keeps an event's `id` (and so dispatches blank lines after one as
    # empty events: a shape no server sends); compared on events that carry data or a name
    out = [(e.event or "", e.data) async for e in SSEDecoder().aiter_bytes(_chunks(data, cuts))]
    return [(event, data) for event, data in out if event or data]


async def test_the_decoder_reads_what_the_sdks_decoder_reads() -> None:
    ours = await _ours(STREAM, [])
    assert ours == await _theirs(STREAM, [])
    assert ours[0] == ("", '{"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"}}]}')
    assert ("note", "two\nlines") in ours
    assert ("", "no-space") in ours and ("", "[DONE]") in ours
    assert all("never ended" not in data for _, data in ours)  # no blank line after it


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
async def test_the_decoder_is_the_same_wherever_the_bytes_are_cut(cuts: list[int]) -> None:
    assert await _ours(STREAM, cuts) == await _ours(STREAM, [])
    assert await _ours(STREAM, cuts) == await _theirs(STREAM, cuts)


def _sse(*events: object) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


async def test_chunks_stop_at_done_and_read_the_rest() -> None:
    body = _sse({"a": 1}) + b"data: [DONE]\n\n" + _sse({"b": 2})
    consumed: list[bytes] = []

    async def source() -> AsyncIterator[bytes]:
        for piece in (body[:10], body[10:]):
            consumed.append(piece)
            yield piece

    chunks = [c async for c in stream_chunks(source(), provider="p")]
    assert chunks == [{"a": 1}]
    assert b"".join(consumed) == body  # drained: the connection can be reused


@pytest.mark.parametrize(
    ("error", "expected"),
    [({"code": "rate_limit_exceeded", "message": "slow down"}, RateLimited), ({}, None)],
)
async def test_an_error_inside_the_stream_is_the_typed_error(
    error: dict[str, str], expected: type[Exception] | None
) -> None:
    body = _sse({"a": 1}, {"error": error} if error else {"error": None, "b": 2})
    got: list[object] = []
    if expected is None:  # the twin: an empty `error` field is not an error
        got = [c async for c in stream_chunks(_chunks(body, []), provider="p")]
        assert len(got) == 2
        return
    with pytest.raises(expected, match="slow down"):
        async for chunk in stream_chunks(_chunks(body, []), provider="p"):
            got.append(chunk)
    assert got == [{"a": 1}]


async def test_a_server_error_inside_the_stream_is_stream_interrupted() -> None:
    body = _sse({"error": {"type": "server_error", "message": "boom"}})
    with pytest.raises(StreamInterrupted, match="boom"):
        [c async for c in stream_chunks(_chunks(body, []), provider="p")]


def test_a_whole_completion_is_read_from_plain_json() -> None:
    completion = {
        "id": "c9",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "Checking.",
                    "reasoning_content": "think",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "f", "arguments": '{"x": 1}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4},
    }
    assembler, state = ResponseAssembler(provider="p"), ChatState()
    read_completion(completion, assembler, state)
    assert (state.model, state.response_id, state.finish) == ("m", "c9", "tool_calls")
    message = assembler.build()
    assert message.message.text == "Checking."
    assert [(c.name, c.arguments) for c in message.message.tool_calls] == [("f", {"x": 1})]


def test_streamed_chunks_assemble_calls_by_index() -> None:
    assembler, state = ResponseAssembler(provider="p"), ChatState()
    call = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"x"'}}
    rest = {"index": 0, "function": {"arguments": ": 2}"}}
    for delta, finish in (({"tool_calls": [call]}, None), ({"tool_calls": [rest]}, "tool_calls")):
        choice: dict[str, object] = {"index": 0, "delta": delta, "finish_reason": finish}
        read_chunk({"id": "c", "model": "m", "choices": [choice]}, assembler, state)
    response = assembler.build()
    assert [(c.name, c.arguments) for c in response.message.tool_calls] == [("f", {"x": 2})]
    assert state.finish == "tool_calls"


def test_a_chunk_of_the_wrong_shape_raises_for_the_parse_error() -> None:
    assembler, state = ResponseAssembler(provider="p"), ChatState()
    with pytest.raises((AttributeError, KeyError, TypeError)):
        read_chunk({"choices": [{"index": 0, "delta": {"tool_calls": [{}]}}]}, assembler, state)
    with pytest.raises((AttributeError, KeyError, TypeError)):
        read_completion({"id": "x"}, assembler, state)
