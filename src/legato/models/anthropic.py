"""Anthropic's Messages API: thinking with signatures, prompt caching, tools, images, documents.

```py
from legato.models.anthropic import AnthropicModel

model = AnthropicModel("claude-sonnet-4-5")  # key: ANTHROPIC_API_KEY
```

Prompt caching is on by default (`ModelSettings.prompt_cache`, or the constructor's
`cache_*` flags): the tool definitions, the instructions and a rolling breakpoint on the
history (the last block of the newest user turn, and of the one before it, so each step
reads the previous step's prefix from the cache) carry `cache_control`, within Anthropic's
limit of four breakpoints. Cache reads, writes and the dollars saved are in the usage.

Thinking blocks keep their signature and are sent back only to Anthropic (a signature means
nothing to another provider). Blocks of the tools Anthropic runs itself (`server_tool_use`,
`web_search_tool_result`, `code_execution_tool_result`, ...) are kept whole, in their place,
in the message's `provider_details` and sent back to Anthropic with the turn (it needs them
to continue a `pause_turn`); so are `compaction` blocks (context management's summary of
the turns before it, which the server needs back in its place); other providers never see
them. Citations on text blocks are
kept in `provider_details["citations"]`, each with the index of the text part it supports.
Structured output rides on a forced tool whose arguments are returned as the answer text.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

from legato.exceptions import (
    ContentFiltered,
    ModelError,
    ModelTimeout,
    ProviderServerError,
    StreamInterrupted,
)
from legato.messages import (
    JsonValue,
    StopReason,
    Usage,
)
from legato.models._anthropic_wire import (
    BREAKPOINTS,
    CITATIONS,
    SERVER_BLOCKS,
    anthropic_messages,
    kept,
    mark,
    mark_history,
)
from legato.models._base import ModelProfile, ModelRequest, ModelStreamEvent, ResponseCompleted
from legato.models._builtin_wire import ANTHROPIC_MCP_BETA, anthropic_builtin
from legato.models._provider import (
    LoopClients,
    ProviderModel,
    ProviderSettings,
    aiohttp_error,
    error_from_status,
    http_response,
    parse_error,
    read_api_key,
    require,
    shared_ssl_context,
    transport_error,
)
from legato.models._provider import json_array as _list
from legato.models._provider import json_object as _obj
from legato.models._sse import server_sent_events
from legato.models._transport import async_transport, use_aiohttp
from legato.models.assembly import ResponseAssembler
from legato.models.dialects import wire_schema

__all__ = ["AnthropicModel", "anthropic_messages", "from_name"]

Obj = dict[str, Any]

PROFILE = ModelProfile(
    native_structured_output=True,
    supports_documents=True,
    supports_thinking=True,
    builtin_tools=frozenset({"web_search", "web_fetch", "code_execution", "mcp"}),
    tool_search=True,
    schema_dialect="anthropic",
)
_STOP: dict[str, StopReason] = {
    "end_turn": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_CALLS,
    "max_tokens": StopReason.MAX_TOKENS,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "refusal": StopReason.CONTENT_FILTER,
    "pause_turn": StopReason.OTHER,
}
_ERROR_STATUS = {
    "overloaded_error": 529,
    "rate_limit_error": 429,
    "api_error": 500,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
}


@dataclass(slots=True)
class _State:
    seen: bool = False
    stopped: bool = False
    stop: str | None = None
    model: str = ""
    id: str | None = None
    usage: Obj = dataclasses.field(default_factory=lambda: {})
    kinds: dict[int, str] = dataclasses.field(default_factory=lambda: {})
    opaque: dict[int, Obj] = dataclasses.field(default_factory=lambda: {})
    """Server-tool blocks being streamed, by block index."""
    partial: dict[int, list[str]] = dataclasses.field(default_factory=lambda: {})
    """Streamed input JSON of those blocks."""
    cites: dict[int, list[Obj]] = dataclasses.field(default_factory=lambda: {})
    """Citations of the text blocks being streamed."""
    texted: set[int] = dataclasses.field(default_factory=lambda: set[int]())
    """The text blocks that had text (an empty one makes no part to cite)."""
    details: dict[str, list[JsonValue]] = dataclasses.field(default_factory=lambda: {})
    """What goes to the message's `provider_details`."""
    base: int = 0
    """Added to the wire's block indices: a continued turn's blocks count from 0 again."""
    spent: list[Obj] = dataclasses.field(default_factory=lambda: [])
    """The usage of the responses a `pause_turn` continued (their blocks are in this one)."""

    def continued(self) -> None:
        """Start on the response that continues a paused one, keeping what it built."""
        self.spent.append(self.usage)
        self.usage = {}
        self.seen = self.stopped = False
        self.stop = None
        self.base += 1 << 16
        self.kinds.clear()
        self.texted.clear()

    def unfinished(self) -> str | None:
        """How a streamed answer fell short: no `message_stop`."""
        return None if self.stopped else "before message_stop"

    def keep(self, assembler: ResponseAssembler, block: Obj) -> None:
        """Keep a server-tool block, in its place among the parts."""
        assembler.close_part()
        entry: dict[str, JsonValue] = {"at": assembler.part_count(), "block": block}
        self.details.setdefault(SERVER_BLOCKS, []).append(entry)

    def cite(self, assembler: ResponseAssembler, citations: list[Obj]) -> None:
        """Attach citations to the text part just added."""
        part = assembler.part_count() - 1
        for citation in citations:
            self.details.setdefault(CITATIONS, []).append({"part": part, **citation})


