from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legato.messages import (
    DocumentPart,
    ImagePart,
    JsonValue,
    Message,
    ModelResponse,
    Part,
    StopReason,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    messages_from_json,
    messages_to_json,
    parse_arguments,
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values: st.SearchStrategy[JsonValue] = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
texts = st.text(max_size=20)
content_parts = st.one_of(
    st.builds(TextPart, text=texts),
    st.builds(
        ImagePart,
        data=st.binary(min_size=1, max_size=16),
        media_type=st.sampled_from(["image/png", "image/jpeg"]),
    ),
    st.builds(ImagePart, url=st.just("https://example.invalid/x.png")),
    st.builds(DocumentPart, data=st.binary(max_size=16), title=st.none() | texts),
)
parts: st.SearchStrategy[Part] = st.one_of(
    content_parts,
    st.builds(
        ThinkingPart,
        text=texts,
        signature=st.none() | texts,
        redacted=st.booleans(),
        provider=st.none() | texts,
    ),
    st.builds(ToolCallPart, id=texts, name=texts, arguments=json_values, raw_arguments=texts),
    st.builds(
        ToolResultPart,
        call_id=texts,
        name=texts,
        content=st.lists(content_parts, max_size=3).map(tuple),
        is_error=st.booleans(),
    ),
)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    parts=st.lists(parts, max_size=4).map(tuple),
    provider_details=st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=2),
)


@given(st.lists(messages, max_size=4))
def test_messages_round_trip_exactly_through_json(conversation: list[Message]) -> None:
    assert messages_from_json(messages_to_json(conversation)) == conversation


def test_bytes_travel_as_base64() -> None:
    image = ImagePart(data=b"\x89PNG\r\n\x1a\n\x00", media_type="image/png")
    text = messages_to_json([Message.user([image])])
    assert "\\x" not in text and image.base64 is not None
    assert messages_from_json(text)[0].parts[0] == image


def test_image_needs_exactly_one_source() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        ImagePart(media_type="image/png")
    with pytest.raises(ValueError, match="exactly one"):
        DocumentPart(data=b"x", url="https://example.invalid/doc.pdf")


def test_tool_call_keeps_raw_arguments_and_parses_them() -> None:
    good = ToolCallPart.from_raw(id="1", name="f", raw_arguments='{"a": 1}')
    assert good.arguments == {"a": 1} and good.raw_arguments == '{"a": 1}'
    bad = ToolCallPart.from_raw(id="2", name="f", raw_arguments='{"a": ')
    assert bad.arguments is None and bad.raw_arguments == '{"a": '
    assert parse_arguments("") == {}
    built = ToolCallPart.from_arguments(id="3", name="f", arguments={"city": "Zürich"})
    assert built.raw_arguments == '{"city": "Zürich"}'


def test_message_helpers() -> None:
    call = ToolCallPart.from_arguments(id="c", name="f", arguments={})
    message = Message(role="assistant", parts=(TextPart(text="a"), call, TextPart(text="b")))
    assert message.text == "ab"
    assert message.tool_calls == [call]
    result = ToolResultPart.text_result(call_id="c", name="f", text="done")
    assert Message(role="tool", parts=(result,)).tool_results == [result]
    assert result.text == "done"


@given(
    st.lists(
        st.builds(
            Usage,
            input_tokens=st.integers(0, 10**6),
            output_tokens=st.integers(0, 10**6),
            cache_read_tokens=st.integers(0, 10**6),
            cache_write_tokens=st.integers(0, 10**6),
            reasoning_tokens=st.integers(0, 10**6),
            requests=st.integers(0, 10),
        ),
        max_size=5,
    )
)
def test_usage_adds_field_by_field(usages: list[Usage]) -> None:
    total = sum(usages, Usage())
    assert total.input_tokens == sum(u.input_tokens for u in usages)
    assert total.cache_write_tokens == sum(u.cache_write_tokens for u in usages)
    assert total.requests == sum(u.requests for u in usages)
    assert total.total_tokens == total.input_tokens + total.output_tokens


def test_model_response_defaults() -> None:
    response = ModelResponse(message=Message.assistant("hi"))
    assert response.stop_reason is StopReason.END_TURN
    assert response.usage == Usage()
