"""OpenAI Chat Completions: OpenAI itself and every server that speaks the same wire API.

The search models' `url_citation` annotations (on the whole message, or in a streamed delta)
are kept in the message's `provider_details["citations"]`, flattened as the Responses API
gives them (`type`, `url`, `title`, `start_index`, `end_index`), each with `part`, the index
of the text part it belongs to.

```py
from legato.models.openai_chat import OpenAIChatModel

model = OpenAIChatModel("gpt-4o-mini")  # key from OPENAI_API_KEY
```

Per-server differences (base URL, key variable, quirks) live in a `ServerProfile`; see
`legato.models.openai_compatible` for vLLM, llama.cpp, LM Studio, Groq, Mistral and others.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from legato.exceptions import ContentFiltered, ModelError, StreamInterrupted
from legato.messages import (
    DocumentPart,
    ImagePart,
    JsonValue,
    Message,
    ModelResponse,
    StopReason,
    TextPart,
    ThinkingPart,
    ToolResultPart,
)
from legato.models._base import (
    ModelProfile,
    ModelRequest,
    ModelStreamEvent,
    ResponseCompleted,
    ToolChoice,
)
from legato.models._openai_common import (
    CITATIONS,
    data_url,
    make_clients,
    map_openai_error,
    merge_body,
    openai_post,
    openai_usage,
)
from legato.models._provider import ProviderModel, ProviderSettings
from legato.models.assembly import ResponseAssembler
from legato.models.dialects import apply_dialect, strict_or_plain

__all__ = ["OPENAI", "OpenAIChatModel", "ServerProfile", "chat_messages", "from_name"]

Obj = dict[str, Any]

_FINISH: dict[str, StopReason] = {
    "stop": StopReason.END_TURN,
    "tool_calls": StopReason.TOOL_CALLS,
    "function_call": StopReason.TOOL_CALLS,
    "length": StopReason.MAX_TOKENS,
    "model_length": StopReason.MAX_TOKENS,  # Mistral: the model's context is full
    "content_filter": StopReason.CONTENT_FILTER,
}
"""Documented `finish_reason` values; `error` (OpenRouter, Mistral) raises; others are OTHER."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerProfile:
    """One server that speaks Chat Completions, and its quirks."""

    name: str
    """The provider prefix of model strings, e.g. `groq`."""
    base_url: str | None = None
    """Where the server listens; None means the SDK's default (api.openai.com)."""
    env_var: str | None = None
    """The environment variable holding the key; None for servers that need none."""
    price_provider: str | None = None
    """The provider's id in `genai-prices`; None for local servers (free)."""
    model: ModelProfile = field(default_factory=ModelProfile)
    """Capabilities of models on this server."""
    max_tokens_field: str = "max_tokens"
    """Body field for the output limit (OpenAI itself wants `max_completion_tokens`)."""
    stream_usage: bool = True
    """Ask for usage in the stream (`stream_options.include_usage`)."""
    send_parallel_tool_calls: bool = True
    """The server accepts the `parallel_tool_calls` field."""
    no_stream_with_auto_tools: bool = False
    """Streaming with tools and `tool_choice="auto"` fails silently (llama-cpp-python's
    server sends HTTP 200 and no chunks); such requests go out unstreamed."""
    send_strict: bool = True
    """The server understands `strict` on tools and json_schema response formats."""
    json_object_schema: bool = False
    """Structured output goes as `{"type": "json_object", "schema": ...}` (llama-cpp-python's
    server) instead of OpenAI's `{"type": "json_schema", "json_schema": {...}}`."""
    reasoning_field: str | None = None
    """The assistant message field in which the server returns reasoning and expects it back
    (`reasoning_content`: DeepSeek, z.ai; `reasoning`: Cerebras). None: reasoning is read
    (from either field) and not sent back."""
    reasoning_chunks: bool = False
    """Reasoning goes back as a `thinking` content chunk before the text (Mistral), the shape
    in which the server returns it."""
    reasoning_back: Literal["tool_loop", "always"] = "tool_loop"
    """Which assistant messages carry their reasoning back: those after the last user
    message (the current turn's tool loop, which DeepSeek requires and is all it wants), or
    every one (z.ai's preserved thinking)."""
    null_content: bool = True
    """An assistant message that only carries tool calls is sent with `content: null`, as
    OpenAI documents it; False sends `""` (llama-cpp-python's server answers HTTP 500 to null)."""
    usage_in_stream: bool = True
    """The server reports usage in streams (at the end, when asked with `stream_options`).
    False: it never does (llama-cpp-python's server), and sends one chunk per generated
    token; legato then counts the output tokens from the chunks (the prompt's tokens stay
    unknown, 0; unstreamed answers carry both)."""


