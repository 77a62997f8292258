"""Reading a Gemini answer: one translator for the wire JSON and for the Gen AI SDK's types.

A whole (unstreamed) answer comes back unparsed (`should_return_http_response`) and is read
here from its JSON, camelCase keys and all; a streamed one is still parsed by the SDK (it
refuses the raw option for streams), and its chunks are read by the same code: every field
goes through `_at`, which takes a JSON object's wire key or a pydantic object's attribute.
What lands in the message and its `provider_details` is the same for both.

A JSON payload of the wrong shape raises `TypeError` here, which the provider's `_translate`
turns into a `ResponseParseError` carrying the payload.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from dataclasses import dataclass
from functools import cache
from typing import Any, cast, get_args, get_origin

from pydantic import BaseModel

from legato.messages import JsonValue, StopReason, Usage
from legato.models._base import ModelStreamEvent
from legato.models._provider import json_array, json_object
from legato.models.assembly import ResponseAssembler

__all__ = [
    "BUILTIN_PARTS",
    "GROUNDING",
    "SIGNATURES",
    "STOP",
    "TEXT_SIGNATURES",
    "ReadState",
    "read_chunk",
    "read_details",
    "read_state_usage",
    "read_usage",
]

STOP: dict[str, StopReason] = {
    "STOP": StopReason.END_TURN,
    "MAX_TOKENS": StopReason.MAX_TOKENS,
    "SAFETY": StopReason.CONTENT_FILTER,
    "RECITATION": StopReason.CONTENT_FILTER,
    "PROHIBITED_CONTENT": StopReason.CONTENT_FILTER,
    "BLOCKLIST": StopReason.CONTENT_FILTER,
    "SPII": StopReason.CONTENT_FILTER,
    "IMAGE_SAFETY": StopReason.CONTENT_FILTER,
}
"""Documented finish reasons that are not OTHER (`LANGUAGE`, `MALFORMED_FUNCTION_CALL`, ...)."""
BUILTIN_PARTS = "gemini_builtin_parts"
"""`[{"at": n, "part": {...}}]`: parts of the tools Gemini runs itself (`executable_code`,
`code_execution_result`), kept whole before the n-th part and sent back in place."""
GROUNDING = "gemini_grounding"
"""The candidate's `grounding_metadata` / `url_context_metadata` (Google Search, URL context)."""
SIGNATURES = "gemini_signatures"
TEXT_SIGNATURES = "gemini_text_signatures"
"""`[{"run": n, "signature": s, "empty": bool}]`: the signature of the n-th text part of the
message, or (`empty`) of an empty text part that followed it (or ended the message)."""

_ATTRIBUTES = {
    "candidates": "candidates",
    "modelVersion": "model_version",
    "responseId": "response_id",
    "usageMetadata": "usage_metadata",
    "promptFeedback": "prompt_feedback",
    "blockReason": "block_reason",
    "finishReason": "finish_reason",
    "groundingMetadata": "grounding_metadata",
    "urlContextMetadata": "url_context_metadata",
    "content": "content",
    "parts": "parts",
    "thoughtSignature": "thought_signature",
    "functionCall": "function_call",
    "thought": "thought",
    "text": "text",
    "continuationToken": "continuation_token",
    "executableCode": "executable_code",
    "codeExecutionResult": "code_execution_result",
    "id": "id",
    "name": "name",
    "args": "args",
    "promptTokenCount": "prompt_token_count",
    "candidatesTokenCount": "candidates_token_count",
    "thoughtsTokenCount": "thoughts_token_count",
    "cachedContentTokenCount": "cached_content_token_count",
}
"""Each wire key legato reads, and the SDK type's attribute for it."""


def _at(value: object, key: str) -> Any:
    """`key` of a JSON object (its wire name), or the attribute for it of an SDK object."""
    if isinstance(value, dict):
        return cast(dict[str, Any], value).get(key)
    if isinstance(value, BaseModel):
        return getattr(value, _ATTRIBUTES[key], None)
    return json_object(value)  # raises: neither an object nor an SDK type


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    msg = f"expected a string, got {type(value).__name__}"
    raise TypeError(msg)


