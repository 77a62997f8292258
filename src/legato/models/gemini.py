"""Google Gemini through the Google Gen AI SDK (`google-genai`).

```py
from legato.models.gemini import GeminiModel

model = GeminiModel("gemini-2.5-flash")  # key from GEMINI_API_KEY (or GOOGLE_API_KEY)
```

Tool and output schemas go out as JSON Schema (`parametersJsonSchema`,
`responseJsonSchema`: `$ref` and recursion included) when the profile says the model takes
it (`ModelProfile.native_json_schema`, the default here), else in Gemini's OpenAPI subset
(`legato.models.dialects.to_gemini`: no `$ref`, no free-form objects, a typed error for
either). Thought signatures, which Gemini needs back on the next turn, are kept wherever they
come: on thinking parts, for function calls in the message's
`provider_details["gemini_signatures"]`, and on text parts (the empty text part that can
end a stream included) in `provider_details["gemini_text_signatures"]`; they are sent back,
on the same parts, to Gemini only.

A conversation Gemini cannot take (no user content at all, or one that would start with a
model turn) is refused with `InvalidRequest` before anything is sent.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

from legato.exceptions import (
    ContentFiltered,
    InvalidRequest,
    ModelError,
    ModelTimeout,
    ProviderServerError,
    StreamInterrupted,
)
from legato.messages import (
    DocumentPart,
    ImagePart,
    JsonValue,
    Message,
    StopReason,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from legato.models._base import (
    ModelProfile,
    ModelRequest,
    ModelStreamEvent,
    OutputSpec,
    ResponseCompleted,
)
from legato.models._builtin_wire import gemini_builtin
from legato.models._gemini_read import (
    BUILTIN_PARTS,
    SIGNATURES,
    STOP,
    TEXT_SIGNATURES,
    ReadState,
    read_chunk,
    read_details,
    read_state_usage,
)
from legato.models._provider import (
    LoopClients,
    ProviderModel,
    ProviderSettings,
    aiohttp_error,
    error_from_status,
    parse_error,
    read_api_key,
    require,
    shared_ssl_context,
)
from legato.models._transport import async_transport, use_aiohttp
from legato.models.assembly import ResponseAssembler
from legato.models.dialects import wire_schema

__all__ = ["GeminiModel", "from_name", "gemini_contents"]

Obj = dict[str, Any]

PROFILE = ModelProfile(
    native_structured_output=True,
    supports_documents=True,
    supports_thinking=True,
    schema_dialect="gemini",
    native_json_schema=True,
    builtin_tools=frozenset({"web_search", "web_fetch", "code_execution", "file_search"}),
)


def _media(part: ImagePart | DocumentPart) -> Obj:
    if part.url is not None:
        return {"file_data": {"file_uri": part.url, "mime_type": part.media_type}}
    return {"inline_data": {"mime_type": part.media_type, "data": part.data}}


def _user_parts(parts: tuple[Any, ...]) -> list[Obj]:
    out: list[Obj] = []
    for part in parts:
        if isinstance(part, TextPart) and part.text:
            out.append({"text": part.text})
        elif isinstance(part, ImagePart | DocumentPart):
            out.append(_media(part))
    return out


def _text_signatures(details: Mapping[str, JsonValue]) -> tuple[dict[int, str], list[_Empty]]:
    """(signature per text run, signed empty text parts) from a message's provider details."""
    on_text: dict[int, str] = {}
    empty: list[_Empty] = []
    for entry in cast(list[Any], details.get(TEXT_SIGNATURES) or []):
        if not isinstance(entry, dict):
            continue
        item = cast(dict[str, Any], entry)
        run, signature = item.get("run"), item.get("signature")
        if not isinstance(run, int) or not isinstance(signature, str):
            continue
        if item.get("empty"):
            empty.append((run, signature))
        else:
            on_text[run] = signature
    return on_text, empty


_Empty = tuple[int, str]


