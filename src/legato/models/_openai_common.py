"""Shared by the two OpenAI modules: the client, error mapping and small translations."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from legato.exceptions import ModelError, ModelTimeout, ProviderServerError, StreamInterrupted
from legato.messages import DocumentPart, ImagePart, JsonValue, Usage
from legato.models._provider import (
    LoopClients,
    ProviderSettings,
    aiohttp_error,
    error_from_status,
    http_response,
    parse_error,
    read_api_key,
    redact,
    require,
    shared_ssl_context,
    transport_error,
)
from legato.models._transport import async_transport, use_aiohttp

__all__ = [
    "CITATIONS",
    "data_url",
    "http_response",
    "make_clients",
    "map_openai_error",
    "openai_post",
    "openai_usage",
    "stream_error",
    "stream_error_status",
]

CITATIONS = "citations"
"""The key of a message's `provider_details` that holds its citations (both OpenAI APIs)."""


def data_url(part: ImagePart | DocumentPart) -> str:
    """The part as a URL: its own, or a `data:` URL of its bytes."""
    if part.url is not None:
        return part.url
    return f"data:{part.media_type};base64,{part.base64}"


def make_clients(
    settings: ProviderSettings, *, provider: str, env_var: str | None, default_base_url: str | None
) -> LoopClients[Any]:
    """Per-loop `AsyncOpenAI` clients; the key is checked now, so a missing one fails early."""
    key = (
        read_api_key(settings.api_key, env_var=env_var, provider=provider)
        if env_var is not None
        else settings.api_key or "not-needed"
    )
    sdk = require("openai", "openai", "openai")
    http2 = require("httpx2", "openai", "openai")

    aiohttp = use_aiohttp(settings.transport, extra="openai")  # decided (and checked) now

    def factory() -> Any:
        # One `Timeout` object, not a number: the SDK hands the client's timeout to every
        # request it builds, and the HTTP client makes a `Timeout` of a bare number each time.
        timeout = http2.Timeout(settings.timeout if settings.timeout is not None else 600.0)
        if aiohttp:
            # The SDK's own aiohttp client, with the SDK's limits and legato's timeout and
            # (deferred) SSL context: only the connection pool and the socket work change.
            http = sdk.DefaultAioHttpClient(verify=shared_ssl_context(), timeout=timeout)
        else:
            transport = async_transport(
                http2, verify=shared_ssl_context(), limits=sdk.DEFAULT_CONNECTION_LIMITS
            )
            http = sdk.DefaultAsyncHttpxClient(
                verify=shared_ssl_context(), timeout=timeout, transport=transport
            )
        return sdk.AsyncOpenAI(
            http_client=http,
            api_key=key,
            base_url=settings.base_url or default_base_url,
            timeout=timeout,
            max_retries=0,
            default_headers=dict(settings.headers) or None,
        )

    async def close(client: Any) -> None:
        await client.close()

    return LoopClients(factory, close)


async def openai_post(
    client: Any,
    path: str,
    body: dict[str, Any],
    *,
    cast_to: type[Any],
    stream_cls: type[Any] | None,
    headers: Mapping[str, str] | None,
    request_timeout: float | None,
    stream: bool | None = None,
) -> Any:
    """POST `body` as built through the client's documented `post` method.

    The SDK still sends the request (auth, base URL, headers, timeouts, status errors) and
    parses the answer into its own types (`cast_to`, `stream_cls` when streaming). What it
    skips is the endpoint method's walk of the body against its request TypedDicts: legato
    builds the wire JSON itself, so that walk only cost time.

    With `cast_to` the HTTP client's `Response` class, the SDK returns the response itself
    (its documented way to undocumented answers), its body unread when `stream` is true.
    """
    options: dict[str, Any] = {"security": {"bearer_auth": True}}
    if headers:
        options["headers"] = dict(headers)
    if request_timeout is not None:
        options["timeout"] = request_timeout
    return await client.post(
        path,
        cast_to=cast_to,
        body=body,
        options=options,
        stream=stream if stream is not None else stream_cls is not None,
        stream_cls=stream_cls,
    )


def _field(raw: Any, name: str) -> Any:
    """`raw.name`, or `raw[name]` for usage that arrived as a plain mapping (Groq's x_groq)."""
    if type(raw) is dict or isinstance(raw, Mapping):  # JSON read raw is a dict: no ABC check
        return cast(Mapping[str, Any], raw).get(name)
    return getattr(raw, name, None)


