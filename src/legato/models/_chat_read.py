"""Reading Chat Completions answers from their wire JSON (plain dicts), once.

The OpenAI SDK still sends the request (auth, base URL, headers, timeouts, status errors);
its answer comes back as the raw HTTP response (`client.post(..., cast_to=httpx2.Response)`,
the SDK's documented way to an undocumented shape) and is read here straight from
`json.loads`, instead of being built into the SDK's `ChatCompletion` / `ChatCompletionChunk`
objects first and read a second time. Every function takes plain JSON values, so it can be
tested, and changed, without an SDK or a server.

A payload of the wrong shape raises `KeyError`, `TypeError`, `AttributeError` or
`ValueError`, which the model turns into a `ResponseParseError` carrying the payload.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from legato.messages import JsonValue
from legato.models._base import ModelStreamEvent
from legato.models._openai_common import stream_error
from legato.models._sse import server_sent_events
from legato.models.assembly import ResponseAssembler

__all__ = [
    "ChatState",
    "message_annotations",
    "feed",
    "read_chunk",
    "read_completion",
    "stream_chunks",
]

Obj = dict[str, Any]


@dataclass(slots=True)
class ChatState:
    """What a Chat Completions answer said besides its parts, gathered while reading it."""

    seen: bool = False
    model: str = ""
    response_id: str | None = None
    finish: str | None = None
    usage: Any = None
    streamed: bool = False
    token_chunks: int = 0
    """Streamed chunks that carried text, reasoning or a tool call's piece."""
    done: bool = False
    """The stream ended with `data: [DONE]`: complete even without a `finish_reason` (some
    servers send none); one that stopped without either was cut off."""
    refusal: list[str] = field(default_factory=lambda: [])
    """The model's refusal (`message.refusal`), when it declined to answer."""
    annotations: list[dict[str, JsonValue]] = field(default_factory=lambda: [])
    """The answer's citations, flattened."""

    def unfinished(self) -> str | None:
        """How a streamed answer fell short: neither a finish reason nor `[DONE]`."""
        if self.finish is None and not self.done:
            return "without a finish reason or [DONE]"
        return None


async def stream_chunks(
    chunks: AsyncIterator[bytes], *, provider: str, state: ChatState | None = None
) -> AsyncIterator[Obj]:
    """The JSON chunks of a streamed answer, from its raw bytes.

    `[DONE]` ends the chunks (and sets `state.done`); what follows it is still read (and ignored), so the
    connection goes back to the pool. An event whose data has an `error` raises the legato
    error for it (`stream_error`), as the SDK raises `APIError` for it.
    """
    done = False
    async for _, data in server_sent_events(chunks):
        if done:
            continue
        if data.startswith("[DONE]"):
            done = True
            if state is not None:
                state.done = True
            continue
        chunk: Any = json.loads(data)
        error = _field(chunk, "error")
        if error:
            message = _field(error, "message")
            text = message if isinstance(message, str) and message else None
            raise stream_error(
                error, provider=provider, text=text or "An error occurred during streaming"
            )
        yield chunk


def _field(value: object, name: str) -> object:
    return cast(Obj, value).get(name) if isinstance(value, dict) else None


def read_chunk(
    chunk: Obj, assembler: ResponseAssembler, state: ChatState
) -> list[ModelStreamEvent]:
    """One streamed chunk: the events it adds; its model, id, usage and finish go to `state`."""
    state.seen = state.streamed = True
    state.model = chunk.get("model") or state.model
    state.response_id = chunk.get("id") or state.response_id
    usage = chunk.get("usage")
    if usage is not None:
        state.usage = usage
    groq = chunk.get("x_groq")
    if isinstance(groq, Mapping) and cast(Mapping[str, Any], groq).get("usage"):
        state.usage = state.usage or cast(Mapping[str, Any], groq)["usage"]  # Groq's place
    events: list[ModelStreamEvent] = []
    for choice in chunk.get("choices") or ():
        if choice.get("index"):
            continue
        delta = choice.get("delta")
        if delta is not None:
            fed = feed(assembler, delta, streamed=True)
            state.token_chunks += 1 if fed else 0
            events.extend(fed)
            if delta.get("refusal"):
                state.refusal.append(str(delta["refusal"]))
            state.annotations.extend(message_annotations(delta))
        if choice.get("finish_reason"):
            state.finish = choice["finish_reason"]
    return events