def _signed_empty(signature: str) -> Obj:
    return {"text": "", "thought_signature": base64.b64decode(signature)}


def _model_parts(message: Message) -> list[Obj]:
    details = message.provider_details or {}
    signatures = cast(dict[str, str], details.get(SIGNATURES) or {})
    on_text, empty = _text_signatures(details)
    builtin = _builtin_parts(details)
    out: list[Obj] = []
    run = 0
    for index, part in enumerate(message.parts):
        out.extend(builtin.pop(index, []))
        if isinstance(part, TextPart) and part.text:
            text: Obj = {"text": part.text}
            if run in on_text:
                text["thought_signature"] = base64.b64decode(on_text[run])
            out.append(text)
            out.extend(_signed_empty(sig) for at, sig in empty if at == run)
            run += 1
        elif isinstance(part, ThinkingPart) and part.provider == "gemini":
            thought: Obj = {"text": part.text, "thought": True}
            if part.signature:
                thought["thought_signature"] = base64.b64decode(part.signature)
            out.append(thought)
        elif isinstance(part, ToolCallPart):
            args = part.arguments if isinstance(part.arguments, dict) else {}
            entry: Obj = {"function_call": {"id": part.id, "name": part.name, "args": args}}
            if part.id in signatures:
                entry["thought_signature"] = base64.b64decode(signatures[part.id])
            out.append(entry)
    out.extend(_signed_empty(sig) for at, sig in empty if at >= run)
    for rest in sorted(builtin):  # after the last part
        out.extend(builtin[rest])
    return out


def _builtin_parts(details: Mapping[str, JsonValue]) -> dict[int, list[Obj]]:
    """The kept built-in tool parts of a model turn, by the part index they precede."""
    found: dict[int, list[Obj]] = {}
    for raw in cast(list[Any], details.get(BUILTIN_PARTS) or []):
        entry = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
        part, at = entry.get("part"), entry.get("at")
        if isinstance(part, dict):
            found.setdefault(at if isinstance(at, int) else 0, []).append(cast(Obj, part))
    return found


def _response_part(result: ToolResultPart) -> Obj:
    key = "error" if result.is_error else "result"
    response = {"id": result.call_id, "name": result.name, "response": {key: result.text}}
    return {"function_response": response}


def gemini_contents(messages: tuple[Message, ...]) -> tuple[list[str], list[Obj]]:
    """(system texts, contents) for `generate_content`; same-role turns merge."""
    system: list[str] = []
    out: list[Obj] = []
    for message in messages:
        if message.role == "system":
            system.append(message.text)
            continue
        if message.role == "assistant":
            role, parts = "model", _model_parts(message)
        elif message.tool_results:
            role = "user"
            parts = [_response_part(r) for r in message.tool_results]
            for r in message.tool_results:
                parts.extend(
                    _user_parts(tuple(p for p in r.content if not isinstance(p, TextPart)))
                )
        else:
            role, parts = "user", _user_parts(message.parts)
        if not parts:  # an empty prompt or model turn: Gemini takes (and answers) an empty text
            parts = [{"text": ""}]
        if out and out[-1]["role"] == role:
            out[-1]["parts"].extend(parts)
        else:
            out.append({"role": role, "parts": parts})
    return system, out


@dataclass(frozen=True, slots=True, kw_only=True)
class _Session:
    """A Gen AI client and the HTTP clients legato gave it (closed together)."""

    client: Any
    sync_http: Any
    async_http: Any
    """legato's httpx2 client, or its aiohttp session."""


def _gemini_aiohttp(settings: ProviderSettings) -> bool:
    """Whether the Gen AI client goes on its aiohttp sessions (`google-genai[aiohttp]`).

    On aiohttp the SDK bounds a whole call by its timeout (`ClientTimeout(total=...)`),
    where httpx2 bounds each network step: with a timeout in the settings, `auto` keeps
    httpx2 so that a long stream whose chunks keep coming is not cut off (`aiohttp` insists
    anyway; a per-request `timeout` on aiohttp bounds the whole call).
    """
    if settings.transport == "auto" and settings.timeout is not None:
        return False
    return use_aiohttp(settings.transport, extra="gemini")


