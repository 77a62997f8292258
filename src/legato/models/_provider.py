"""What every provider module shares: settings, keys, clients, errors, redaction, prices.

A provider module subclasses `ProviderModel` and implements `_stream_once` (one attempt, as
neutral events) and `_map_error` (its SDK's exceptions to legato's tree). Retries, the
"HTTP 200 but nothing came" check and cost are handled here once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import ssl
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import field
from functools import cache, lru_cache
from typing import Any, Generic, Literal, Protocol, TypeVar, cast

from legato._values import value_class
from legato.exceptions import (
    AuthenticationFailed,
    ContentFiltered,
    ContextLengthExceeded,
    InvalidRequest,
    MissingCredentials,
    MissingDependency,
    ModelError,
    ModelOverloaded,
    ModelTimeout,
    ProviderServerError,
    RateLimited,
    ResponseParseError,
    StreamInterrupted,
)
from legato.messages import JsonValue, Usage
from legato.models._base import ModelProfile, ModelRequest, ModelStreamEvent, ResponseCompleted
from legato.models._features import check_request, tools_for
from legato.models._prices import Counts, price, prices_installed
from legato.models.retry import NO_RETRY, RetryPolicy, retry_after

__all__ = [
    "ProviderModel",
    "ReadState",
    "aiohttp_error",
    "ProviderSettings",
    "cost_in_dollars",
    "error_from_status",
    "http_response",
    "json_array",
    "json_object",
    "parse_error",
    "read_api_key",
    "redact",
    "require",
    "shared_ssl_context",
    "transport_error",
]

T = TypeVar("T")


@value_class
class ProviderSettings:
    """How to reach a provider. Every field is optional; defaults come from the provider."""

    api_key: str | None = None
    """The key; when None it is read from the provider's environment variable."""
    base_url: str | None = None
    timeout: float | None = None
    """Seconds any one network step may take: connecting, sending, and each read of the
    answer (a slow stream whose chunks keep coming is not cut off)."""
    headers: Mapping[str, str] = field(default_factory=lambda: {})
    """Extra HTTP headers sent with every request."""
    extra_body: Mapping[str, JsonValue] = field(default_factory=lambda: {})
    """Fields merged into every request body unchanged."""
    retry: RetryPolicy | None = field(default_factory=RetryPolicy)
    """Retry policy for failed calls; None never retries."""
    stream: bool = True
    """Stream on the wire; False sends one request and converts the whole answer to events."""
    transport: Literal["auto", "aiohttp", "httpx"] = "auto"
    """The async client's HTTP transport. `auto`: the SDK's aiohttp transport when aiohttp
    is installed (the provider extras install it) and no proxy is set in the environment,
    else the SDK's httpx2 transport; `aiohttp` insists (`MissingDependency` without it);
    `httpx` never uses aiohttp. Timeouts, retries (legato's), TLS and errors are the same on
    both."""

    def overridden(self, *, api_key: str | None, base_url: str | None) -> ProviderSettings:
        """These settings with an explicit key and base URL, where given, taking precedence."""
        if api_key is None and base_url is None:
            return self
        return dataclasses.replace(
            self,
            api_key=api_key if api_key is not None else self.api_key,
            base_url=base_url if base_url is not None else self.base_url,
        )


def require(module: str, package: str, extra: str) -> Any:
    """Import an optional dependency, or raise `MissingDependency` naming the extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependency(package, extra) from exc


def read_api_key(explicit: str | None, *, env_var: str, provider: str) -> str:
    """The explicit key, or the environment variable's, or `MissingCredentials`."""
    key = explicit if explicit is not None else os.environ.get(env_var)
    if not key:
        raise MissingCredentials(provider, env_var)
    return key


@cache
def shared_ssl_context(module: str = "httpx2") -> ssl.SSLContext:
    """One SSL context per process for every client legato makes, built on first TLS use.

    Building the real one loads the CA bundle (55-130 ms). The context handed to clients
    defers that to the first TLS connection, so a client of a plain `http://` server (a
    local model, the simulator) never pays it; once built, it is shared by every client of
    the process (`run_sync` makes a client per event loop).
    """
    return _DeferredSSLContext(module)