def read_completion(
    completion: Obj, assembler: ResponseAssembler, state: ChatState
) -> list[ModelStreamEvent]:
    """A whole (unstreamed) completion: its events; model, id, usage and finish to `state`.

    A completion with an empty `choices` list gives no events and leaves `state.finish`
    None (the caller raises for it); one without the key is malformed (`KeyError`).
    """
    state.seen = True
    state.model = completion.get("model") or ""
    state.response_id = completion.get("id")
    state.usage = completion.get("usage")
    choices = completion["choices"]
    if not choices:
        return []
    choice = choices[0]
    message = choice["message"]
    state.finish = choice.get("finish_reason") or "stop"
    if message.get("refusal"):
        state.refusal.append(str(message["refusal"]))
    state.annotations.extend(message_annotations(message))
    return feed(assembler, message, streamed=False)


def message_annotations(message: Obj) -> list[dict[str, JsonValue]]:
    """The `annotations` of a message or a streamed delta, each flattened."""
    found: object = message.get("annotations")
    out: list[dict[str, JsonValue]] = []
    for item in cast(list[object], found) if isinstance(found, list) else []:
        if not isinstance(item, dict):
            continue
        entry = cast(dict[str, JsonValue], item)
        nested = entry.get(str(entry.get("type")))
        if isinstance(nested, dict):  # {"type": "url_citation", "url_citation": {...}}
            entry = {"type": entry["type"], **nested}
        out.append(entry)
    return out


def feed(assembler: ResponseAssembler, delta: Obj, *, streamed: bool) -> list[ModelStreamEvent]:
    """Feed one delta (or a whole message) into the assembler; return the events to emit."""
    events: list[ModelStreamEvent | None] = []
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if isinstance(reasoning, str):
        events.append(assembler.add_thinking(reasoning))
    content: object = delta.get("content")
    if isinstance(content, str) or content is None:
        events.append(assembler.add_text(content))
    else:
        events.extend(_content_chunks(assembler, content))
    for position, call in enumerate(delta.get("tool_calls") or ()):
        fn = call.get("function")
        events.append(
            assembler.add_tool_call(
                index=call["index"] if streamed else position,
                id=call.get("id"),
                name=fn.get("name") if fn is not None else None,
                arguments=fn.get("arguments") if fn is not None else None,
            )
        )
    return [e for e in events if e is not None]


def _content_chunks(assembler: ResponseAssembler, content: object) -> list[ModelStreamEvent | None]:
    """Content sent as a list of typed chunks (Mistral: `thinking`, then `text`).

    A `thinking` chunk holds its text as a string or as a list of text chunks. Chunk types
    legato does not know (references, images the model returns, ...) are skipped, never a
    crash; content that is neither a list nor a chunk raises `TypeError`.
    """
    chunks: list[object]
    if isinstance(content, Mapping):
        chunks = [content]
    elif isinstance(content, list):
        chunks = cast(list[object], content)
    else:
        msg = f"message content of type {type(content).__name__}"
        raise TypeError(msg)
    events: list[ModelStreamEvent | None] = []
    for raw in chunks:
        if isinstance(raw, str):
            events.append(assembler.add_text(raw))
            continue
        if not isinstance(raw, Mapping):
            continue
        item = cast(Mapping[str, Any], raw)
        kind = item.get("type")
        if kind == "text" and isinstance(item.get("text"), str):
            events.append(assembler.add_text(item["text"]))
        elif kind == "thinking":
            text = _chunk_text(item.get("thinking"))
            if text:
                events.append(assembler.add_thinking(text))
    return events


def _chunk_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [
            cast(Mapping[str, Any], v).get("text")
            for v in cast(list[object], value)
            if isinstance(v, Mapping)
        ]
        return "".join(p for p in parts if isinstance(p, str))
    return ""