OPENAI = ServerProfile(
    name="openai-chat",
    env_var="OPENAI_API_KEY",
    price_provider="openai",
    model=ModelProfile(native_structured_output=True, schema_dialect="json_schema"),
    max_tokens_field="max_completion_tokens",
)
"""OpenAI's own Chat Completions endpoint."""


# -- request translation --------------------------------------------------------------------


def _content(parts: tuple[Any, ...]) -> str | list[Obj]:
    if all(isinstance(p, TextPart) for p in parts):
        return "".join(p.text for p in parts)
    out: list[Obj] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            out.append({"type": "image_url", "image_url": {"url": data_url(part)}})
        elif isinstance(part, DocumentPart):
            file: Obj = {"file_data": data_url(part), "filename": part.title or "document"}
            out.append({"type": "file", "file": file})
    return out


def _tool_messages(results: list[ToolResultPart]) -> list[Obj]:
    out: list[Obj] = []
    media: list[Any] = []
    for result in results:
        text = result.text or ("(no output)" if not result.content else "")
        extra = [p for p in result.content if not isinstance(p, TextPart)]
        if extra:
            text += f"\n[{len(extra)} attachment(s) follow in the next user message]"
            media.extend(extra)
        out.append({"role": "tool", "tool_call_id": result.call_id, "content": text})
    if media:
        out.append({"role": "user", "content": _content(tuple(media))})
    return out


def chat_messages(request: ModelRequest, *, server: ServerProfile | None = None) -> list[Obj]:
    """The neutral conversation as Chat Completions messages, as `server` takes them."""
    server = server or OPENAI
    out: list[Obj] = []
    if request.instructions:
        out.append({"role": "system", "content": request.instructions})
    last_user = max(
        (i for i, m in enumerate(request.messages) if m.role == "user" and not m.tool_results),
        default=-1,
    )
    for index, message in enumerate(request.messages):
        entries = _message(message, null=server.null_content)
        if message.role == "assistant" and (server.reasoning_back == "always" or index > last_user):
            _reasoning_back(entries, message, server)
        out.extend(entries)
    return out


def _reasoning_back(entries: list[Obj], message: Message, server: ServerProfile) -> None:
    """Put the message's reasoning (this server's own) where the server expects it back."""
    thinking = "".join(
        p.text
        for p in message.parts
        if isinstance(p, ThinkingPart) and p.provider == server.name and not p.redacted
    )
    if not thinking or not entries:
        return
    entry = entries[0]
    if server.reasoning_field is not None:
        entry[server.reasoning_field] = thinking
    elif server.reasoning_chunks:
        chunk: Obj = {"type": "thinking", "thinking": [{"type": "text", "text": thinking}]}
        text = entry.get("content")
        entry["content"] = [chunk] + ([{"type": "text", "text": text}] if text else [])


def _message(message: Message, *, null: bool) -> list[Obj]:
    if message.role == "system":
        return [{"role": "system", "content": message.text}]
    if message.role == "tool" or message.tool_results:
        return _tool_messages(message.tool_results)
    if message.role == "user":
        return [{"role": "user", "content": _content(message.parts)}]
    calls = message.tool_calls
    entry: Obj = {"role": "assistant", "content": message.text or (None if null else "")}
    if calls:
        entry["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.raw_arguments or "{}"},
            }
            for c in calls
        ]
    return [entry]


