"""The SDKs' aiohttp transports: chosen by default, fallen back from, and equal in behaviour.

Each scenario runs on both transports (`transport="aiohttp"` and `"httpx"`) against local
servers on 127.0.0.1: TLS with a CA of the test's own, a refused certificate, a server that
hangs up before answering, and the choice itself (aiohttp missing, a proxy configured).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import httpx2
import pytest
import trustme

from legato import Agent
from legato.exceptions import MissingDependency, ModelError, ProviderServerError, StreamInterrupted
from legato.models import _openai_common as common
from legato.models import _provider as provider
from legato.models import _transport
from legato.models._provider import ProviderSettings
from legato.models._transport import AsyncioBackend
from legato.models.anthropic import AnthropicModel
from legato.models.gemini import GeminiModel
from legato.models.openai_chat import OpenAIChatModel
from legato.models.openai_responses import OpenAIResponsesModel

TRANSPORTS = pytest.mark.parametrize("transport", ["aiohttp", "httpx"])

COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "over TLS"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}


class ChatServer:
    """Answers every request with one chat completion (keep-alive), or hangs up on cue."""

    def __init__(self, *, hang_up: bool = False) -> None:
        self.hang_up = hang_up
        self.url = ""
        self._server: asyncio.Server | None = None

    async def start(self, tls: ssl.SSLContext | None = None) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                length = next(
                    (int(x.split(":")[1]) for x in lines if x.lower().startswith("content-length")),
                    0,
                )
                await reader.readexactly(length)
                if self.hang_up:
                    break
                payload = json.dumps(COMPLETION).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n" % len(payload) + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


def _chat(url: str, transport: Any) -> OpenAIChatModel:
    settings = ProviderSettings(transport=transport, retry=None, stream=False, timeout=5)
    return OpenAIChatModel("gpt-4o", base_url=f"{url}/v1", api_key="k", settings=settings)


async def _run(model: OpenAIChatModel) -> str:
    try:
        return (await Agent(model).run("hi")).output
    finally:
        await model.aclose()


# -- which transport --------------------------------------------------------------------------


async def test_by_default_every_sdk_client_is_on_its_aiohttp_transport() -> None:
    chat = OpenAIChatModel("gpt-4o", api_key="k")
    responses = OpenAIResponsesModel("gpt-4.1", api_key="k")
    anthropic = AnthropicModel("claude-sonnet-4-5", api_key="k")
    gemini = GeminiModel("gemini-2.5-flash", api_key="k")
    sdk_clients = [
        (await chat._clients.get())._client,
        (await responses._clients.get())._client,
        (await anthropic._clients.get())._client,
    ]
    assert [type(c._transport).__name__ for c in sdk_clients] == ["AiohttpTransport"] * 3
    # the deferred shared context goes to aiohttp as it is (nothing built for plain http)
    assert {c._transport.ssl_context for c in sdk_clients} == {provider.shared_ssl_context()}
    session = (await gemini._clients.get()).async_http
    assert isinstance(session, aiohttp.ClientSession)
    for model in (chat, responses, anthropic, gemini):
        await model.aclose()
    assert session.closed


async def test_httpx_keeps_the_sdks_httpx2_client() -> None:
    # the twin: the same models with `transport="httpx"` are not on aiohttp
    on_httpx = ProviderSettings(transport="httpx")
    chat = OpenAIChatModel("gpt-4o", api_key="k", settings=on_httpx)
    gemini = GeminiModel("gemini-2.5-flash", api_key="k", settings=on_httpx)
    client = (await chat._clients.get())._client
    assert isinstance(client._transport._pool._network_backend, AsyncioBackend)
    assert isinstance((await gemini._clients.get()).async_http, httpx2.AsyncClient)
    await chat.aclose()
    await gemini.aclose()


@pytest.fixture
def no_aiohttp(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp hidden, as when the provider extras were not installed."""
    monkeypatch.setattr(_transport, "aiohttp_installed", lambda: False)


@pytest.mark.usefixtures("no_aiohttp")
async def test_without_aiohttp_auto_falls_back_to_httpx2() -> None:
    chat = OpenAIChatModel("gpt-4o", api_key="k")
    client = (await chat._clients.get())._client
    assert isinstance(client._transport._pool._network_backend, AsyncioBackend)
    await chat.aclose()


def _make(kind: str, settings: ProviderSettings) -> object:
    if kind == "chat":
        return OpenAIChatModel("gpt-4o", api_key="k", settings=settings)
    if kind == "responses":
        return OpenAIResponsesModel("gpt-4.1", api_key="k", settings=settings)
    if kind == "anthropic":
        return AnthropicModel("claude-sonnet-4-5", api_key="k", settings=settings)
    return GeminiModel("gemini-2.5-flash", api_key="k", settings=settings)