class AnthropicModel(ProviderModel):
    """A Claude model behind the Messages API."""

    provider = "anthropic"
    price_provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        settings: ProviderSettings | None = None,
        profile: ModelProfile | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        cache_instructions: bool | None = None,
        cache_tools: bool | None = None,
        cache_history: bool | None = None,
        default_max_tokens: int = 4096,
        pause_continuations: int = 8,
    ) -> None:
        """Create a model.

        Args:
            model: The model name, e.g. `claude-sonnet-4-5`.
            settings: Key, base URL, timeout, headers, extra body, retries, streaming.
            profile: Override the capabilities.
            api_key: Shortcut for `settings.api_key` (default: `ANTHROPIC_API_KEY`).
            base_url: Shortcut for `settings.base_url`.
            cache_instructions: Mark the system prompt for prompt caching (None: follow
                `ModelSettings.prompt_cache`, on unless it is False).
            cache_tools: Mark the tool definitions for prompt caching (None: as above).
            cache_history: Keep a rolling breakpoint on the conversation (None: as above).
            default_max_tokens: `max_tokens` when the settings give none (the API requires it).
            pause_continuations: How many times a response that stops with `pause_turn`
                (a long turn of the tools Anthropic runs itself) is continued within the
                same model call; past that, the paused response is returned as it is.
        """
        settings = (settings or ProviderSettings()).overridden(api_key=api_key, base_url=base_url)
        super().__init__(model, settings=settings, profile=profile or PROFILE)
        self.cache_instructions = cache_instructions
        self.cache_tools = cache_tools
        self.cache_history = cache_history
        self.default_max_tokens = default_max_tokens
        self.pause_continuations = pause_continuations
        key = read_api_key(settings.api_key, env_var="ANTHROPIC_API_KEY", provider="anthropic")
        sdk = require("anthropic", "anthropic", "anthropic")
        http2 = require("httpx2", "anthropic", "anthropic")

        aiohttp = use_aiohttp(settings.transport, extra="anthropic")  # decided (and checked) now

        def factory() -> Any:
            # a `Timeout` object, as for OpenAI (`_openai_common.make_clients`): none is
            # made per request
            timeout = http2.Timeout(settings.timeout if settings.timeout is not None else 600.0)
            if aiohttp:
                http = sdk.DefaultAioHttpClient(verify=shared_ssl_context(), timeout=timeout)
            else:
                transport = async_transport(
                    http2, verify=shared_ssl_context(), limits=sdk.DEFAULT_CONNECTION_LIMITS
                )
                http = sdk.DefaultAsyncHttpxClient(
                    verify=shared_ssl_context(), timeout=timeout, transport=transport
                )
            return sdk.AsyncAnthropic(
                http_client=http,
                api_key=key,
                base_url=settings.base_url,
                timeout=timeout,
                max_retries=0,
                default_headers=dict(settings.headers) or None,
            )

        async def close(client: Any) -> None:
            await client.close()

        self._clients: LoopClients[Any] = LoopClients(factory, close)

    async def aclose(self) -> None:
        """Close the client of the running event loop."""
        await self._clients.aclose()

    def _tools(self, request: ModelRequest) -> tuple[list[Obj], list[Obj]]:
        """The `tools` list and the `mcp_servers` list.

        Function tools (deferred ones marked, the tool search tool beside them), then the
        built-in tools.
        """
        tools: list[Obj] = []
        for t in request.tools:
            tool: Obj = {
                "name": t.name,
                "description": t.description,
                "input_schema": wire_schema(t.parameters, self.profile.schema_dialect),
            }
            tools.append({**tool, "defer_loading": True} if t.defer_loading else tool)
        if any(t.defer_loading for t in request.tools):  # the profile's tool search
            tools.append(
                {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
            )
        builtin, servers = anthropic_builtin(request.settings.builtin_tools or ())
        return tools + builtin, servers

    def body(self, request: ModelRequest) -> Obj:
        """The request body (without `stream`)."""
        s = request.settings
        system, messages = anthropic_messages(request.messages)
        if request.instructions:
            system.insert(0, {"type": "text", "text": request.instructions})
        on = s.prompt_cache is not False
        cache_system = self.cache_instructions if self.cache_instructions is not None else on
        cache_tools = self.cache_tools if self.cache_tools is not None else on
        cache_history = self.cache_history if self.cache_history is not None else on
        if system and cache_system:
            system[-1] = mark(system[-1])
        body: Obj = {
            "model": self.model,
            "messages": messages,
            "max_tokens": s.max_tokens or self.default_max_tokens,
        }
        if system:
            body["system"] = system
        tools, servers = self._tools(request)
        body.update({"mcp_servers": servers} if servers else {})
        choice: Obj | None = None
        if request.tool_choice == "none":
            choice = {"type": "none"} if tools else None
        elif request.tool_choice == "required":
            choice = {"type": "any"}
        elif request.tool_choice != "auto":
            choice = {"type": "tool", "name": request.tool_choice}
        if request.output is not None and not _output_via_tool(request):
            # Thinking forbids a forced tool, so the answer's schema goes as output_config.
            schema = wire_schema(request.output.schema, self.profile.schema_dialect)
            body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        elif request.output is not None:
            out = request.output
            schema = wire_schema(out.schema, self.profile.schema_dialect)
            tools.append(
                {
                    "name": out.name,
                    "description": out.description or "The answer.",
                    "input_schema": schema,
                }
            )
            choice = {"type": "tool", "name": out.name}
        if tools:
            if cache_tools:
                tools[-1] = mark(tools[-1])
            body["tools"] = tools
            choice = choice or {"type": "auto"}
            if s.parallel_tool_calls is False and choice["type"] != "none":
                choice["disable_parallel_tool_use"] = True
            body["tool_choice"] = choice
        if cache_history:
            used = int(bool(system and cache_system)) + int(bool(tools and cache_tools))
            mark_history(messages, min(2, BREAKPOINTS - used))
        if s.thinking_budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": s.thinking_budget}
        optional: dict[str, object] = {
            "temperature": s.temperature,
            "top_p": s.top_p,
            "stop_sequences": list(s.stop_sequences) if s.stop_sequences else None,
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        body.update(self.settings.extra_body)
        if s.extra_body:
            body.update(s.extra_body)
        return body

    async def _stream_once(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        client = await self._clients.get()
        assembler = ResponseAssembler(provider="anthropic", id_prefix="toolu")
        state = _State()
        output_tool = request.output.name if request.output and _output_via_tool(request) else None
        for _ in range(self.pause_continuations):
            async for event in self._response(client, request, assembler, state, output_tool):
                yield event
            if state.stop != "pause_turn":
                break
            # A long turn of Anthropic's own tools paused: the turn so far goes back as the
            # last assistant message and the model goes on with it, in this same call.
            paused = assembler.build(provider_details=dict(state.details) or None).message
            request = dataclasses.replace(request, messages=(*request.messages, paused))
            state.continued()
        else:
            async for event in self._response(client, request, assembler, state, output_tool):
                yield event
        yield self._completed(assembler, state, output_tool)

    async def _response(
        self,
        client: Any,
        request: ModelRequest,
        assembler: ResponseAssembler,
        state: _State,
        output_tool: str | None,
    ) -> AsyncIterator[ModelStreamEvent]:
        """One response of the API, translated into `assembler` and `state`."""
        body = self.body(request)
        _sdk_warnings(body)
        stream = self.settings.stream
        if stream:
            body["stream"] = True
        options: Obj = {}
        headers = dict(request.settings.extra_headers or {})
        if "mcp_servers" in body:  # the MCP connector is a beta
            headers.setdefault("anthropic-beta", ANTHROPIC_MCP_BETA)
        if headers:
            options["headers"] = headers
        if request.settings.timeout is not None:
            options["timeout"] = request.settings.timeout
        # The SDK sends the body as built (auth, base URL, timeouts, status errors) and
        # hands the answer back raw (`cast_to` the HTTP response); it is read once, here.
        answer = await client.post(
            "/v1/messages",
            cast_to=http_response(),
            body=body,
            options=options,
            stream=stream,
            stream_cls=None,
        )
        try:
            if not stream:
                message = json.loads(await answer.aread())
                for event in self._translate(self._whole, message, assembler, state, output_tool):
                    yield event
                return
            events = self._events(answer)
            reading = self._read_stream(events, self._event, state, assembler, state, output_tool)
            async for event in reading:
                yield event
        finally:
            await answer.aclose()

    async def _events(self, answer: Any) -> AsyncIterator[Obj]:
        """The JSON events of a streamed answer, as the SDK reads them.

        `ping` events and events without a name are skipped; an `error` event raises the
        legato error for it (`_in_stream_error`).
        """
        async for name, data in server_sent_events(answer.aiter_bytes()):
            if name == "ping" or not name:
                continue
            if name == "error":
                try:
                    body: object = json.loads(data)
                except ValueError:
                    body = data
                raise self._in_stream_error(body, str(body), dict(answer.headers))
            if data:
                yield json.loads(data)

    def _event(
        self, event: Obj, assembler: ResponseAssembler, state: _State, output_tool: str | None
    ) -> list[ModelStreamEvent]:
        kind = event["type"]
        out: list[ModelStreamEvent | None] = []
        if kind == "message_start":
            message = _obj(event["message"])
            state.model, state.id = message["model"], message["id"]
            state.usage.update(_usage_fields(message.get("usage")))
        elif kind == "content_block_start":
            index: int = event["index"]
            block = _obj(event["content_block"])
            block_type = block["type"]
            state.kinds[index] = block_type
            if block_type == "tool_use":
                if block["name"] == output_tool:
                    state.kinds[index] = "output"
                else:
                    out.append(
                        assembler.add_tool_call(
                            index=state.base + index, id=block["id"], name=block["name"]
                        )
                    )
            elif block_type == "redacted_thinking":
                assembler.add_thinking(signature=block["data"], redacted=True)
            elif block_type == "text":
                out.append(self._text(index, block["text"], assembler, state))
                citations = _list(block.get("citations"))
                if citations:  # usually `[]` here, the citations following as deltas
                    state.cites.setdefault(index, []).extend(map(_obj, citations))
            elif kept(str(block_type)):
                state.kinds[index] = "server"
                state.opaque[index] = block
        elif kind == "content_block_delta":
            out.append(self._delta(event, assembler, state))
        elif kind == "content_block_stop":
            self._stop_block(event["index"], assembler, state)
        elif kind == "message_delta":
            state.stop = _obj(event["delta"]).get("stop_reason") or state.stop
            usage = _usage_fields(event.get("usage"))
            state.usage.update({k: v for k, v in usage.items() if v})
        elif kind == "message_stop":
            state.stopped = True
        return [e for e in out if e is not None]

    def _stop_block(self, index: int, assembler: ResponseAssembler, state: _State) -> None:
        kind = state.kinds.get(index)
        if kind == "server":
            block = state.opaque.pop(index)
            text = "".join(state.partial.pop(index, []))
            if text:
                try:
                    block["input"] = json.loads(text)
                except ValueError as exc:
                    msg = f"server tool input is not JSON: {exc}"
                    raise parse_error(self.provider, text, msg) from exc
            state.keep(assembler, block)
        elif kind in ("text", "thinking", "redacted_thinking", "output"):
            cites = state.cites.pop(index, [])
            if kind == "text" and cites and index in state.texted:
                state.cite(assembler, cites)
            assembler.close_part()

    def _text(
        self, index: int, text: str | None, assembler: ResponseAssembler, state: _State
    ) -> ModelStreamEvent | None:
        delta = assembler.add_text(text)
        if delta is not None:
            state.texted.add(index)
        return delta

    def _delta(
        self, event: Obj, assembler: ResponseAssembler, state: _State
    ) -> ModelStreamEvent | None:
        delta = _obj(event["delta"])
        index: int = event["index"]
        kind = delta["type"]
        if kind == "text_delta":
            return self._text(index, delta["text"], assembler, state)
        if kind == "citations_delta":
            state.cites.setdefault(index, []).append(_obj(delta["citation"]))
            return None
        if kind == "thinking_delta":
            return assembler.add_thinking(delta["thinking"])
        if kind == "signature_delta":
            return assembler.add_thinking(signature=delta["signature"])
        if kind == "compaction_delta" and index in state.opaque:
            block = state.opaque[index]  # the summary (or its encrypted form) arrives here
            for name, piece in delta.items():
                if name in ("content", "encrypted_content") and isinstance(piece, str):
                    block[name] = (block.get(name) or "") + piece
            return None
        if kind == "input_json_delta":
            partial = delta["partial_json"]
            if state.kinds.get(index) == "server":
                state.partial.setdefault(index, []).append(partial)
                return None
            if state.kinds.get(index) == "output":
                return assembler.add_text(partial)
            return assembler.add_tool_call(index=state.base + index, arguments=partial)
        return None

    def _whole(
        self, payload: object, assembler: ResponseAssembler, state: _State, output_tool: str | None
    ) -> list[ModelStreamEvent]:
        message = _obj(payload)
        state.seen = state.stopped = True
        state.model, state.id = message["model"], message["id"]
        state.stop = message.get("stop_reason")
        state.usage.update(_usage_fields(message.get("usage")))
        out: list[ModelStreamEvent | None] = []
        for index, raw in enumerate(_list(message["content"])):
            block = _obj(raw)
            kind = block["type"]
            if kind == "text":
                out.append(assembler.add_text(block["text"]))
                citations = _list(block.get("citations"))
                if block["text"] and citations:
                    state.cite(assembler, [_obj(c) for c in citations])
            elif kind == "thinking":
                signature = block.get("signature") or None
                out.append(assembler.add_thinking(block["thinking"], signature=signature))
            elif kind == "redacted_thinking":
                assembler.add_thinking(signature=block["data"], redacted=True)
            elif kind == "tool_use":
                arguments = json.dumps(block["input"], ensure_ascii=False)
                if block["name"] == output_tool:
                    out.append(assembler.add_text(arguments))
                else:
                    out.append(
                        assembler.add_tool_call(
                            index=state.base + index,
                            id=block["id"],
                            name=block["name"],
                            arguments=arguments,
                        )
                    )
            elif kept(str(kind)):
                state.keep(assembler, block)
            assembler.close_part()
        return [e for e in out if e is not None]

    def _completed(
        self, assembler: ResponseAssembler, state: _State, output_tool: str | None
    ) -> ResponseCompleted:
        stop = _STOP.get(state.stop or "end_turn", StopReason.OTHER)
        if stop is StopReason.CONTENT_FILTER:
            msg = f"{self.name}: the model refused to answer (refusal)"
            raise ContentFiltered(msg, provider=self.provider)
        if (
            output_tool is not None
            and stop is StopReason.TOOL_CALLS
            and not assembler.build().message.tool_calls
        ):
            stop = StopReason.END_TURN
        usage = Usage()
        for u in (*state.spent, state.usage):  # a continued pause: every response's usage
            cache_read = u.get("cache_read_input_tokens") or 0
            cache_write = u.get("cache_creation_input_tokens") or 0
            usage += Usage(
                input_tokens=(u.get("input_tokens") or 0) + cache_read + cache_write,
                output_tokens=u.get("output_tokens") or 0,
                cache_read_tokens=cache_read,
                cache_write_tokens=cache_write,
                requests=1,
                web_searches=u.get("web_search_requests") or 0,
            )
        response = assembler.build(
            provider_details=dict(state.details) or None,
            usage=usage,
            stop_reason=stop,
            model_name=state.model,
            cost=self._cost(usage, state.model),
            provider_response_id=state.id,
        )
        return ResponseCompleted(response=response)

    def _in_stream_error(self, body: object, text: str, headers: dict[str, str]) -> ModelError:
        """The legato error for an `error` event inside a 200 stream, by its error type."""
        status = _ERROR_STATUS.get(_error_type(body), 500)
        if status == 500:
            msg = f"{self.name}: error inside the stream: {text}"
            return StreamInterrupted(msg, provider=self.provider, body=body)
        return error_from_status(status, provider=self.provider, body=body, headers=headers)

    def _map_error(self, exc: Exception, started: bool) -> ModelError | None:
        import anthropic as sdk

        if isinstance(exc, sdk.APIStatusError):
            body: object = exc.body
            headers = dict(exc.response.headers)
            if exc.status_code < 400:  # an error event inside a 200 stream
                return self._in_stream_error(body, str(exc), headers)
            return error_from_status(
                exc.status_code, provider=self.provider, body=body, headers=headers
            )
        if isinstance(exc, sdk.APIConnectionError):  # its subclass APITimeoutError included
            mapped = aiohttp_error(exc, provider=self.provider, started=started)
            if mapped is not None:
                return mapped
        if isinstance(exc, sdk.APITimeoutError):
            return ModelTimeout(f"{self.name}: no answer in time", provider=self.provider)
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__
            if isinstance(cause, Exception):
                mapped = transport_error(cause, provider=self.provider, started=started)
                if mapped is not None:
                    return mapped
            if started:
                return StreamInterrupted(
                    f"{self.name}: the stream broke off", provider=self.provider
                )
            return ProviderServerError(
                f"{self.name}: connection failed: {exc}", provider=self.provider
            )
        if isinstance(exc, json.JSONDecodeError):
            return parse_error(self.provider, exc.doc, f"invalid JSON from the server: {exc}")
        return None


def _sdk_warnings(body: Obj) -> None:
    """The warnings `messages.create` gives, from the SDK's own lists (it is not called).

    A deprecated model (`DeprecationWarning`, with its end-of-life date), and thinking of
    type `enabled` on a model that wants `adaptive` (`UserWarning`).
    """
    try:
        from anthropic._data import DEPRECATED_MODELS, MODELS_TO_WARN_WITH_THINKING_ENABLED
    except ImportError:  # an SDK version without the lists
        return
    model = str(body.get("model"))
    if model in DEPRECATED_MODELS:
        msg = (
            f"The model '{model}' is deprecated and will reach end-of-life on "
            f"{DEPRECATED_MODELS[model]}. Please migrate to a newer model."
        )
        warnings.warn(msg, DeprecationWarning, stacklevel=4)
    thinking = body.get("thinking")
    if (
        model in MODELS_TO_WARN_WITH_THINKING_ENABLED
        and isinstance(thinking, dict)
        and cast(Obj, thinking).get("type") == "enabled"
    ):
        msg = (
            f"Using Claude with {model} and 'thinking.type=enabled' is deprecated; "
            "'thinking.type=adaptive' is the type to use."
        )
        warnings.warn(msg, UserWarning, stacklevel=4)


def _output_via_tool(request: ModelRequest) -> bool:
    """Structured output rides on a forced tool, unless thinking is on (it forbids that)."""
    return request.output is not None and not request.settings.thinking_budget


def _error_type(body: object) -> str:
    error = cast(Obj, body).get("error") if isinstance(body, dict) else None
    return str(cast(Obj, error).get("type")) if isinstance(error, dict) else ""


def _usage_fields(raw: object) -> Obj:
    if raw is None:
        return {}
    usage = _obj(raw)
    names = (
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    )
    fields: Obj = {n: usage[n] for n in names if usage.get(n) is not None}
    tools = usage.get("server_tool_use")
    searches = _obj(tools).get("web_search_requests") if tools is not None else None
    if searches is not None:
        fields["web_search_requests"] = searches
    return fields


def from_name(model: str) -> AnthropicModel:
    """The `anthropic:` provider."""
    return AnthropicModel(model)