@cache
def _built_ssl_context(module: str) -> ssl.SSLContext:
    """The real context: `module.create_ssl_context()` (httpx or httpx2), built once."""
    context: ssl.SSLContext = require(module, module, "openai").create_ssl_context()
    return context


class _DeferredSSLContext(ssl.SSLContext):
    """An SSL context whose TLS work is done by the shared real one, built when first needed.

    Clients only hand it to the TLS layer, which calls `set_alpn_protocols` and then
    `wrap_bio` (asyncio, anyio) or `wrap_socket` (sync clients); those go to the real
    context. Settings read before then are the defaults of `PROTOCOL_TLS_CLIENT`
    (certificates and host names checked).
    """

    _module: str

    def __new__(cls, module: str) -> _DeferredSSLContext:
        context = super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)
        context._module = module
        return context

    def __init__(self, module: str) -> None:
        super().__init__()

    def built(self) -> ssl.SSLContext:
        """The real context (built now if this is the first TLS use in the process)."""
        return _built_ssl_context(self._module)

    def set_alpn_protocols(self, alpn_protocols: Iterable[str]) -> None:
        self.built().set_alpn_protocols(alpn_protocols)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        return self.built().wrap_bio(*args, **kwargs)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        return self.built().wrap_socket(*args, **kwargs)


# -- clients that belong to one event loop -----------------------------------------------------


class LoopClients(Generic[T]):
    """One async client per running event loop, closed when that loop shuts down.

    Async HTTP clients hold connections bound to the loop that opened them; `run_sync` may
    run on the main thread's loop or the background one while other code runs on its own.
    A small async generator registered on each loop closes the client during the loop's
    `shutdown_asyncgens` (which `asyncio.run` and the sync facade's exit call); a model
    dropped while its loop lives on has its client closed there (and a loop of the sync
    facade about to close lets those closings finish first: `finish_closings`).
    """

    def __init__(self, factory: Callable[[], T], close: Callable[[T], Awaitable[None]]) -> None:
        self._factory = factory
        self._close = close
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[T, object]] = (
            weakref.WeakKeyDictionary()
        )

    async def get(self) -> T:
        """The client of the running loop, made on first use."""
        loop = asyncio.get_running_loop()
        entry = self._clients.get(loop)
        if entry is not None:
            return entry[0]
        for old in [other for other in self._clients if other.is_closed()]:
            del self._clients[old]  # a loop closed without shutting down its generators
        client = self._factory()
        keeper = self._keeper(client, loop)
        await anext(keeper)
        self._clients[loop] = (client, keeper)
        # A long-lived loop (the sync facade's) outlives models: when this model is dropped,
        # its client is closed on its loop instead of leaving open connections to the GC.
        closer = weakref.finalize(self, _close_on_loop, loop, self._close, client)
        # Not at interpreter exit: the loop's own exit (shutting its generators down, the
        # keeper above among them) closes the client then, and a closing scheduled from
        # here would still be pending (aiohttp waits for its sockets) when the loop closes.
        closer.atexit = False
        return client

    async def _keeper(self, client: T, loop: asyncio.AbstractEventLoop) -> AsyncIterator[None]:
        try:
            yield
        finally:
            # The entry (which may keep the loop alive through the client) goes first.
            self._clients.pop(loop, None)
            await self._close(client)

    async def aclose(self) -> None:
        """Close the running loop's client now."""
        entry = self._clients.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await cast(Any, entry[1]).aclose()


def _close_on_loop(
    loop: asyncio.AbstractEventLoop, close: Callable[[Any], Awaitable[None]], client: object
) -> None:
    """Close a client on its own loop, from whatever thread collected its owner.

    A loop that is open but not running now (the main thread's sync loop between calls)
    runs the closing when it next runs, or when it shuts down.
    """
    if loop.is_closed():
        return

    def schedule() -> None:
        task = loop.create_task(cast(Any, close(client)))
        _CLOSING.add(task)
        task.add_done_callback(_CLOSING.discard)

    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
        loop.call_soon_threadsafe(schedule)


_CLOSING: set[asyncio.Task[Any]] = set()
"""Client closings in flight (kept referenced until they finish)."""


_CLOSING_WAIT = 5.0
"""Seconds a loop about to close waits for its clients' closings."""


