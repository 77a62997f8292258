"""Shared by the two OpenAI modules: the client, error mapping and small translations."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from legato.exceptions import ModelError, ModelTimeout, ProviderServerError, StreamInterrupted
from legato.messages import DocumentPart, ImagePart, JsonValue, Usage
from legato.models._provider import (
    LoopClients,
    ProviderSettings,
    error_from_status,
    parse_error,
    read_api_key,
    require,
    shared_ssl_context,
    transport_error,
)
from legato.models._transport import async_transport

__all__ = ["data_url", "make_clients", "map_openai_error", "openai_post", "openai_usage"]


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

    def factory() -> Any:
        timeout = settings.timeout if settings.timeout is not None else 600.0
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
            timeout=settings.timeout if settings.timeout is not None else 600.0,
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
) -> Any:
    """POST `body` as built through the client's documented `post` method.

    The SDK still sends the request (auth, base URL, headers, timeouts, status errors) and
    parses the answer into its own types (`cast_to`, `stream_cls` when streaming). What it
    skips is the endpoint method's walk of the body against its request TypedDicts: legato
    builds the wire JSON itself, so that walk only cost time.
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
        stream=stream_cls is not None,
        stream_cls=stream_cls,
    )


def openai_usage(raw: Any, *, input_key: str, output_key: str) -> Usage:
    """Usage from an OpenAI usage object (Chat: prompt/completion; Responses: input/output)."""
    if raw is None:
        return Usage(requests=1)
    input_details = getattr(raw, f"{input_key}_details", None)
    output_details = getattr(raw, f"{output_key}_details", None)
    return Usage(
        input_tokens=getattr(raw, f"{input_key}", 0) or 0,
        output_tokens=getattr(raw, f"{output_key}", 0) or 0,
        cache_read_tokens=getattr(input_details, "cached_tokens", 0) or 0,
        reasoning_tokens=getattr(output_details, "reasoning_tokens", 0) or 0,
        requests=1,
    )


def map_openai_error(exc: Exception, *, provider: str, started: bool) -> ModelError | None:
    """The legato error for an exception raised by the openai SDK (or its JSON parsing)."""
    import openai as sdk

    if isinstance(exc, sdk.APIStatusError):
        return error_from_status(
            exc.status_code, provider=provider, body=exc.body, headers=dict(exc.response.headers)
        )
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
        body = getattr(exc, "body", None)
        err = error_from_status(500, provider=provider, body=body)
        return (
            err
            if not isinstance(err, ProviderServerError)
            else StreamInterrupted(
                f"{provider}: error inside the stream: {exc}", provider=provider, body=err.body
            )
        )
    if isinstance(exc, json.JSONDecodeError):
        return parse_error(provider, exc.doc, f"invalid JSON from the server: {exc}")
    return None


def merge_body(body: dict[str, Any], extra: Mapping[str, JsonValue] | None) -> dict[str, Any]:
    """`body` with `extra` fields merged in (extra wins)."""
    if extra:
        body.update(extra)
    return body