class GeminiModel(ProviderModel):
    """A Gemini model behind the Gemini API."""

    provider = "gemini"
    price_provider = "google"
    _raw_answers = True
    """Whole answers are read from their JSON (False: through the SDK's types; tests only)."""

    def __init__(
        self,
        model: str,
        *,
        settings: ProviderSettings | None = None,
        profile: ModelProfile | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> None:
        """Create a model; the key comes from `GEMINI_API_KEY` or `GOOGLE_API_KEY`."""
        settings = (settings or ProviderSettings()).overridden(api_key=api_key, base_url=base_url)
        super().__init__(model, settings=settings, profile=profile or PROFILE)
        explicit = settings.api_key or os.environ.get("GOOGLE_API_KEY") or None
        key = read_api_key(
            settings.api_key or os.environ.get("GEMINI_API_KEY") or explicit,
            env_var="GEMINI_API_KEY",
            provider="gemini",
        )
        genai = require("google.genai", "google-genai", "gemini")

        http = require("httpx2", "google-genai", "gemini")

        aiohttp = _gemini_aiohttp(settings)  # decided (and checked) now

        def factory() -> _Session:
            # legato hands the SDK its HTTP clients (and an SSL context for its websockets
            # and aiohttp): otherwise every client builds two or three SSL contexts, 40-100 ms.
            ssl_context = shared_ssl_context()
            options: Obj = {
                "headers": dict(settings.headers),
                "httpx_client": http.Client(verify=ssl_context),
                "async_client_args": {"ssl": ssl_context},
            }
            if aiohttp:
                # The SDK's aiohttp path, on a session legato makes for this loop (the SDK's
                # own is a subclass aiohttp warns about) with what the SDK's would have:
                # proxies from the environment, an unbounded pool, a 4 MiB read buffer.
                # One attempt per call, as on httpx2: retries are legato's.
                aio = require("aiohttp", "aiohttp", "gemini")
                options["aiohttp_client"] = aio.ClientSession(
                    connector=aio.TCPConnector(limit=0, ssl=ssl_context),
                    trust_env=True,
                    read_bufsize=2**22,
                )
                options["retry_options"] = {"attempts": 1}
            else:
                options["httpx_async_client"] = http.AsyncClient(
                    verify=ssl_context, transport=async_transport(http, verify=ssl_context)
                )
            if settings.base_url:
                options["base_url"] = settings.base_url
            if settings.timeout is not None:
                options["timeout"] = int(settings.timeout * 1000)
            client = genai.Client(api_key=key, http_options=options)
            return _Session(
                client=client,
                sync_http=options["httpx_client"],
                async_http=options.get("httpx_async_client") or options["aiohttp_client"],
            )

        async def close(session: _Session) -> None:
            await session.client.aio.aclose()
            closing = session.async_http.aclose if hasattr(session.async_http, "aclose") else None
            await (closing or session.async_http.close)()
            session.sync_http.close()

        self._clients: LoopClients[_Session] = LoopClients(factory, close)

    async def aclose(self) -> None:
        """Close the client of the running event loop."""
        await self._clients.aclose()

    def config(self, request: ModelRequest) -> Obj:
        """The `GenerateContentConfig` as a dict."""
        s = request.settings
        system, _ = gemini_contents(request.messages)
        if request.instructions:
            system.insert(0, request.instructions)
        config: Obj = {}
        if system:
            config["system_instruction"] = "\n\n".join(system)
        if request.tools:
            declarations = [
                {"name": t.name, "description": t.description, **self._parameters(t.parameters)}
                for t in request.tools
            ]
            config["tools"] = [{"function_declarations": declarations}]
            mode: Obj = {"mode": "AUTO"}
            if request.tool_choice == "required":
                mode = {"mode": "ANY"}
            elif request.tool_choice == "none":
                mode = {"mode": "NONE"}
            elif request.tool_choice != "auto":
                mode = {"mode": "ANY", "allowed_function_names": [request.tool_choice]}
            config["tool_config"] = {"function_calling_config": mode}
        if s.builtin_tools:
            config["tools"] = config.get("tools", []) + gemini_builtin(s.builtin_tools)
        if request.output is not None:
            config.update(self._output(request.output))
        if s.thinking_budget is not None:
            config["thinking_config"] = {
                "thinking_budget": s.thinking_budget,
                "include_thoughts": True,
            }
        optional: dict[str, object] = {
            "temperature": s.temperature,
            "max_output_tokens": s.max_tokens,
            "top_p": s.top_p,
            "stop_sequences": list(s.stop_sequences) if s.stop_sequences else None,
            "seed": s.seed,
        }
        config.update({k: v for k, v in optional.items() if v is not None})
        http: Obj = {}
        if request.settings.extra_headers:
            http["headers"] = dict(request.settings.extra_headers)
        extra = {**self.settings.extra_body, **(request.settings.extra_body or {})}
        if extra:
            http["extra_body"] = extra
        if request.settings.timeout is not None:
            http["timeout"] = int(request.settings.timeout * 1000)
        if http:
            config["http_options"] = http
        return config

    def _output(self, output: OutputSpec) -> Obj:
        """The config fields that ask for JSON (any object: the MIME type alone)."""
        config: Obj = {"response_mime_type": "application/json"}
        if output.free_form:
            return config
        if self.profile.native_json_schema:
            config["response_json_schema"] = wire_schema(output.schema, "gemini_json_schema")
        else:
            config["response_schema"] = wire_schema(output.schema, "gemini")
        return config

    def _parameters(self, schema: dict[str, JsonValue]) -> Obj:
        """A function declaration's schema field: JSON Schema where the model takes it."""
        if self.profile.native_json_schema:
            return {"parameters_json_schema": wire_schema(schema, "gemini_json_schema")}
        if not schema.get("properties"):  # no parameters: the field is left out, as documented
            return {}  # (an OBJECT without properties is refused)
        return {"parameters": wire_schema(schema, self.profile.schema_dialect)}

    async def _stream_once(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        _, contents = gemini_contents(request.messages)
        self._check_turns(contents)
        client = (await self._clients.get()).client
        config = self.config(request)
        assembler = ResponseAssembler(provider="gemini", id_prefix=f"call_{uuid.uuid4().hex[:12]}")
        state = ReadState()
        models = client.aio.models
        if not self.settings.stream:
            # The answer comes back unparsed (the SDK's documented raw response) and is read
            # once, from its JSON; `_raw_answers` off reads the SDK's types (the old path).
            if self._raw_answers:
                config["should_return_http_response"] = True
            followed: set[bytes] = set()
            while True:
                response = await models.generate_content(
                    model=self.model, contents=contents, config=config
                )
                answer: object = response
                if self._raw_answers:
                    body = response.sdk_http_response.body
                    answer = json.loads(body) if body else {}  # the SDK reads none as `{}`
                for event in self._translate(self._chunk, answer, assembler, state):
                    yield event
                token = state.continuation if self._raw_answers else None
                if token is None or token in followed:
                    break  # finished (or a token already followed: no loop)
                followed.add(token)
                # Gemini stopped at its per-request limit: the next hop goes on from there.
                state.earlier = read_state_usage(state)
                state.usage = None
                config = {**config, "continuation_token": token}
            missing = state.unfinished()
            if missing is not None:
                msg = f"{self.name}: the stream ended {missing}"
                raise StreamInterrupted(msg, provider=self.provider)
        else:
            chunks = await models.generate_content_stream(
                model=self.model, contents=contents, config=config
            )
            async for event in self._read_stream(chunks, self._chunk, state, assembler, state):
                yield event
        yield self._completed(assembler, state)

    def _check_turns(self, contents: list[Obj]) -> None:
        """Refuse what Gemini would refuse with a bare SDK error, before sending it."""
        if not contents:
            msg = (
                f"{self.name}: the request has no messages; Gemini needs at least one user "
                "turn besides the system instruction"
            )
            raise InvalidRequest(msg, provider=self.provider)
        if contents[0]["role"] != "user":
            msg = (
                f"{self.name}: the conversation would start with a model turn (the user turn "
                "before it is empty); Gemini requires the first turn to be the user's"
            )
            raise InvalidRequest(msg, provider=self.provider)

    def _chunk(
        self, chunk: Any, assembler: ResponseAssembler, state: ReadState
    ) -> list[ModelStreamEvent]:
        """Read one answer or streamed chunk (wire JSON or the SDK's types) into `state`."""
        return read_chunk(chunk, assembler, state)

    def _completed(self, assembler: ResponseAssembler, state: ReadState) -> ResponseCompleted:
        stop = STOP.get(state.finish or "STOP", StopReason.OTHER)
        if state.blocked is not None or stop is StopReason.CONTENT_FILTER:
            reason = state.blocked or state.finish
            msg = f"{self.name}: the provider withheld the answer ({reason})"
            raise ContentFiltered(msg, provider=self.provider)
        usage = read_state_usage(state)
        details = read_details(state)
        if state.grounding:
            metadata = state.grounding.get("grounding_metadata")
            queries = metadata.get("web_search_queries") if isinstance(metadata, dict) else None
            if isinstance(queries, list) and queries:  # searches Google ran for the answer
                usage = dataclasses.replace(usage, web_searches=len(queries))
        response = assembler.build(
            usage=usage,
            stop_reason=stop,
            model_name=state.model,
            cost=self._cost(usage, state.model or self.model),
            provider_response_id=state.id,
            provider_details=details or None,
        )
        return ResponseCompleted(response=response)

    def _map_error(self, exc: Exception, started: bool) -> ModelError | None:
        from google.genai import errors

        if isinstance(exc, errors.APIError):
            response: Any = getattr(exc, "response", None)
            headers = dict(getattr(response, "headers", None) or {})
            body = cast(object, exc.details)  # pyright: ignore[reportUnknownMemberType] # the SDK leaves it untyped
            return error_from_status(exc.code, provider=self.provider, body=body, headers=headers)
        if isinstance(exc, json.JSONDecodeError):
            return parse_error(self.provider, exc.doc, f"invalid JSON from the server: {exc}")
        mapped = aiohttp_error(exc, provider=self.provider, started=started)
        if mapped is not None:
            return mapped
        if type(exc).__name__ == "ValidationError" and hasattr(exc, "errors"):
            # The SDK could not read the payload into its types (pydantic).
            raw = [
                {"loc": e.get("loc"), "input": e.get("input"), "type": e.get("type")}
                for e in cast(Any, exc).errors()
            ]
            return parse_error(self.provider, raw, f"unexpected response shape: {exc}")
        if isinstance(exc, errors.UnknownApiResponseError):
            raw = exc.__cause__.doc if isinstance(exc.__cause__, json.JSONDecodeError) else str(exc)
            return parse_error(self.provider, raw, f"invalid JSON from the server: {exc}")
        name = type(exc).__name__
        if "Timeout" in name:
            return ModelTimeout(f"{self.name}: no answer in time", provider=self.provider)
        if name in (
            "RemoteProtocolError",
            "ReadError",
            "ClientPayloadError",
            "ServerDisconnectedError",
        ):
            return StreamInterrupted(
                f"{self.name}: the stream broke off ({name})", provider=self.provider
            )
        if name in ("ConnectError", "ClientConnectorError"):
            return ProviderServerError(
                f"{self.name}: connection failed: {exc}", provider=self.provider
            )
        return None


def from_name(model: str) -> GeminiModel:
    """The `gemini:` (and `google:`) provider."""
    return GeminiModel(model)