async def finish_closings() -> None:
    """Let the client closings scheduled on the running loop finish; for a loop about to close.

    A model dropped while its loop was idle (the main thread's sync loop between calls) had
    its client's closing scheduled there (`_close_on_loop`); closing the loop before that
    closing ends would leave it pending ("Task was destroyed but it is pending!" at exit) and
    the client's sockets to the collector. One turn of the loop starts what was scheduled;
    then the closings run, for `_CLOSING_WAIT` seconds at most.
    """
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    closing = [task for task in _CLOSING if task.get_loop() is loop]
    if closing:
        await asyncio.wait(closing, timeout=_CLOSING_WAIT)


# -- reading answers from their JSON -----------------------------------------------------------


def json_object(value: object) -> dict[str, Any]:
    """A JSON object of an answer; anything else is a payload of the wrong shape.

    That raises `TypeError`, which `_translate` turns into a `ResponseParseError`.
    """
    if not isinstance(value, dict):
        msg = f"expected a JSON object, got {type(value).__name__}"
        raise TypeError(msg)
    return cast(dict[str, Any], value)


def json_array(value: object) -> list[Any]:
    """A JSON array of an answer (absent or null: empty); anything else is `TypeError`."""
    if value is None:
        return []
    if not isinstance(value, list):
        msg = f"expected a JSON array, got {type(value).__name__}"
        raise TypeError(msg)
    return cast(list[Any], value)


# -- calling SDK methods -----------------------------------------------------------------------


@cache
def http_response() -> type[Any]:
    """httpx2's `Response`: as `cast_to` of an SDK's `post`, the answer comes back unread.

    The OpenAI and Anthropic SDKs document `cast_to=httpx.Response` as the way to an answer
    they do not model; legato uses it for every answer and reads the JSON itself, once.
    """
    from httpx2 import Response

    return Response


# -- errors ------------------------------------------------------------------------------------

_SECRET_KEY = re.compile(
    r"(api[-_]?key|authorization|x-api-key|x-goog-api-key|secret|token|password)", re.I
)
_SECRET_VALUE = re.compile(
    r"\b(sk-[A-Za-z0-9_-]{6,}|sk_[A-Za-z0-9_-]{6,}|AIza[0-9A-Za-z_-]{10,}|Bearer\s+\S+)"
)
_CONTEXT = re.compile(
    r"context[_ ]length|prompt is too long|maximum context|too many tokens|"
    r"exceeds the maximum number of tokens|exceeds the context|input length exceeds",
    re.I,
)
_FILTERED = re.compile(r"content[_ ]filter|content[_ ]policy|safety|flagged for moderation", re.I)


def redact(value: object) -> object:
    """A copy of a payload with keys and secret-looking strings replaced by `[redacted]`."""
    if isinstance(value, Mapping):
        items = cast(Mapping[object, object], value).items()
        return {
            k: "[redacted]" if isinstance(k, str) and _SECRET_KEY.search(k) else redact(v)
            for k, v in items
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in cast(list[object], value)]
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        return _SECRET_VALUE.sub("[redacted]", value)
    return value


_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def retry_delay(body: object) -> float | None:
    """Seconds from a `google.rpc.RetryInfo` in an error body (`"retryDelay": "17s"`)."""
    error = cast(Mapping[str, object], body).get("error") if isinstance(body, Mapping) else None
    details = (
        cast(Mapping[str, object], error).get("details") if isinstance(error, Mapping) else None
    )
    for item in cast(list[object], details) if isinstance(details, list) else []:
        delay = (
            cast(Mapping[str, object], item).get("retryDelay")
            if isinstance(item, Mapping)
            else None
        )
        match = _DELAY.match(delay) if isinstance(delay, str) else None
        if match:
            return float(match[1])
    return None


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (a number or an HTTP date)."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lower:
        try:
            return float(lower["retry-after-ms"]) / 1000
        except ValueError:
            pass
    raw = lower.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        import email.utils

        parsed = email.utils.parsedate_to_datetime(raw) if raw else None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


