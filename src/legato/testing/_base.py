"""The shared base of legato's test models: scripted answers, turned into streamed responses.

`call`, `reply` and `estimate_usage` are public through `legato.testing`; `BaseTestModel` is
the base that `ScriptedModel`, `FunctionModel` and `GullibleModel` build on.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import TypeAlias

from legato.messages import (
    JsonValue,
    Message,
    ModelResponse,
    Part,
    StopReason,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)
from legato.models import (
    ModelProfile,
    ModelRequest,
    ModelStreamEvent,
    ResponseCompleted,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)

__all__ = ["Answer", "BaseTestModel", "ScriptedTurn", "call", "estimate_usage", "reply"]


Answer: TypeAlias = ModelResponse | Message | str
"""A model's answer in test form: a full response, an assistant message, or plain text."""
ScriptedTurn: TypeAlias = Answer | Callable[[ModelRequest], Answer]
"""One scripted answer, or a function computing it from the request."""


def call(
    name: str,
    arguments: Mapping[str, JsonValue] | None = None,
    *,
    id: str | None = None,
    raw: str | None = None,
) -> ToolCallPart:
    """A tool call for a scripted answer; `raw` gives the argument text verbatim (even invalid JSON)."""
    call_id = id or ""
    if raw is not None:
        return ToolCallPart.from_raw(id=call_id, name=name, raw_arguments=raw)
    return ToolCallPart.from_arguments(id=call_id, name=name, arguments=arguments or {})


def reply(
    *parts: str | Part, usage: Usage | None = None, cost: float | None = None
) -> ModelResponse:
    """An assistant response made of text (str) and parts, in order."""
    built = tuple(TextPart(text=p) if isinstance(p, str) else p for p in parts)
    has_calls = any(isinstance(p, ToolCallPart) for p in built)
    return ModelResponse(
        message=Message(role="assistant", parts=built),
        usage=usage or Usage(),
        stop_reason=StopReason.TOOL_CALLS if has_calls else StopReason.END_TURN,
        cost=cost,
    )


def estimate_usage(request: ModelRequest, response: ModelResponse) -> Usage:
    """Deterministic token counts for test responses (about four characters a token)."""
    prompt = sum(len(text) for text in _request_texts(request))
    answer = sum(
        len(p.text) if isinstance(p, TextPart) else len(getattr(p, "raw_arguments", ""))
        for p in response.message.parts
    )
    return Usage(input_tokens=max(1, prompt // 4), output_tokens=max(1, answer // 4), requests=1)


def _request_texts(request: ModelRequest) -> Iterator[str]:
    if request.instructions:
        yield request.instructions
    for message in request.messages:
        for part in message.parts:
            yield getattr(part, "text", "") or getattr(part, "raw_arguments", "")
    for t in request.tools:
        yield t.name + t.description


class BaseTestModel:
    """Shared behaviour: turn an answer into a streamed response."""

    def __init__(self, *, name: str, profile: ModelProfile | None, chunk_size: int) -> None:
        self._name = name
        self._profile = profile or ModelProfile()
        self._chunk_size = max(1, chunk_size)
        self._ids = itertools.count(1)
        self.requests: list[ModelRequest] = []
        """Every request received, in order."""

    @property
    def name(self) -> str:
        """The model's name."""
        return self._name

    @property
    def profile(self) -> ModelProfile:
        """The capabilities this double claims."""
        return self._profile

    def _response(self, request: ModelRequest, answer: Answer) -> ModelResponse:
        if isinstance(answer, str):
            answer = reply(answer)
        elif isinstance(answer, Message):
            answer = ModelResponse(message=answer)
        parts: list[Part] = []
        for part in answer.message.parts:
            if isinstance(part, ToolCallPart) and not part.id:
                part = replace(part, id=f"call_{next(self._ids)}")
            parts.append(part)
        message = replace(answer.message, parts=tuple(parts))
        response = replace(answer, message=message, model_name=answer.model_name or self._name)
        if response.usage == Usage():
            response = replace(response, usage=estimate_usage(request, response))
        return response

    def _chunks(self, text: str) -> Iterator[str]:
        for start in range(0, len(text), self._chunk_size):
            yield text[start : start + self._chunk_size]

    def _events(self, response: ModelResponse) -> Iterator[ModelStreamEvent]:
        index = 0
        for part in response.message.parts:
            if isinstance(part, TextPart):
                yield from (TextDelta(text=c) for c in self._chunks(part.text))
            elif isinstance(part, ThinkingPart):
                yield from (ThinkingDelta(text=c) for c in self._chunks(part.text))
            elif isinstance(part, ToolCallPart):
                yield ToolCallDelta(index=index, id=part.id, name=part.name)
                yield from (
                    ToolCallDelta(index=index, arguments_delta=c)
                    for c in self._chunks(part.raw_arguments)
                )
                index += 1
        yield ResponseCompleted(response=response)
