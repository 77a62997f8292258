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
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

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
from legato.models._chat_read import ChatState, read_chunk, read_completion, stream_chunks
from legato.models._openai_common import (
    CITATIONS,
    data_url,
    http_response,
    make_clients,
    map_openai_error,
    merge_body,
    openai_post,
    openai_usage,
)
from legato.models._provider import ProviderModel, ProviderSettings
from legato.models.assembly import ResponseAssembler
from legato.models.dialects import wire_schema, wire_strict_or_plain

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
                schema, strict = wire_strict_or_plain(
                    t.name, t.parameters, plain=server.model.schema_dialect
                )
            else:
                schema, strict = wire_schema(t.parameters, server.model.schema_dialect), False
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
            schema, strict = wire_strict_or_plain(request.output.name, request.output.schema)
        else:
            schema, strict = wire_schema(request.output.schema, "json_schema"), False
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
        assembler = ResponseAssembler(provider=self.provider)
        state = ChatState()
        # The answer comes back raw and is read once, from its JSON (`_chat_read`).
        answer = await openai_post(
            client,
            "/chat/completions",
            body,
            cast_to=http_response(),
            stream_cls=None,
            stream=stream,
            headers=headers,
            request_timeout=request.settings.timeout,
        )
        try:
            if not stream:
                payload = json.loads(await answer.aread())
                for event in self._translate(read_completion, payload, assembler, state):
                    yield event
                if state.finish is None:
                    msg = f"{self.name}: a completion without choices"
                    raise StreamInterrupted(msg, provider=self.provider)
            else:
                chunks = stream_chunks(answer.aiter_bytes(), provider=self.provider, state=state)
                async for event in self._read_stream(chunks, read_chunk, state, assembler, state):
                    yield event
        finally:
            await answer.aclose()
        yield self._completed(assembler, state)

    def _completed(self, assembler: ResponseAssembler, state: ChatState) -> ResponseCompleted:
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


def _cited(response: ModelResponse, annotations: list[dict[str, JsonValue]]) -> ModelResponse:
    """The response with its citations in the message's `provider_details`."""
    message = response.message
    part = next((i for i, p in enumerate(message.parts) if isinstance(p, TextPart)), None)
    cited: list[JsonValue] = [{"part": part, **a} for a in annotations]
    details: dict[str, JsonValue] = {**(message.provider_details or {}), CITATIONS: cited}
    return dataclasses.replace(
        response, message=dataclasses.replace(message, provider_details=details)
    )


def from_name(model: str) -> OpenAIChatModel:
    """The `openai-chat:` provider: OpenAI's Chat Completions API."""
    return OpenAIChatModel(model)