def error_text(body: object) -> str:
    """The human-readable message and code of a provider error body, as one string."""
    if isinstance(body, Mapping):
        body_map = cast(Mapping[str, object], body)
        inner = body_map.get("error", body_map)
        if isinstance(inner, Mapping):
            inner_map = cast(Mapping[str, object], inner)
            parts = [inner_map.get(k) for k in ("message", "code", "type", "status")]
            return " ".join(str(p) for p in parts if p)
        return str(inner)
    return "" if body is None else str(body)


_LINE_LIMIT = 300


def one_line(text: str) -> str:
    """A provider's error text as one line: its first line, and how much more the body holds.

    Some servers put a whole validation report or a traceback in the message (llama-cpp-
    python's server: thirty lines for a bad message); the error's `body` keeps it whole.
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    first = lines[0] if lines else ""
    rest = len(lines) - 1
    if len(first) > _LINE_LIMIT:
        first = first[: _LINE_LIMIT - 1] + "…"
    if rest:
        first += f" (+{rest} more line{'s' if rest > 1 else ''} in the error's body)"
    return first


def error_from_status(
    status: int,
    *,
    provider: str,
    body: object = None,
    headers: Mapping[str, str] | None = None,
    message: str | None = None,
) -> ModelError:
    """The legato error for an HTTP error answer (status, body, headers)."""
    text = message or error_text(body) or f"HTTP {status}"
    detail = f"{provider}: {one_line(text)}"
    safe = redact(body)
    kwargs: dict[str, Any] = {"provider": provider, "status_code": status, "body": safe}
    if status == 429:
        wait = retry_after_seconds(headers)
        limited = RateLimited(
            detail, retry_after=wait if wait is not None else retry_delay(body), **kwargs
        )
        if "insufficient_quota" in text:  # OpenAI: billing exhausted; waiting will not help
            limited.retryable = False
        return limited
    if status in (503, 529) or "overloaded" in text.lower():
        return ModelOverloaded(detail, **kwargs)
    if status == 408:
        return ModelTimeout(detail, **kwargs)
    if status >= 500:
        return ProviderServerError(detail, **kwargs)
    if status == 403 and _FILTERED.search(text):  # OpenRouter: 403 when moderation flags input
        return ContentFiltered(detail, **kwargs)
    if status in (401, 403):
        return AuthenticationFailed(detail, **kwargs)
    if _CONTEXT.search(text):
        return ContextLengthExceeded(detail, **kwargs)
    if _FILTERED.search(text):
        return ContentFiltered(detail, **kwargs)
    return InvalidRequest(detail, **kwargs)


def _transport_modules() -> list[Any]:
    import importlib

    modules: list[Any] = []
    for name in ("httpx", "httpx2"):
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            continue
    return modules


def aiohttp_error(exc: BaseException, *, provider: str, started: bool) -> ModelError | None:
    """The legato error for an aiohttp failure (raised, or the cause of what was raised).

    The SDKs' aiohttp transports re-raise aiohttp's errors as httpx2 ones with the original
    as the cause, some under a misleading name (a server that hangs up becomes a connect
    timeout); this reads the original, so both transports give the same errors: a timeout
    is `ModelTimeout`, a refused connection `ProviderServerError`, a connection lost or a
    body cut short `StreamInterrupted`. None when aiohttp is not loaded or not involved.
    """
    import sys

    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is None:
        return None
    error: BaseException | None = exc
    for _ in range(8):  # a cause chain can loop back on itself
        if error is None or isinstance(error, aiohttp.ClientError):
            break
        error = error.__cause__
    if not isinstance(error, aiohttp.ClientError):
        return None
    if isinstance(error, aiohttp.ServerTimeoutError | TimeoutError):
        return ModelTimeout(f"{provider}: no answer in time", provider=provider)
    if isinstance(error, aiohttp.ClientConnectorError) and not started:
        return ProviderServerError(f"{provider}: connection failed: {error}", provider=provider)
    if isinstance(error, aiohttp.ClientConnectionError | aiohttp.ClientPayloadError):
        return StreamInterrupted(f"{provider}: the stream broke off: {error}", provider=provider)
    return None


def transport_error(exc: Exception, *, provider: str, started: bool) -> ModelError | None:
    """The legato error for an httpx (or httpx2, or aiohttp) transport failure, else None."""
    mapped = aiohttp_error(exc, provider=provider, started=started)
    if mapped is not None:
        return mapped
    for module in _transport_modules():
        if isinstance(exc, module.TimeoutException):
            return ModelTimeout(f"{provider}: no answer in time", provider=provider)
        if isinstance(exc, module.ConnectError) and not started:
            return ProviderServerError(f"{provider}: connection failed: {exc}", provider=provider)
        if isinstance(exc, module.TransportError):
            return StreamInterrupted(f"{provider}: the stream broke off: {exc}", provider=provider)
    return None


def parse_error(provider: str, raw: object, reason: str) -> ResponseParseError:
    """A `ResponseParseError` keeping the (redacted) raw payload."""
    return ResponseParseError(f"{provider}: {reason}", provider=provider, body=redact(raw))


# -- prices ------------------------------------------------------------------------------------


def cost_in_dollars(usage: Usage, *, model: str, provider_id: str | None) -> float | None:
    """The price of one call from the bundled `genai-prices` data, or None when unknown.

    Searches the provider ran itself (`Usage.web_searches`) are priced per search by the
    same data, model by model ($10 per 1,000 for Anthropic's and OpenAI's current models).
    """
    if not prices_installed() or not model or provider_id is None:
        return None
    return _price(model, provider_id, _counts(usage))


def cache_savings(usage: Usage, *, model: str, provider_id: str | None) -> float:
    """Dollars the prompt cache saved on a call (0 without cached tokens or known prices).

    That is the call's price with every prompt token billed at the plain input rate, less
    its actual price.
    """
    if not (usage.cache_read_tokens or usage.cache_write_tokens):
        return 0.0
    if not prices_installed() or provider_id is None or not model:
        return 0.0
    actual = _price(model, provider_id, _counts(usage))
    if actual is None:
        return 0.0
    searches = usage.web_searches
    uncached = _price(model, provider_id, (usage.input_tokens, usage.output_tokens, 0, 0, searches))
    return 0.0 if uncached is None else uncached - actual


def _counts(usage: Usage) -> Counts:
    """What a price depends on: input, output, cache read and cache write tokens, searches."""
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.web_searches,
    )


@lru_cache(maxsize=4096)
def _price(model: str, provider_id: str, counts: Counts) -> float | None:
    # a repeated (model, counts) pair is answered from this cache
    return price(model, provider_id, counts)


def _plain(raw: object) -> object:
    """An SDK object as plain JSON-like data, for error reports."""
    dump = getattr(raw, "model_dump", None)
    if dump is None:
        return raw
    try:
        return cast(object, dump(mode="json", warnings=False))
    except Exception:  # a report must never fail on a broken payload
        return repr(raw)


# -- the base class --------------------------------------------------------------------------


class ReadState(Protocol):
    """What a provider's translator gathers while reading one streamed answer."""

    seen: bool
    """At least one event (chunk) came."""

    def unfinished(self) -> str | None:
        """None when the answer ended as its API says it must, else how it fell short.

        The text (`"before message_stop"`) goes into the `StreamInterrupted` raised for it.
        """
        ...


