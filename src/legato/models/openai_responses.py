"""OpenAI's Responses API (the default for `"openai:<model>"`; `"openai-chat:"` selects Chat).

```py
from legato.models.openai_responses import OpenAIResponsesModel

model = OpenAIResponsesModel("gpt-4.1-mini")  # key from OPENAI_API_KEY
```

Annotations on the answer text (`url_citation`, `file_citation`, ...) are kept in the
message's `provider_details["citations"]`, each with the index of the text part it belongs
to. The items of OpenAI's built-in tools (`web_search_call`, `file_search_call`,
`code_interpreter_call`, ...) are kept whole in `provider_details["openai_builtin_items"]`
and not sent back: legato sends `store: false`, and such an item is a reference to one the
server did not keep; their outcome is in the answer text. A `refusal` content part (the
model declines to answer) raises `ContentFiltered` with the model's words.

The SDK sends the request (auth, base URL, timeouts, status errors); the answer comes back
as the raw HTTP response and is read once, from its JSON (plain dicts, the server-sent
events decoded by `legato.models._sse`), never built into the SDK's `Response` objects.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

from legato.exceptions import ContentFiltered, ModelError
from legato.messages import (
    DocumentPart,
    ImagePart,
    JsonValue,
    Message,
    StopReason,
    TextPart,
    ThinkingPart,
)
from legato.models._base import (
    ModelProfile,
    ModelRequest,
    ModelStreamEvent,
    ResponseCompleted,
    ToolChoice,
)
from legato.models._builtin_wire import responses_builtin
from legato.models._chat_read import stream_chunks
from legato.models._openai_common import (
    CITATIONS,
    data_url,
    http_response,
    make_clients,
    map_openai_error,
    merge_body,
    openai_post,
    openai_usage,
    stream_error,
)
from legato.models._provider import ProviderModel, ProviderSettings
from legato.models._provider import json_array as _list
from legato.models._provider import json_object as _obj
from legato.models.assembly import ResponseAssembler
from legato.models.dialects import wire_schema, wire_strict_or_plain

__all__ = ["OpenAIResponsesModel", "from_name", "responses_input"]

Obj = dict[str, Any]
_REASONING_IDS = "openai_reasoning_ids"
_CLEAR_REASONING_IDS = "openai_reasoning_text_ids"
"""Reasoning items that came with their text in clear (`reasoning_text` content) and no
encrypted content (DeepSeek, gpt-oss servers): sent back as they came."""
_BUILTIN_ITEMS = "openai_builtin_items"
_COMPACTION = "openai_compaction_items"
"""Compaction items (the server's encrypted summary of the turns before them) and tool
search calls and outputs: kept whole and sent back first with their turn."""
_SENT_BACK = frozenset({"compaction", "tool_search_call", "tool_search_output"})
"""Items that carry their content (not references to stored ones): sent back with their
turn, first, in their order."""
_OWN_ITEMS = frozenset({"message", "reasoning", "function_call"})

PROFILE = ModelProfile(
    native_structured_output=True,
    supports_documents=True,
    supports_thinking=True,
    builtin_tools=frozenset({"web_search", "code_execution", "file_search", "mcp"}),
    tool_search=True,
)


def _content(parts: tuple[Any, ...], *, role: str) -> list[Obj]:
    text_type = "output_text" if role == "assistant" else "input_text"
    out: list[Obj] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": text_type, "text": part.text})
        elif isinstance(part, ImagePart):
            out.append({"type": "input_image", "image_url": data_url(part), "detail": "auto"})
        elif isinstance(part, DocumentPart):
            if part.url is not None:
                out.append({"type": "input_file", "file_url": part.url})
            else:
                name = part.title or "document"
                out.append({"type": "input_file", "file_data": data_url(part), "filename": name})
    return out


def _message_items(message: Message) -> list[Obj]:
    if message.role in ("system", "user") and not message.tool_results:
        return [{"role": message.role, "content": _content(message.parts, role=message.role)}]
    details = message.provider_details or {}
    items: list[Obj] = [
        cast(Obj, item) for item in cast(list[Any], details.get(_COMPACTION) or []) if item
    ]
    reasoning_ids = iter(cast(list[str], details.get(_REASONING_IDS) or []))
    clear_ids = set(cast(list[str], details.get(_CLEAR_REASONING_IDS) or []))
    for part in message.parts:
        if isinstance(part, TextPart) and part.text:
            items.append({"role": "assistant", "content": _content((part,), role="assistant")})
        elif isinstance(part, ThinkingPart):
            if part.provider != "openai":
                continue  # another provider's reasoning means nothing here
            item_id = next(reasoning_ids, None)
            if part.signature and item_id is not None:
                summary = [{"type": "summary_text", "text": part.text}] if part.text else []
                items.append(
                    {
                        "type": "reasoning",
                        "id": item_id,
                        "summary": summary,
                        "encrypted_content": part.signature,
                    }
                )
            elif item_id in clear_ids and part.text:
                content = [{"type": "reasoning_text", "text": part.text}]
                items.append(
                    {"type": "reasoning", "id": item_id, "summary": [], "content": content}
                )
        elif part.kind == "tool_call":
            items.append(
                {
                    "type": "function_call",
                    "call_id": part.id,
                    "name": part.name,
                    "arguments": part.raw_arguments or "{}",
                }
            )
        elif part.kind == "tool_result":
            output = part.text or "(no output)"
            items.append(
                {"type": "function_call_output", "call_id": part.call_id, "output": output}
            )
            media = [p for p in part.content if not isinstance(p, TextPart)]
            if media:
                items.append({"role": "user", "content": _content(tuple(media), role="user")})
    return items


def responses_input(request: ModelRequest) -> list[Obj]:
    """The neutral conversation as Responses input items."""
    return [item for message in request.messages for item in _message_items(message)]


def _tool_choice(choice: ToolChoice) -> str | Obj:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "name": choice}


def responses_body(request: ModelRequest, *, model: str, stream: bool) -> Obj:
    """The whole request body."""
    s = request.settings
    body: Obj = {"model": model, "input": responses_input(request), "store": False}
    if request.instructions:
        body["instructions"] = request.instructions
    if request.tools:
        tools: list[Obj] = []
        for t in request.tools:
            if t.strict:
                schema, strict = wire_strict_or_plain(t.name, t.parameters)
            else:
                schema, strict = wire_schema(t.parameters, "json_schema"), False
            tool: Obj = {"type": "function", "name": t.name, "parameters": schema, "strict": strict}
            if t.description:
                tool["description"] = t.description
            if t.defer_loading:
                tool["defer_loading"] = True
            tools.append(tool)
        if any(t.defer_loading for t in request.tools):  # the profile's tool search
            tools.append({"type": "tool_search"})
        body["tools"] = tools
        body["tool_choice"] = _tool_choice(request.tool_choice)
        if s.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = s.parallel_tool_calls
    if s.builtin_tools:
        body["tools"] = body.get("tools", []) + responses_builtin(s.builtin_tools)
    if request.output is not None and request.output.free_form:
        body["text"] = {"format": {"type": "json_object"}}
    elif request.output is not None:
        if request.output.strict:
            schema, strict = wire_strict_or_plain(request.output.name, request.output.schema)
        else:
            schema, strict = wire_schema(request.output.schema, "json_schema"), False
        fmt: Obj = {"type": "json_schema", "name": request.output.name, "schema": schema}
        fmt["strict"] = strict
        body["text"] = {"format": fmt}
    optional: dict[str, object] = {
        "temperature": s.temperature,
        "max_output_tokens": s.max_tokens,
        "top_p": s.top_p,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    if s.thinking_budget is not None:
        body["include"] = ["reasoning.encrypted_content"]
        body["reasoning"] = {"summary": "auto"}
    if stream:
        body["stream"] = True
    return body


@dataclass(slots=True)
class _State:
    seen: bool = False
    done: bool = False
    response: Obj | None = None
    """The whole response: the unstreamed answer, or `response.completed`'s."""
    annotations: dict[int, list[Obj]] = field(default_factory=lambda: {})
    """Annotations streamed for each message item, by output index."""
    details: dict[str, list[JsonValue]] = field(default_factory=lambda: {})
    """Citations and built-in tool items, for the message's `provider_details`."""
    refusal: list[str] = field(default_factory=lambda: [])
    """The model's refusal, when it declined to answer."""

    def unfinished(self) -> str | None:
        """How a streamed answer fell short: no `response.completed` (or `.incomplete`)."""
        return None if self.done else "before response.completed"

    def cite(self, assembler: ResponseAssembler, annotations: list[Obj]) -> None:
        """Attach annotations to the text part just added."""
        part = assembler.part_count() - 1
        for annotation in annotations:
            self.details.setdefault(CITATIONS, []).append({"part": part, **annotation})

    def keep(self, item: Obj) -> None:
        """Keep a built-in tool's item as metadata (a compaction item to send back), once."""
        raw = item
        key = _COMPACTION if raw.get("type") in _SENT_BACK else _BUILTIN_ITEMS
        kept = self.details.setdefault(key, [])
        if raw.get("id") is None or all(
            cast(Obj, k).get("id") != raw["id"] for k in kept if isinstance(k, dict)
        ):
            kept.append(raw)


class OpenAIResponsesModel(ProviderModel):
    """A model behind OpenAI's Responses API."""

    provider = "openai"
    price_provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        settings: ProviderSettings | None = None,
        profile: ModelProfile | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> None:
        """Create a model (see `OpenAIChatModel` for the arguments)."""
        settings = (settings or ProviderSettings()).overridden(api_key=api_key, base_url=base_url)
        super().__init__(model, settings=settings, profile=profile or PROFILE)
        self._clients = make_clients(
            settings, provider="openai", env_var="OPENAI_API_KEY", default_base_url=None
        )

    async def aclose(self) -> None:
        """Close the client of the running event loop."""
        await self._clients.aclose()

    async def _stream_once(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        client = await self._clients.get()
        stream = self.settings.stream
        body = merge_body(
            responses_body(request, model=self.model, stream=stream), self.settings.extra_body
        )
        if request.settings.extra_body:
            body.update(request.settings.extra_body)
        assembler = ResponseAssembler(provider="openai")
        state = _State()
        # The answer comes back raw and is read once, from its JSON (as Chat Completions').
        answer = await openai_post(
            client,
            "/responses",
            body,
            cast_to=http_response(),
            stream_cls=None,
            stream=stream,
            headers=request.settings.extra_headers,
            request_timeout=request.settings.timeout,
        )
        try:
            if not stream:
                payload = json.loads(await answer.aread())
                for event in self._translate(self._whole, payload, assembler, state):
                    yield event
            else:
                events = stream_chunks(answer.aiter_bytes(), provider=self.provider)
                async for event in self._read_stream(events, self._event, state, assembler, state):
                    yield event
        finally:
            await answer.aclose()
        yield self._completed(assembler, state)

    def _whole(
        self, payload: Any, assembler: ResponseAssembler, state: _State
    ) -> list[ModelStreamEvent]:
        state.response = _obj(payload)
        return self._items(state.response.get("output"), assembler, state)

    def _event(
        self, event: Obj, assembler: ResponseAssembler, state: _State
    ) -> list[ModelStreamEvent]:
        kind = event["type"]
        out: list[ModelStreamEvent | None] = []
        if kind == "response.output_text.delta":
            out.append(assembler.add_text(event["delta"]))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            out.append(assembler.add_thinking(event["delta"]))
        elif kind == "response.output_item.added":
            item = _obj(event["item"])
            if item["type"] == "function_call":
                out.append(
                    assembler.add_tool_call(
                        index=event["output_index"],
                        id=item.get("call_id"),
                        name=item.get("name"),
                        arguments=item.get("arguments") or None,
                    )
                )
        elif kind == "response.function_call_arguments.delta":
            out.append(
                assembler.add_tool_call(index=event["output_index"], arguments=event["delta"])
            )
        elif kind == "response.refusal.delta":
            state.refusal.append(str(event["delta"]))
        elif kind == "response.output_text.annotation.added":
            annotation = event.get("annotation")
            if annotation is not None:
                found = state.annotations.setdefault(event["output_index"], [])
                found.append(_obj(annotation))
        elif kind == "response.output_item.done":
            self._item_done(event, assembler, state)
        elif kind in ("response.completed", "response.incomplete"):
            state.done = True
            state.response = _obj(event["response"])
        elif kind in ("response.failed", "error"):
            self._raise_failed(event)
        return [e for e in out if e is not None]

    def _item_done(self, event: Obj, assembler: ResponseAssembler, state: _State) -> None:
        item = _obj(event["item"])
        kind = item["type"]
        if kind == "reasoning":
            assembler.add_thinking(signature=item.get("encrypted_content"))
        elif kind == "message":
            streamed = state.annotations.pop(event["output_index"], None)
            if streamed is None:  # none streamed: the finished item still carries them
                streamed = _annotations(item)
            if streamed and _has_text(item):
                state.cite(assembler, streamed)
            if not state.refusal:  # none streamed: the finished item still carries it
                state.refusal.extend(_refusals(item))
        elif kind not in _OWN_ITEMS:
            state.keep(item)
        if kind in ("reasoning", "message"):
            assembler.close_part()

    def _raise_failed(self, event: Obj) -> None:
        """A `response.failed` / `error` event, classified by its error code (`stream_error`)."""
        response = event.get("response")
        error = _obj(response).get("error") if response is not None else event
        found: Obj = cast(Obj, error) if isinstance(error, dict) else {}
        code = str(found.get("code") or "")
        message = str(found.get("message") or "the response failed")
        body = {"error": {"code": code, "message": message}}
        raise stream_error(body, provider=self.provider, text=f"the response failed: {message}")

    def _items(
        self, output: object, assembler: ResponseAssembler, state: _State
    ) -> list[ModelStreamEvent]:
        out: list[ModelStreamEvent | None] = []
        for index, raw in enumerate(_list(output)):
            item = _obj(raw)
            kind = item["type"]
            if kind == "message":
                for content in _list(item["content"]):
                    if content["type"] == "output_text":
                        out.append(assembler.add_text(content["text"]))
                annotations = _annotations(item)
                if annotations and _has_text(item):
                    state.cite(assembler, annotations)
                state.refusal.extend(_refusals(item))
                assembler.close_part()
            elif kind == "reasoning":
                text = _reasoning_text(item)
                signature = item.get("encrypted_content")
                out.append(assembler.add_thinking(text or None, signature=signature))
                assembler.close_part()
            elif kind == "function_call":
                out.append(
                    assembler.add_tool_call(
                        index=index,
                        id=item["call_id"],
                        name=item["name"],
                        arguments=item["arguments"],
                    )
                )
            else:
                state.keep(item)
        return [e for e in out if e is not None]

    def _completed(self, assembler: ResponseAssembler, state: _State) -> ResponseCompleted:
        response: Obj = state.response or {}
        usage = openai_usage(
            response.get("usage"), input_key="input_tokens", output_key="output_tokens"
        )
        stop = StopReason.END_TURN
        incomplete = response.get("incomplete_details")
        reason = _obj(incomplete).get("reason") if incomplete is not None else None
        if reason == "content_filter":
            msg = f"{self.name}: the provider withheld the answer (content filter)"
            raise ContentFiltered(msg, provider=self.provider)
        if state.refusal:
            msg = f"{self.name}: the model refused to answer: {''.join(state.refusal)}"
            raise ContentFiltered(msg, provider=self.provider)
        if reason == "max_output_tokens":
            stop = StopReason.MAX_TOKENS
        elif reason is not None:
            stop = StopReason.OTHER  # an incomplete answer for a reason not documented yet
        model_name = str(response.get("model") or "")
        output = [_obj(item) for item in _list(response.get("output"))]
        for item in output:  # built-in items a stream announced only in response.completed
            if item["type"] not in _OWN_ITEMS:
                state.keep(item)
        searches = sum(1 for item in output if item["type"] == "web_search_call")
        if searches:
            usage = dataclasses.replace(usage, web_searches=searches)
        reasoning = [item for item in output if item["type"] == "reasoning"]
        details: dict[str, JsonValue] = {k: list(v) for k, v in state.details.items()}
        if reasoning:
            details[_REASONING_IDS] = [str(item["id"]) for item in reasoning]
        clear = [
            str(r["id"]) for r in reasoning if r.get("content") and not r.get("encrypted_content")
        ]
        if clear:
            details[_CLEAR_REASONING_IDS] = list[JsonValue](clear)
        built = assembler.build(
            provider_details=details or None,
            usage=usage,
            stop_reason=stop,
            model_name=model_name,
            cost=self._cost(usage, model_name),
            provider_response_id=response.get("id"),
        )
        return ResponseCompleted(response=built)

    def _map_error(self, exc: Exception, started: bool) -> ModelError | None:
        return map_openai_error(exc, provider=self.provider, started=started)


def _annotations(item: Obj) -> list[Obj]:
    """The annotations of a message item's output text."""
    found: list[Obj] = []
    for content in _list(item.get("content")):
        if content["type"] == "output_text":
            found.extend(_obj(a) for a in _list(content.get("annotations")) if a is not None)
    return found


def _reasoning_text(item: Obj) -> str:
    """A reasoning item's text: its `reasoning_text` content, else its summary.

    Some servers (DeepSeek, gpt-oss servers) return the reasoning in clear as content.
    """
    contents = _list(item.get("content"))
    clear = "".join(str(c["text"]) for c in contents if c["type"] == "reasoning_text")
    return clear or "".join(str(s["text"]) for s in _list(item.get("summary")))


def _has_text(item: Obj) -> bool:
    """Whether a message item has output text (and so made a text part to cite)."""
    return any(c["type"] == "output_text" and c.get("text") for c in _list(item.get("content")))


def _refusals(item: Obj) -> list[str]:
    """The refusal texts of a message item (a model that declines sends one instead of text)."""
    contents = _list(item.get("content"))
    return [str(c["refusal"]) for c in contents if c["type"] == "refusal" and c.get("refusal")]


def from_name(model: str) -> OpenAIResponsesModel:
    """The `openai:` provider: OpenAI's Responses API."""
    return OpenAIResponsesModel(model)