def _tool_choice(choice: ToolChoice) -> str | Obj:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def chat_body(request: ModelRequest, *, model: str, server: ServerProfile, stream: bool) -> Obj:
    """The whole request body."""
    s = request.settings
    body: Obj = {"model": model, "messages": chat_messages(request, server=server)}
    if request.tools:
        tools: list[Obj] = []
        for t in request.tools:
            if t.strict and server.send_strict:
                schema, strict = strict_or_plain(
                    t.name, t.parameters, plain=server.model.schema_dialect
                )
            else:
                schema, strict = apply_dialect(t.parameters, server.model.schema_dialect), False
            fn: Obj = {"name": t.name, "parameters": schema}
            if t.description:
                fn["description"] = t.description
            if strict:
                fn["strict"] = True
            tools.append({"type": "function", "function": fn})
        body["tools"] = tools
        body["tool_choice"] = _tool_choice(request.tool_choice)
        if s.parallel_tool_calls is not None and server.send_parallel_tool_calls:
            body["parallel_tool_calls"] = s.parallel_tool_calls
    if request.output is not None and request.output.free_form:
        body["response_format"] = {"type": "json_object"}
    elif request.output is not None:
        if request.output.strict and server.send_strict:
            schema, strict = strict_or_plain(request.output.name, request.output.schema)
        else:
            schema, strict = apply_dialect(request.output.schema, "json_schema"), False
        spec: Obj = {"name": request.output.name, "schema": schema}
        if strict:
            spec["strict"] = True
        body["response_format"] = (
            {"type": "json_object", "schema": schema}
            if server.json_object_schema
            else {"type": "json_schema", "json_schema": spec}
        )
    optional: dict[str, object] = {
        "temperature": s.temperature,
        server.max_tokens_field: s.max_tokens,
        "top_p": s.top_p,
        "stop": list(s.stop_sequences) if s.stop_sequences else None,
        "seed": s.seed,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    if stream:
        body["stream"] = True
        if server.stream_usage:
            body["stream_options"] = {"include_usage": True}
    return body


# -- the model ------------------------------------------------------------------------------


class OpenAIChatModel(ProviderModel):
    """A model behind the Chat Completions API (OpenAI or any compatible server)."""

    def __init__(
        self,
        model: str,
        *,
        server: ServerProfile = OPENAI,
        settings: ProviderSettings | None = None,
        profile: ModelProfile | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> None:
        """Create a model.

        Args:
            model: The model name as the server knows it.
            server: The server and its quirks (default: OpenAI).
            settings: Key, base URL, timeout, headers, extra body, retries, streaming.
            profile: Override the server's model capabilities.
            api_key: Shortcut for `settings.api_key`.
            base_url: Shortcut for `settings.base_url`.
        """
        settings = (settings or ProviderSettings()).overridden(api_key=api_key, base_url=base_url)
        super().__init__(model, settings=settings, profile=profile or server.model)
        self.server = server
        self.provider = server.name
        self.price_provider = server.price_provider
        self._clients = make_clients(
            settings, provider=server.name, env_var=server.env_var, default_base_url=server.base_url
        )

    async def aclose(self) -> None:
        """Close the client of the running event loop."""
        await self._clients.aclose()

    def _wire_stream(self, request: ModelRequest) -> bool:
        if not self.settings.stream:
            return False
        auto_tools = bool(request.tools) and request.tool_choice == "auto"
        return not (self.server.no_stream_with_auto_tools and auto_tools)

    async def _stream_once(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        client = await self._clients.get()
        stream = self._wire_stream(request)
        body = merge_body(
            chat_body(request, model=self.model, server=self.server, stream=stream),
            self.settings.extra_body,
        )
        headers = request.settings.extra_headers
        if request.settings.extra_body:
            body.update(request.settings.extra_body)
        completion_type, chunk_stream = _sdk_types()
        assembler = ResponseAssembler(provider=self.provider)
        state = _State()
        answer = await openai_post(
            client,
            "/chat/completions",
            body,
            cast_to=completion_type,
            stream_cls=chunk_stream if stream else None,
            headers=headers,
            request_timeout=request.settings.timeout,
        )
        if not stream:
            for event in self._translate(self._whole, answer, assembler, state):
                yield event
        else:
            chunks = answer
            try:
                async for chunk in chunks:
                    for event in self._translate(self._chunk, chunk, assembler, state):
                        yield event
            except Exception as exc:
                raise self._broken(exc) from exc
            finally:
                await chunks.close()
            if not state.seen:
                msg = f"{self.name}: HTTP 200 but the stream had no events"
                raise StreamInterrupted(msg, provider=self.provider)
            if state.finish is None and getattr(chunks, "done", False):
                state.finish = "stop"  # complete; the calls, if any, make it TOOL_CALLS
            if state.finish is None:
                msg = f"{self.name}: the stream ended without a finish reason or [DONE]"
                raise StreamInterrupted(msg, provider=self.provider)
        yield self._completed(assembler, state)

    def _chunk(
        self, chunk: Any, assembler: ResponseAssembler, state: _State
    ) -> list[ModelStreamEvent]:
        state.seen = state.streamed = True
        state.model = chunk.model or state.model
        state.response_id = chunk.id or state.response_id
        if chunk.usage is not None:
            state.usage = chunk.usage
        extra: Mapping[str, Any] = getattr(chunk, "model_extra", None) or {}
        groq = extra.get("x_groq")
        if isinstance(groq, Mapping) and cast(Mapping[str, Any], groq).get("usage"):
            state.usage = state.usage or cast(Mapping[str, Any], groq)["usage"]  # Groq's place
        events: list[ModelStreamEvent] = []
        for choice in chunk.choices or ():
            if choice.index:
                continue
            delta = choice.delta
            if delta is not None:
                fed = _feed(assembler, delta, streamed=True)
                state.token_chunks += 1 if fed else 0
                events.extend(fed)
                if getattr(delta, "refusal", None):
                    state.refusal.append(str(delta.refusal))
                state.annotations.extend(_annotations(delta))
            if choice.finish_reason:
                state.finish = choice.finish_reason
        return events

    def _whole(
        self, completion: Any, assembler: ResponseAssembler, state: _State
    ) -> list[ModelStreamEvent]:
        state.seen = True
        state.model = completion.model or ""
        state.response_id = completion.id
        state.usage = completion.usage
        if not completion.choices:
            msg = f"{self.name}: a completion without choices"
            raise StreamInterrupted(msg, provider=self.provider)
        choice = completion.choices[0]
        state.finish = choice.finish_reason or "stop"
        if getattr(choice.message, "refusal", None):
            state.refusal.append(str(choice.message.refusal))
        state.annotations.extend(_annotations(choice.message))
        return _feed(assembler, choice.message, streamed=False)

    def _completed(self, assembler: ResponseAssembler, state: _State) -> ResponseCompleted:
        if state.finish == "error":
            msg = f"{self.name}: the server ended the answer with finish_reason 'error'"
            raise StreamInterrupted(msg, provider=self.provider)
        stop = _FINISH.get(state.finish or "stop", StopReason.OTHER)
        if stop is StopReason.CONTENT_FILTER:
            msg = f"{self.name}: the provider withheld the answer (content filter)"
            raise ContentFiltered(msg, provider=self.provider)
        if state.refusal:  # the model declined: its words, never an empty answer
            msg = f"{self.name}: the model refused to answer: {''.join(state.refusal)}"
            raise ContentFiltered(msg, provider=self.provider)
        usage = openai_usage(state.usage, input_key="prompt_tokens", output_key="completion_tokens")
        if state.usage is None and state.streamed and not self.server.usage_in_stream:
            usage = dataclasses.replace(usage, output_tokens=state.token_chunks)
        response = assembler.build(
            usage=usage,
            stop_reason=stop,
            model_name=state.model,
            cost=self._cost(usage, state.model),
            provider_response_id=state.response_id,
        )
        if state.annotations:
            response = _cited(response, state.annotations)
        return ResponseCompleted(response=response)

    def _map_error(self, exc: Exception, started: bool) -> ModelError | None:
        return map_openai_error(exc, provider=self.provider, started=started)


@dataclass(slots=True)
class _State:
    seen: bool = False
    model: str = ""
    response_id: str | None = None
    finish: str | None = None
    usage: Any = None
    streamed: bool = False
    token_chunks: int = 0
    """Streamed chunks that carried text, reasoning or a tool call's piece."""
    refusal: list[str] = field(default_factory=lambda: [])
    """The model's refusal (`message.refusal`), when it declined to answer."""
    annotations: list[dict[str, JsonValue]] = field(default_factory=lambda: [])
    """The answer's citations, flattened."""


def _annotations(message: Any) -> list[dict[str, JsonValue]]:
    """The `annotations` of a message or a streamed delta, each flattened.

    The SDK's delta type lacks the field: in a stream it arrives among the extra fields.
    """
    found: object = getattr(message, "annotations", None)
    if found is None:
        extra: Mapping[str, Any] = getattr(message, "model_extra", None) or {}
        found = extra.get("annotations")
    out: list[dict[str, JsonValue]] = []
    for item in cast(list[Any], found) if isinstance(found, list) else []:
        raw = item.model_dump(mode="json") if hasattr(item, "model_dump") else item
        if not isinstance(raw, dict):
            continue
        entry = cast(dict[str, JsonValue], raw)
        nested = entry.get(str(entry.get("type")))
        if isinstance(nested, dict):  # {"type": "url_citation", "url_citation": {...}}
            entry = {"type": entry["type"], **nested}
        out.append(entry)
    return out


def _cited(response: ModelResponse, annotations: list[dict[str, JsonValue]]) -> ModelResponse:
    """The response with its citations in the message's `provider_details`."""
    message = response.message
    part = next((i for i, p in enumerate(message.parts) if isinstance(p, TextPart)), None)
    cited: list[JsonValue] = [{"part": part, **a} for a in annotations]
    details: dict[str, JsonValue] = {**(message.provider_details or {}), CITATIONS: cited}
    return dataclasses.replace(
        response, message=dataclasses.replace(message, provider_details=details)
    )


def _feed(assembler: ResponseAssembler, delta: Any, *, streamed: bool) -> list[ModelStreamEvent]:
    """Feed one delta (or a whole message) into the assembler; return the events to emit."""
    events: list[ModelStreamEvent | None] = []
    extra: Mapping[str, Any] = getattr(delta, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    if isinstance(reasoning, str):
        events.append(assembler.add_thinking(reasoning))
    content: object = delta.content
    if isinstance(content, str) or content is None:
        events.append(assembler.add_text(content))
    else:
        events.extend(_content_chunks(assembler, content))
    for position, call in enumerate(delta.tool_calls or ()):
        fn = call.function
        events.append(
            assembler.add_tool_call(
                index=call.index if streamed else position,
                id=call.id,
                name=fn.name if fn is not None else None,
                arguments=fn.arguments if fn is not None else None,
            )
        )
    return [e for e in events if e is not None]


def _content_chunks(assembler: ResponseAssembler, content: object) -> list[ModelStreamEvent | None]:
    """Content sent as a list of typed chunks (Mistral: `thinking`, then `text`).

    A `thinking` chunk holds its text as a string or as a list of text chunks. Chunk types
    legato does not know (references, images the model returns, ...) are skipped, never a
    crash; content that is neither a list nor a chunk raises `TypeError`, which the caller
    turns into a `ResponseParseError` carrying the payload.
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


@functools.cache
def _sdk_types() -> tuple[type[Any], type[Any]]:
    """The SDK's completion type and its stream of chunks (imported on first use).

    The stream notes whether the server ended it with `data: [DONE]`: a stream that did
    is complete even without a `finish_reason` (some servers send none); one that stopped
    without either was cut off. (The SDK reads and drops that line; the one method that
    sees it is overridden; were it renamed, no stream would count as ended, as before.)
    """
    from openai import AsyncStream
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    class ChunkStream(AsyncStream[ChatCompletionChunk]):
        done = False

        async def _iter_events(self) -> AsyncIterator[Any]:
            async for event in super()._iter_events():
                if str(getattr(event, "data", "")).startswith("[DONE]"):
                    self.done = True
                yield event

    return ChatCompletion, ChunkStream


def from_name(model: str) -> OpenAIChatModel:
    """The `openai-chat:` provider: OpenAI's Chat Completions API."""
    return OpenAIChatModel(model)
