"""Ollama's native chat API (`POST /api/chat`), streamed as NDJSON over httpx.

```py
from legato.models.ollama import OllamaModel

model = OllamaModel("qwen3:0.6b")  # http://127.0.0.1:11434 unless OLLAMA_HOST says otherwise
```

Ollama sends each tool call whole (never argument fragments) and has no `tool_choice`; a
request that forces a tool still goes out with the tools, and `none` leaves them out.
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any, cast

import httpx

from legato.exceptions import (
    ModelError,
    ModelTimeout,
    ProviderServerError,
    StreamInterrupted,
    UnsupportedFeature,
)
from legato.messages import (
    DocumentPart,
    ImagePart,
    Message,
    StopReason,
    ThinkingPart,
    ToolCallPart,
    Usage,
)
from legato.models._base import ModelProfile, ModelRequest, ModelStreamEvent, ResponseCompleted
from legato.models._provider import (
    LoopClients,
    ProviderModel,
    ProviderSettings,
    error_from_status,
    parse_error,
    shared_ssl_context,
)
from legato.models._transport import async_transport
from legato.models.assembly import ResponseAssembler
from legato.models.dialects import wire_schema

__all__ = ["OllamaModel", "from_name", "ollama_messages"]

Obj = dict[str, Any]

PROFILE = ModelProfile(
    tool_choice_required=False,
    native_structured_output=True,
    supports_thinking=True,
)
DEFAULT_HOST = "http://127.0.0.1:11434"
_PROVIDER = "ollama"


class _HTTPError(Exception):
    """An error answer from Ollama, before mapping."""

    def __init__(self, status: int, body: object, headers: dict[str, str]) -> None:
        self.status = status
        self.body = body
        self.headers = headers
        super().__init__(f"HTTP {status}")


def _images(parts: Iterable[Any]) -> list[str]:
    """The images among `parts`, as the base64 text Ollama takes.

    Ollama's chat API takes text and inline images only: an image by URL or a document
    raises `UnsupportedFeature` here, before anything is sent (it was left out unseen).
    """
    images: list[str] = []
    for part in parts:
        if isinstance(part, DocumentPart):
            what, why = f"a document ({part.media_type})", "its chat API takes text and images"
            raise UnsupportedFeature(_PROVIDER, what, why)
        if isinstance(part, ImagePart):
            if part.base64 is None:
                what, why = "an image by URL", "it takes an image's bytes: make the part with data="
                raise UnsupportedFeature(_PROVIDER, what, why)
            images.append(part.base64)
    return images


def ollama_messages(request: ModelRequest) -> list[Obj]:
    """The neutral conversation as Ollama chat messages.

    Images a tool returned follow its results in a user message of their own (a tool
    message carries text only), as they do on Chat Completions.
    """
    out: list[Obj] = []
    if request.instructions:
        out.append({"role": "system", "content": request.instructions})
    for message in request.messages:
        out.extend(_message(message))
    return out


def _message(message: Message) -> list[Obj]:
    if message.tool_results:
        out: list[Obj] = [
            {"role": "tool", "content": r.text, "tool_name": r.name, "tool_call_id": r.call_id}
            for r in message.tool_results
        ]
        images = _images(p for r in message.tool_results for p in r.content)
        if images:
            text = f"[{len(images)} image(s) returned by the tools above]"
            out.append({"role": "user", "content": text, "images": images})
        return out
    if message.role in ("system", "user"):
        entry: Obj = {"role": message.role, "content": message.text}
        images = _images(message.parts)
        if images:
            entry["images"] = images
        return [entry]
    entry = {"role": "assistant", "content": message.text}
    thinking = "".join(p.text for p in message.parts if isinstance(p, ThinkingPart))
    if thinking:
        entry["thinking"] = thinking
    calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
    if calls:
        entry["tool_calls"] = [
            {
                "id": c.id,
                "function": {
                    "name": c.name,
                    "arguments": c.arguments if isinstance(c.arguments, dict) else {},
                },
            }
            for c in calls
        ]
    return [entry]


@dataclass(slots=True)
class _State:
    seen: bool = False
    done: bool = False
    reason: str | None = None
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0

    def unfinished(self) -> str | None:
        """How a streamed answer fell short: no line with `done: true`."""
        return None if self.done else "before done=true"


async def _json_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The non-blank lines of a newline-delimited JSON body (the last may lack its newline)."""
    buffer = b""
    async for piece in chunks:
        buffer += piece
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


_DONE: dict[str, StopReason] = {"stop": StopReason.END_TURN, "length": StopReason.MAX_TOKENS}
"""`done_reason` values; others (`load`, `unload`, future ones) are `StopReason.OTHER`."""