def _count(raw: Any, name: str) -> int:
    value = _field(raw, name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def openai_usage(raw: Any, *, input_key: str, output_key: str) -> Usage:
    """Usage from an OpenAI usage object (Chat: prompt/completion; Responses: input/output).

    Fields a server adds (Groq's timings, OpenRouter's `cost`) are ignored; a count that is
    missing or not an integer counts as 0.
    """
    if raw is None:
        return Usage(requests=1)
    input_details = _field(raw, f"{input_key}_details")
    output_details = _field(raw, f"{output_key}_details")
    return Usage(
        input_tokens=_count(raw, input_key),
        output_tokens=_count(raw, output_key),
        cache_read_tokens=_count(input_details, "cached_tokens") if input_details else 0,
        reasoning_tokens=_count(output_details, "reasoning_tokens") if output_details else 0,
        requests=1,
    )


_STREAM_ERROR_STATUS: Mapping[str, int] = {
    "invalid_request_error": 400,
    "invalid_value": 400,
    "invalid_prompt": 400,  # Responses: the prompt was refused
    "invalid_image": 400,
    "tool_use_failed": 400,
    "json_validate_failed": 400,
    "context_length_exceeded": 400,
    "authentication_error": 401,
    "invalid_api_key": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "overloaded_error": 529,
    "overloaded": 503,
    "server_error": 500,
    "api_error": 500,
}
"""HTTP statuses for the error `code`/`type` strings servers put in in-stream error objects."""


def stream_error_status(body: object) -> int | None:
    """The HTTP status an in-stream error object stands for, from its code; None if unknown.

    OpenRouter puts the upstream status in `code` (a number); OpenAI and Groq give `code`
    and `type` strings (`rate_limit_exceeded`, `invalid_request_error`, ...).
    """
    if not isinstance(body, Mapping):
        return None
    error = cast(Mapping[str, Any], body)
    inner = error.get("error")
    if isinstance(inner, Mapping):
        error = cast(Mapping[str, Any], inner)
    for key in ("code", "status"):
        value = error.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
            return value
        if isinstance(value, str) and value.isdigit() and 100 <= int(value) < 600:
            return int(value)
    for key in ("code", "type"):
        value = error.get(key)
        if isinstance(value, str) and value in _STREAM_ERROR_STATUS:
            return _STREAM_ERROR_STATUS[value]
    return None


def stream_error(body: object, *, provider: str, text: str) -> ModelError:
    """The legato error for an error event inside a 200 stream, classified by its code.

    A client error (bad request, context too long, auth, unknown model) is the same typed,
    non-retryable error as its HTTP twin; a rate limit or overload is retryable as such; a
    server error or an unknown code is `StreamInterrupted` (retryable unless events were
    already delivered).
    """
    status = stream_error_status(body)
    if status is not None and (status < 500 or status in (503, 529)):
        return error_from_status(status, provider=provider, body=body)
    return StreamInterrupted(
        f"{provider}: error inside the stream: {text}", provider=provider, body=redact(body)
    )


def map_openai_error(exc: Exception, *, provider: str, started: bool) -> ModelError | None:
    """The legato error for an exception raised by the openai SDK (or its JSON parsing)."""
    import openai as sdk

    if isinstance(exc, sdk.APIStatusError):
        return error_from_status(
            exc.status_code, provider=provider, body=exc.body, headers=dict(exc.response.headers)
        )
    if isinstance(exc, sdk.APIConnectionError):  # its subclass APITimeoutError included
        mapped = aiohttp_error(exc, provider=provider, started=started)
        if mapped is not None:
            return mapped
    if isinstance(exc, sdk.APITimeoutError):
        return ModelTimeout(f"{provider}: no answer in time", provider=provider)
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__
        if isinstance(cause, Exception):
            mapped = transport_error(cause, provider=provider, started=started)
            if mapped is not None:
                return mapped
        if started:
            return StreamInterrupted(f"{provider}: the stream broke off", provider=provider)
        return ProviderServerError(f"{provider}: connection failed: {exc}", provider=provider)
    if isinstance(exc, sdk.APIError):
        # An error event inside a stream: the SDK raises APIError with the event's body.
        return stream_error(getattr(exc, "body", None), provider=provider, text=str(exc))
    if isinstance(exc, json.JSONDecodeError):
        return parse_error(provider, exc.doc, f"invalid JSON from the server: {exc}")
    return None


def merge_body(body: dict[str, Any], extra: Mapping[str, JsonValue] | None) -> dict[str, Any]:
    """`body` with `extra` fields merged in (extra wins)."""
    if extra:
        body.update(extra)
    return body