def _count(value: object) -> int:
    """A token count; digits in a string are taken, as the SDK's types take them."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    msg = f"expected a token count, got {type(value).__name__}"
    raise TypeError(msg)


def _enum(value: object) -> str | None:
    """An enum as its wire string (the SDK's enum, or the JSON string)."""
    return _text(getattr(value, "value", value))


def _signature(value: object) -> str | None:
    """A thought signature as base64 text (the SDK decodes it to bytes; the wire has text)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode() if value else None
    return _text(value) or None


def _token(value: object) -> bytes | None:
    """A continuation token as bytes (the SDK decodes it; the wire has base64 text)."""
    if isinstance(value, bytes):
        return value or None
    text = _text(value)
    return base64.b64decode(text, validate=True) if text else None


def _args(value: object) -> object:
    """A function call's arguments: a JSON object (absent: none)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        msg = f"function call args: expected an object, got {type(value).__name__}"
        raise TypeError(msg)
    return cast(dict[str, Any], value)


@dataclass(slots=True)
class ReadState:
    """What a Gemini answer said so far (one whole answer, or the chunks of a stream)."""

    seen: bool = False
    finish: str | None = None
    blocked: str | None = None
    model: str = ""
    id: str | None = None
    usage: Usage | None = None
    calls: int = 0
    signatures: dict[str, JsonValue] = dataclasses.field(default_factory=lambda: {})
    text_runs: int = 0
    """Text parts of the response so far (consecutive text merges into one)."""
    in_text: bool = False
    text_signatures: list[JsonValue] = dataclasses.field(default_factory=lambda: [])
    builtin: list[JsonValue] = dataclasses.field(default_factory=lambda: [])
    grounding: dict[str, JsonValue] = dataclasses.field(default_factory=lambda: {})
    continuation: bytes | None = None
    """The token to go on with: Gemini stopped at its per-request limit (`CONTINUATION`).

    The SDK follows it itself for the answers it parses (`automatic_continuation`); for the
    raw ones legato does, reading every hop into the same message as a stream's chunks.
    """
    earlier: Usage | None = None
    """The usage of the hops before this one (a whole answer continued)."""

    def unfinished(self) -> str | None:
        """How an answer fell short: no finish reason (and no blocked prompt)."""
        if self.finish is None and self.blocked is None:
            return "without a finish reason"
        return None


def read_chunk(
    chunk: object, assembler: ResponseAssembler, state: ReadState
) -> list[ModelStreamEvent]:
    """Read one `GenerateContentResponse` (a whole answer or a streamed chunk) into `state`."""
    state.seen = True
    state.model = _text(_at(chunk, "modelVersion")) or state.model
    state.id = _text(_at(chunk, "responseId")) or state.id
    usage = _at(chunk, "usageMetadata")
    if usage is not None:  # the running total: the last one is the answer's
        state.usage = read_usage(usage)
    feedback = _at(chunk, "promptFeedback")
    if feedback is not None:
        blocked = _enum(_at(feedback, "blockReason"))
        if blocked is not None:
            state.blocked = blocked
    candidates = json_array(_at(chunk, "candidates"))
    if not candidates:
        return []
    candidate = candidates[0]
    finish = _enum(_at(candidate, "finishReason"))
    if finish is not None:
        state.finish = finish
    token = _token(_at(candidate, "continuationToken"))
    state.continuation = token if finish in (None, "CONTINUATION") else None
    for wire, key, sdk_type in (
        ("groundingMetadata", "grounding_metadata", "GroundingMetadata"),
        ("urlContextMetadata", "url_context_metadata", "UrlContextMetadata"),
    ):
        found = _at(candidate, wire)
        if found is not None:  # the last chunk's is the whole
            state.grounding[key] = _stored(found, sdk_type)
    content = _at(candidate, "content")
    parts = json_array(_at(content, "parts")) if content is not None else []
    return _read_parts(parts, assembler, state)


def _read_parts(
    parts: list[Any], assembler: ResponseAssembler, state: ReadState
) -> list[ModelStreamEvent]:
    out: list[ModelStreamEvent | None] = []
    for part in parts:
        sig_text = _signature(_at(part, "thoughtSignature"))
        call = _at(part, "functionCall")
        text = _text(_at(part, "text"))
        if call is not None:
            raw = json.dumps(_args(_at(call, "args")), ensure_ascii=False)
            call_id, name = _text(_at(call, "id")), _text(_at(call, "name"))
            index = state.calls
            state.calls += 1
            out.append(assembler.add_tool_call(index=index, id=call_id, name=name, arguments=raw))
            if sig_text:
                state.signatures[call_id or f"call_{index}"] = sig_text
            state.in_text = False
        elif _at(part, "thought") and text is not None:
            out.append(assembler.add_thinking(text or None, signature=sig_text))
            state.in_text = False
        elif text:
            if not state.in_text:
                state.text_runs += 1
                state.in_text = True
            out.append(assembler.add_text(text))
            if sig_text:
                state.text_signatures.append(
                    {"run": state.text_runs - 1, "signature": sig_text, "empty": False}
                )
        elif (
            _at(part, "executableCode") is not None or _at(part, "codeExecutionResult") is not None
        ):
            assembler.close_part()
            state.builtin.append({"at": assembler.part_count(), "part": _stored(part, "Part")})
            state.in_text = False
        elif sig_text:
            # An empty text part that only carries a signature (it can end a stream).
            run = state.text_runs - 1 if state.in_text else state.text_runs
            state.text_signatures.append({"run": run, "signature": sig_text, "empty": True})
    return [e for e in out if e is not None]


def read_state_usage(state: ReadState) -> Usage:
    """The usage of the answer: its last hop's, plus the earlier hops' (summed, as the SDK)."""
    usage = state.usage or Usage(requests=1)
    return usage if state.earlier is None else state.earlier + usage


def read_usage(raw: object) -> Usage:
    """The usage of one answer from its `usageMetadata`."""
    thoughts = _count(_at(raw, "thoughtsTokenCount"))
    return Usage(
        input_tokens=_count(_at(raw, "promptTokenCount")),
        output_tokens=_count(_at(raw, "candidatesTokenCount")) + thoughts,
        cache_read_tokens=_count(_at(raw, "cachedContentTokenCount")),
        reasoning_tokens=thoughts,
        requests=1,
    )


def read_details(state: ReadState) -> dict[str, JsonValue]:
    """The message's `provider_details`: signatures, built-in tool parts, grounding."""
    details: dict[str, JsonValue] = {}
    if state.signatures:
        details[SIGNATURES] = dict(state.signatures)
    if state.text_signatures:
        details[TEXT_SIGNATURES] = list(state.text_signatures)
    if state.builtin:
        details[BUILTIN_PARTS] = list(state.builtin)
    if state.grounding:
        details[GROUNDING] = dict(state.grounding)
    return details


# -- blobs kept whole ------------------------------------------------------------------------


def _stored(value: object, sdk_type: str) -> JsonValue:
    """A part or metadata kept whole, in the SDK's snake_case form whichever way it came.

    From the SDK: its `model_dump` (known fields, snake_case, bytes as base64, no nulls).
    From the wire: the same, read by the SDK type's field list (no validation): keys renamed
    to the field names, fields the SDK does not know left out (a built-in part goes back to
    Gemini through the SDK, which refuses unknown fields), nulls dropped.
    """
    if isinstance(value, BaseModel):
        return cast(JsonValue, value.model_dump(mode="json", exclude_none=True))
    from google.genai import types

    return _snake(getattr(types, sdk_type), json_object(value))


@cache
def _fields(model: type[BaseModel]) -> dict[str, tuple[str, type[BaseModel] | None]]:
    """Wire key (alias or name) -> (field name, the SDK type of its value when it has one)."""
    out: dict[str, tuple[str, type[BaseModel] | None]] = {}
    for name, info in model.model_fields.items():
        found = (name, _model_in(info.annotation))
        out[name] = found
        if info.alias:
            out[info.alias] = found
    return out


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The SDK type inside `Optional[X]` / `list[X]`; None for scalars and free-form maps."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) is dict:
        return None
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _snake(model: type[BaseModel], value: dict[str, Any]) -> dict[str, JsonValue]:
    fields = _fields(model)
    out: dict[str, JsonValue] = {}
    for key, item in value.items():
        found = fields.get(key)
        if found is None or item is None:
            continue
        name, inner = found
        out[name] = _value(inner, item)
    return out


def _value(inner: type[BaseModel] | None, item: object) -> JsonValue:
    if inner is None:
        return cast(JsonValue, item)
    if isinstance(item, list):
        return [_value(inner, i) for i in cast(list[object], item)]
    return _snake(inner, json_object(item))