class OllamaModel(ProviderModel):
    """A model served by Ollama, through its native `/api/chat`."""

    provider = "ollama"
    price_provider = None

    def __init__(
        self,
        model: str,
        *,
        settings: ProviderSettings | None = None,
        profile: ModelProfile | None = None,
        base_url: str | None = None,
    ) -> None:
        """Create a model; the server is `base_url`, else `OLLAMA_HOST`, else 127.0.0.1:11434."""
        settings = settings or ProviderSettings()
        if base_url is not None:
            settings = dataclasses.replace(settings, base_url=base_url)
        super().__init__(model, settings=settings, profile=profile or PROFILE)
        host = settings.base_url or os.environ.get("OLLAMA_HOST") or DEFAULT_HOST
        if "://" not in host:
            host = f"http://{host}"
        self.base_url = host.rstrip("/")
        headers = dict(settings.headers)
        if settings.api_key:
            headers["authorization"] = f"Bearer {settings.api_key}"
        timeout = settings.timeout if settings.timeout is not None else 600.0

        def factory() -> httpx.AsyncClient:
            ssl_context = shared_ssl_context("httpx")
            return httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
                timeout=timeout,
                verify=ssl_context,
                transport=async_transport(httpx, verify=ssl_context),
            )

        async def close(client: httpx.AsyncClient) -> None:
            await client.aclose()

        self._clients: LoopClients[httpx.AsyncClient] = LoopClients(factory, close)

    async def aclose(self) -> None:
        """Close the client of the running event loop."""
        await self._clients.aclose()

    def body(self, request: ModelRequest, *, stream: bool) -> Obj:
        """The request body."""
        s = request.settings
        body: Obj = {"model": self.model, "messages": ollama_messages(request), "stream": stream}
        if request.tools and request.tool_choice != "none":
            tools = [
                t for t in request.tools if request.tool_choice in ("auto", "required", t.name)
            ]
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": wire_schema(t.parameters, self.profile.schema_dialect),
                    },
                }
                for t in tools
            ]
        if request.output is not None:
            free = request.output.free_form
            body["format"] = "json" if free else wire_schema(request.output.schema, "json_schema")
        if s.thinking_budget is not None:
            body["think"] = s.thinking_budget > 0
        options: dict[str, object] = {
            "temperature": s.temperature,
            "num_predict": s.max_tokens,
            "top_p": s.top_p,
            "stop": list(s.stop_sequences) if s.stop_sequences else None,
            "seed": s.seed,
        }
        present = {k: v for k, v in options.items() if v is not None}
        if present:
            body["options"] = present
        body.update(self.settings.extra_body)
        if s.extra_body:
            body.update(s.extra_body)
        return body

    async def _stream_once(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        client = await self._clients.get()
        stream = self.settings.stream
        body = self.body(request, stream=stream)
        headers = dict(request.settings.extra_headers or {})
        timeout = request.settings.timeout
        extra: Obj = {"timeout": timeout} if timeout is not None else {}
        assembler = ResponseAssembler(provider="ollama", id_prefix=f"call_{uuid.uuid4().hex[:12]}")
        state = _State()
        async with client.stream(
            "POST", "/api/chat", json=body, headers=headers, **extra
        ) as response:
            if response.status_code >= 400:
                raw = await response.aread()
                raise _HTTPError(response.status_code, _json_or_text(raw), dict(response.headers))
            lines = _json_lines(response.aiter_bytes())
            async for event in self._read_stream(lines, self._line, state, assembler, state):
                yield event
        yield self._completed(assembler, state)

    def _line(
        self, line: bytes, assembler: ResponseAssembler, state: _State
    ) -> list[ModelStreamEvent]:
        if not line.strip():
            return []
        try:
            data = cast(object, json.loads(line))
        except ValueError as exc:
            raise parse_error(
                self.provider, line, f"invalid JSON line from the server: {exc}"
            ) from exc
        if not isinstance(data, dict):
            raise parse_error(self.provider, line, "expected a JSON object per line")
        data = cast(Obj, data)
        state.seen = True
        if "error" in data:
            msg = f"{self.name}: error inside the stream: {data['error']}"
            raise StreamInterrupted(msg, provider=self.provider, body=data)
        state.model = str(data.get("model") or state.model)
        message = cast(Obj, data.get("message") or {})
        out: list[ModelStreamEvent | None] = []
        thinking = message.get("thinking")
        if isinstance(thinking, str):
            out.append(assembler.add_thinking(thinking))
        out.append(assembler.add_text(message.get("content")))
        for call in cast(list[Obj], message.get("tool_calls") or []):
            fn = cast(Obj, call.get("function") or {})
            index = state.calls
            state.calls += 1
            arguments = fn.get("arguments")
            raw = (
                arguments
                if isinstance(arguments, str)
                else json.dumps(arguments or {}, ensure_ascii=False)
            )
            ident = call.get("id")
            out.append(
                assembler.add_tool_call(
                    index=index,
                    id=str(ident) if ident else None,
                    name=str(fn.get("name") or ""),
                    arguments=raw,
                )
            )
        if data.get("done"):
            state.done = True
            state.reason = str(data.get("done_reason") or "stop")
            state.input_tokens = int(data.get("prompt_eval_count") or 0)
            state.output_tokens = int(data.get("eval_count") or 0)
        return [e for e in out if e is not None]

    def _completed(self, assembler: ResponseAssembler, state: _State) -> ResponseCompleted:
        stop = _DONE.get(state.reason or "stop", StopReason.OTHER)
        usage = Usage(
            input_tokens=state.input_tokens, output_tokens=state.output_tokens, requests=1
        )
        response = assembler.build(usage=usage, stop_reason=stop, model_name=state.model, cost=0.0)
        return ResponseCompleted(response=response)

    def _map_error(self, exc: Exception, started: bool) -> ModelError | None:
        if isinstance(exc, _HTTPError):
            return error_from_status(
                exc.status, provider=self.provider, body=exc.body, headers=exc.headers
            )
        if isinstance(exc, httpx.TimeoutException):
            return ModelTimeout(f"{self.name}: no answer in time", provider=self.provider)
        if isinstance(exc, httpx.ConnectError):
            return ProviderServerError(
                f"{self.name}: connection failed: {exc}", provider=self.provider
            )
        if isinstance(exc, httpx.TransportError):
            return StreamInterrupted(
                f"{self.name}: the stream broke off: {exc}", provider=self.provider
            )
        return None


def _json_or_text(raw: bytes) -> object:
    try:
        return cast(object, json.loads(raw))
    except ValueError:
        return raw.decode("utf-8", "replace")


def from_name(model: str) -> OllamaModel:
    """The `ollama:` provider."""
    return OllamaModel(model)