class ProviderModel:
    """A model behind one wire API; subclasses implement one attempt and the error mapping."""

    provider: str = "provider"
    """The provider prefix of model strings (`openai`, `anthropic`, ...)."""
    price_provider: str | None = None
    """The provider id in `genai-prices`, or None when calls are free / prices unknown."""

    def __init__(self, model: str, *, settings: ProviderSettings, profile: ModelProfile) -> None:
        self.model = model
        self.settings = settings
        self._profile = profile

    @property
    def name(self) -> str:
        """`provider:model`."""
        return f"{self.provider}:{self.model}"

    @property
    def profile(self) -> ModelProfile:
        """What this model can do."""
        return self._profile

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Send the request, retrying as the settings say; yields events, last `ResponseCompleted`."""
        return self._attempts(request, self.settings.retry or NO_RETRY)

    def _mapped(self, exc: Exception, started: bool) -> ModelError | None:
        return self._map_error(exc, started) or transport_error(
            exc, provider=self.provider, started=started
        )

    async def _attempts(
        self, request: ModelRequest, policy: RetryPolicy
    ) -> AsyncIterator[ModelStreamEvent]:
        """The request checked, then `_stream_once` per attempt (`retrying_stream`'s rule).

        One generator between the provider's reader and the run: the check, the retries,
        the completeness check and the cache savings are done here, not in layers of their
        own that each event would pass through.
        """
        check_request(self.provider, self.profile, request)  # before anything is sent
        request = tools_for(request, self.profile)
        attempt = 1
        while True:
            started = completed = False
            stream = self._stream_once(request)
            try:
                async for event in stream:
                    started = True
                    if isinstance(event, ResponseCompleted):
                        completed = True
                        event = self._with_savings(event)
                    yield event
                if not completed:
                    msg = f"{self.name}: the stream ended without a complete response"
                    raise StreamInterrupted(msg, provider=self.provider)
                return
            except Exception as exc:
                failure = exc
            finally:
                aclose = getattr(stream, "aclose", None)  # a provider's is an async generator
                if aclose is not None:
                    await aclose()
            await retry_after(
                failure, started=started, policy=policy, attempt=attempt, map_error=self._mapped
            )
            attempt += 1

    def _stream_once(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        raise NotImplementedError

    def _map_error(self, exc: Exception, started: bool) -> ModelError | None:
        """Map a foreign exception to legato's tree; None lets it through."""
        return None

    def _translate(
        self, translate: Callable[..., list[ModelStreamEvent]], raw: Any, *args: Any
    ) -> list[ModelStreamEvent]:
        """`translate(raw, *args)`; a payload of an unexpected shape becomes a typed error."""
        try:
            return translate(raw, *args)
        except (AttributeError, KeyError, TypeError, IndexError, ValueError) as exc:
            reason = f"unexpected response shape ({type(exc).__name__}: {exc})"
            raise parse_error(self.provider, _plain(raw), reason) from exc

    async def _read_stream(
        self,
        events: AsyncIterator[Any],
        translate: Callable[..., list[ModelStreamEvent]],
        state: ReadState,
        *args: Any,
        close: Callable[[], Awaitable[object]] | None = None,
    ) -> AsyncIterator[ModelStreamEvent]:
        """Read a streamed answer: each event through `translate(event, *args)`, then check it ended.

        The one reading loop of every provider: `translate` is the provider's event
        translator (it fills `state` and returns the neutral events to yield). An exception
        that breaks the stream off becomes the legato error for it (`_broken`); `close`
        (the HTTP response's or the SDK stream's) runs however the reading ends. A stream
        with no event at all, or one that stopped before its API's end (`state.unfinished()`),
        raises `StreamInterrupted`.
        """
        try:
            async for raw in events:
                state.seen = True
                for event in self._translate(translate, raw, *args):
                    yield event
        except Exception as exc:
            raise self._broken(exc) from exc
        finally:
            if close is not None:
                await close()
        if not state.seen:
            msg = f"{self.name}: HTTP 200 but the stream had no events"
            raise StreamInterrupted(msg, provider=self.provider)
        missing = state.unfinished()
        if missing is not None:
            msg = f"{self.name}: the stream ended {missing}"
            raise StreamInterrupted(msg, provider=self.provider)

    def _broken(self, exc: Exception) -> Exception:
        """What to raise for an exception that broke off a started response."""
        if isinstance(exc, ModelError):
            return exc
        mapped = self._map_error(exc, True) or transport_error(
            exc, provider=self.provider, started=True
        )
        return exc if mapped is None else mapped

    def _with_savings(self, event: ResponseCompleted) -> ResponseCompleted:
        """The response with what the prompt cache saved put into its usage."""
        response = event.response
        saved = cache_savings(
            response.usage,
            model=response.model_name or self.model,
            provider_id=self.price_provider,
        )
        if not saved:
            return event
        usage = dataclasses.replace(response.usage, cache_savings=saved)
        return ResponseCompleted(response=dataclasses.replace(response, usage=usage))

    def price(self, usage: Usage) -> float | None:
        """Dollars a call with this usage would cost, from the bundled price table.

        None when the table does not know the model (or the provider is not priced).
        Budgets use it to reserve a call's worst case without being given prices.
        """
        return cost_in_dollars(usage, model=self.model, provider_id=self.price_provider)

    def _cost(self, usage: Usage, model_name: str) -> float | None:
        return cost_in_dollars(
            usage, model=model_name or self.model, provider_id=self.price_provider
        )