@pytest.mark.usefixtures("no_aiohttp")
@pytest.mark.parametrize(
    ("kind", "extra"),
    [("chat", "openai"), ("responses", "openai"), ("anthropic", "anthropic"), ("gemini", "gemini")],
)
def test_without_aiohttp_insisting_on_it_is_a_typed_error_at_construction(
    kind: str, extra: str
) -> None:
    with pytest.raises(MissingDependency) as info:
        _make(kind, ProviderSettings(transport="aiohttp"))
    assert (info.value.package, info.value.extra) == ("aiohttp", extra)
    _make(kind, ProviderSettings(transport="httpx"))  # the twin: nothing asked of aiohttp


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "http_proxy", "ALL_PROXY"])
async def test_a_proxy_in_the_environment_keeps_httpx2(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("all_proxy", raising=False)
    assert _transport.use_aiohttp("auto", extra="openai")  # the twin: no proxy, aiohttp
    monkeypatch.setenv(variable, "http://127.0.0.1:9")
    assert not _transport.use_aiohttp("auto", extra="openai")
    chat = OpenAIChatModel("gpt-4o", api_key="k")
    client = (await chat._clients.get())._client
    assert type(client._transport).__name__ != "AiohttpTransport"
    await chat.aclose()
    # insisting on aiohttp takes the proxy along (aiohttp speaks HTTP proxies)
    assert _transport.use_aiohttp("aiohttp", extra="openai")


# -- TLS: a CA of one's own, and a refused certificate ----------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def tls_server(ca: trustme.CA) -> AsyncIterator[ChatServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)  # pyright: ignore[reportUnknownMemberType]
    server = ChatServer()
    await server.start(tls=context)
    yield server
    await server.close()


@pytest.fixture
def shared_context(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ssl.SSLContext]]:
    """The shared SSL context rebuilt for the test; the list gets the real one once built."""
    built: list[ssl.SSLContext] = []
    real = httpx2.create_ssl_context

    def create(verify: Any = True, *args: Any, **kwargs: Any) -> ssl.SSLContext:
        if isinstance(verify, ssl.SSLContext):
            return verify
        context = real(verify, *args, **kwargs)
        built.append(context)
        return context

    monkeypatch.setattr(httpx2, "create_ssl_context", create)
    provider.shared_ssl_context.cache_clear()
    provider._built_ssl_context.cache_clear()
    yield built
    provider.shared_ssl_context.cache_clear()
    provider._built_ssl_context.cache_clear()


@TRANSPORTS
async def test_a_custom_ca_from_the_environment_is_trusted_on_both_transports(
    transport: str,
    tls_server: ChatServer,
    ca: trustme.CA,
    shared_context: list[ssl.SSLContext],
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    assert await _run(_chat(tls_server.url, transport)) == "over TLS"
    assert len(shared_context) == 1  # built at the first TLS connection, from SSL_CERT_FILE


@TRANSPORTS
async def test_an_untrusted_certificate_is_refused_alike_on_both_transports(
    transport: str,
    tls_server: ChatServer,
    shared_context: list[ssl.SSLContext],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the twin of the test above: without the CA, the same server is refused
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(ProviderServerError, match="connection failed"):
        await _run(_chat(tls_server.url, transport))
    assert len(shared_context) == 1


# -- a server that hangs up ------------------------------------------------------------------


@pytest.fixture
async def hang_up() -> AsyncIterator[ChatServer]:
    server = ChatServer(hang_up=True)
    await server.start()
    yield server
    await server.close()


@TRANSPORTS
async def test_a_server_that_hangs_up_is_stream_interrupted_on_both(
    transport: str, hang_up: ChatServer
) -> None:
    with pytest.raises(StreamInterrupted):
        await _run(_chat(hang_up.url, transport))


async def test_without_reading_aiohttps_cause_a_hang_up_looks_like_a_timeout(
    hang_up: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the twin: the SDKs' aiohttp transport re-raises a hang-up as httpx2.ConnectTimeout;
    # only reading the aiohttp error under it gives the same error as httpx2
    def nothing(*args: object, **kwargs: object) -> None:
        return None

    monkeypatch.setattr(provider, "aiohttp_error", nothing)
    monkeypatch.setattr(common, "aiohttp_error", nothing)
    with pytest.raises(ModelError) as info:
        await _run(_chat(hang_up.url, "aiohttp"))
    assert type(info.value).__name__ == "ModelTimeout"


# -- made on the first request, one SSL context -----------------------------------------------


async def test_the_aiohttp_session_is_made_at_the_first_request_on_the_shared_ssl_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sessions: list[aiohttp.TCPConnector] = []
    certificates: list[str] = []
    session_init = aiohttp.ClientSession.__init__

    def counted(self: aiohttp.ClientSession, *args: Any, **kwargs: Any) -> None:
        sessions.append(kwargs["connector"])
        session_init(self, *args, **kwargs)

    def loaded(*args: Any, **kwargs: Any) -> None:
        certificates.append("load")  # a CA bundle read: no TLS here, so never

    monkeypatch.setattr(aiohttp.ClientSession, "__init__", counted)
    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", loaded)
    monkeypatch.setattr(ssl.SSLContext, "load_default_certs", loaded)
    server = ChatServer()
    await server.start()
    try:
        models = [_chat(server.url, "aiohttp"), _chat(server.url, "aiohttp")]
        assert sessions == []  # constructed: nothing made yet
        for model in models:
            assert await _run(model) == "over TLS"
    finally:
        await server.close()
    assert len(sessions) == 2  # one per client, made when it first sent
    shared = provider.shared_ssl_context()
    assert all(connector._ssl is shared for connector in sessions)
    assert certificates == []
