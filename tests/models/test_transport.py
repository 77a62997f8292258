"""The asyncio network backend under the providers' HTTP clients, against real local servers."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import trustme

from legato import Agent
from legato.models import _provider as provider
from legato.models._provider import ProviderSettings
from legato.models._transport import AsyncioBackend, AsyncioStream, async_transport
from legato.models.anthropic import AnthropicModel
from legato.models.gemini import GeminiModel
from legato.models.ollama import OllamaModel
from legato.models.openai_chat import OpenAIChatModel
from legato.models.openai_responses import OpenAIResponsesModel
from legato.simulator import SimTurn, WireSimulator

Handler = Callable[[str, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Server:
    """A small HTTP/1.1 server on 127.0.0.1 (or a Unix socket) whose paths misbehave on cue."""

    def __init__(self) -> None:
        self.connections = 0
        self.url = ""
        self._server: asyncio.Server | None = None

    async def start(self, *, tls: ssl.SSLContext | None = None, uds: str | None = None) -> None:
        if uds is not None:
            self._server = await asyncio.start_unix_server(self._serve, uds)
            self.url = "http://local"
            return
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                path = lines[0].split()[1]
                length = next(
                    (int(x.split(":")[1]) for x in lines if x.lower().startswith("content-length")),
                    0,
                )
                body = await reader.readexactly(length)
                if not await self._answer(path, body, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _answer(self, path: str, body: bytes, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False closes the connection afterwards."""
        if path == "/hang":
            await asyncio.sleep(3600)
        if path == "/half":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n0123456789")
            await writer.drain()
            return False
        payload = {
            "/big": b"x" * (3 * 1024 * 1024),
            "/echo": body,
        }.get(path, b"hello")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(payload) + payload)
        await writer.drain()
        # "/bye": answered as keep-alive, then the server drops the idle connection anyway
        return path != "/bye"


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    s = Server()
    await s.start()
    yield s
    await s.close()


def _client(**kwargs: Any) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=async_transport(httpx2, **kwargs), timeout=5)


def _backend(client: Any) -> object:
    return client._transport._pool._network_backend


# -- every provider's client runs on it -----------------------------------------------------------


async def test_every_provider_client_uses_the_asyncio_backend() -> None:
    on_httpx = ProviderSettings(transport="httpx")  # the default is aiohttp when installed
    chat = OpenAIChatModel("gpt-4o", api_key="k", settings=on_httpx)
    responses = OpenAIResponsesModel("gpt-4.1", api_key="k", settings=on_httpx)
    anthropic = AnthropicModel("claude-sonnet-4-5", api_key="k", settings=on_httpx)
    gemini = GeminiModel("gemini-2.5-flash", api_key="k", settings=on_httpx)
    ollama = OllamaModel("llama3.2")
    http_clients: list[object] = [
        (await chat._clients.get())._client,
        (await responses._clients.get())._client,
        (await anthropic._clients.get())._client,
        (await gemini._clients.get()).async_http,
        await ollama._clients.get(),
    ]
    assert [type(_backend(c)) for c in http_clients] == [AsyncioBackend] * 5
    for model in (chat, responses, anthropic, gemini, ollama):
        await model.aclose()


def test_a_proxied_transport_keeps_the_default_backend() -> None:
    transport = async_transport(httpx2, proxy="http://127.0.0.1:9")
    assert not isinstance(getattr(transport._pool, "_network_backend", None), AsyncioBackend)


# -- plain HTTP ---------------------------------------------------------------------------------------


async def test_requests_share_one_kept_alive_connection(server: Server) -> None:
    async with _client() as client:
        response = await client.post(f"{server.url}/echo", content=b"ping 0")
        for i in range(1, 5):
            response = await client.post(f"{server.url}/echo", content=b"ping %d" % i)
            assert response.content == b"ping %d" % i
        stream = response.extensions["network_stream"]
        assert isinstance(stream, AsyncioStream)
        assert stream.get_extra_info("server_addr")[0] == "127.0.0.1"
        assert stream.get_extra_info("ssl_object") is None
    assert server.connections == 1


async def test_socket_options_reach_the_socket(server: Server) -> None:
    keepalive = (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    async with _client(socket_options=[keepalive]) as client:
        response = await client.get(f"{server.url}/ok")
        sock = response.extensions["network_stream"].get_extra_info("socket")
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1


async def test_a_large_body_arrives_whole_with_reading_paused_and_resumed(server: Server) -> None:
    async with _client() as client, client.stream("GET", f"{server.url}/big") as response:
        received = 0
        async for chunk in response.aiter_bytes():
            received += len(chunk)
            await asyncio.sleep(0)  # a slow reader: the buffer passes its high-water mark
    assert received == 3 * 1024 * 1024


async def test_a_large_request_body_is_written_whole(server: Server) -> None:
    payload = bytes(range(256)) * 20_000  # 5 MB: the socket's buffer fills, writing waits
    async with _client() as client:
        response = await client.post(f"{server.url}/echo", content=payload)
    assert response.content == payload


async def test_a_silent_server_is_a_read_timeout(server: Server) -> None:
    async with _client() as client:
        with pytest.raises(httpx2.ReadTimeout):
            await client.get(f"{server.url}/hang", timeout=0.2)


async def test_a_body_cut_short_is_an_error_not_a_short_answer(server: Server) -> None:
    async with _client() as client:
        with pytest.raises(httpx2.RemoteProtocolError):
            await client.get(f"{server.url}/half")


async def test_a_refused_connection_is_a_connect_error() -> None:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: refused
        async with _client() as client:
            with pytest.raises(httpx2.ConnectError):
                await client.get(f"http://127.0.0.1:{port}/")


@pytest.mark.parametrize("check_readable", [True, False])
async def test_an_idle_connection_the_server_dropped_is_not_reused(
    server: Server, check_readable: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not check_readable:  # the twin: the pool cannot tell that the connection died
        original = AsyncioStream.get_extra_info

        def blind(self: AsyncioStream, info: str) -> Any:
            return False if info == "is_readable" else original(self, info)

        monkeypatch.setattr(AsyncioStream, "get_extra_info", blind)
    async with _client() as client:
        assert (await client.get(f"{server.url}/bye")).content == b"hello"
        await asyncio.sleep(0.1)  # the server's close arrives while the connection idles
        if check_readable:
            assert (await client.get(f"{server.url}/ok")).content == b"hello"
            assert server.connections == 2
        else:
            with pytest.raises(httpx2.RemoteProtocolError):
                await client.get(f"{server.url}/ok")


async def test_a_unix_socket(tmp_path: Path) -> None:
    server = Server()
    await server.start(uds=str(tmp_path / "s.sock"))
    try:
        async with _client(uds=str(tmp_path / "s.sock")) as client:
            assert (await client.post(f"{server.url}/echo", content=b"over uds")).content == (
                b"over uds"
            )
    finally:
        await server.close()


async def test_httpx_one_uses_the_backend_with_its_own_errors(server: Server) -> None:
    transport = async_transport(httpx)
    assert isinstance(transport._pool._network_backend, AsyncioBackend)
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get(f"{server.url}/ok")).content == b"hello"
        with pytest.raises(httpx.ReadTimeout):
            await client.get(f"{server.url}/hang", timeout=0.2)


# -- TLS ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def tls_server(ca: trustme.CA) -> AsyncIterator[Server]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)  # pyright: ignore[reportUnknownMemberType]
    s = Server()
    await s.start(tls=context)
    yield s
    await s.close()


async def test_tls_through_start_tls(tls_server: Server, ca: trustme.CA) -> None:
    trusted = ssl.create_default_context()
    ca.configure_trust(trusted)  # pyright: ignore[reportUnknownMemberType]
    async with _client(verify=trusted) as client:
        await client.post(f"{tls_server.url}/echo", content=b"first")
        response = await client.post(f"{tls_server.url}/echo", content=b"secret")
        assert response.content == b"secret"
        ssl_object = response.extensions["network_stream"].get_extra_info("ssl_object")
        assert ssl_object is not None
        assert ssl_object.version() in ("TLSv1.2", "TLSv1.3")
    assert tls_server.connections == 1


async def test_tls_to_an_untrusted_server_fails_to_connect(tls_server: Server) -> None:
    async with _client(verify=ssl.create_default_context()) as client:
        with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.get(f"{tls_server.url}/ok")


# -- the shared SSL context is built on first TLS use only ----------------------------------------


@pytest.fixture
def ssl_builds(ca: trustme.CA, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each real SSL context built (its module's name); the real one trusts the test CA."""
    builds: list[str] = []

    def factory(module: str) -> Callable[..., ssl.SSLContext]:
        def create_ssl_context(
            verify: object = True, *args: object, **kwargs: object
        ) -> ssl.SSLContext:
            if isinstance(verify, ssl.SSLContext):  # handed a context: used as it is, built none
                return verify
            builds.append(module)
            context = ssl.create_default_context()
            ca.configure_trust(context)  # pyright: ignore[reportUnknownMemberType]
            return context

        return create_ssl_context

    monkeypatch.setattr(httpx2, "create_ssl_context", factory("httpx2"))
    monkeypatch.setattr(httpx, "create_ssl_context", factory("httpx"))
    provider.shared_ssl_context.cache_clear()
    provider._built_ssl_context.cache_clear()
    yield builds
    provider.shared_ssl_context.cache_clear()
    provider._built_ssl_context.cache_clear()


def _no_deferral(monkeypatch: pytest.MonkeyPatch) -> None:
    """The twin: the shared context is the real one, built when the first client is made."""
    monkeypatch.setattr(provider, "_DeferredSSLContext", provider._built_ssl_context)


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
@pytest.mark.parametrize("deferred", [True, False])
def test_a_run_over_plain_http_builds_no_ssl_context(
    deferred: bool, transport: Any, ssl_builds: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if not deferred:
        _no_deferral(monkeypatch)
    on = ProviderSettings(transport=transport)
    with WireSimulator() as sim:
        sim.enqueue(SimTurn(text="one"), SimTurn(text="two"), SimTurn(text="three"))
        models = [
            OpenAIChatModel("gpt-4o", base_url=f"{sim.url}/v1", api_key="k", settings=on),
            AnthropicModel("claude-sonnet-4-6", base_url=sim.url, api_key="k", settings=on),
            GeminiModel("gemini-2.5-flash", base_url=sim.url, api_key="k", settings=on),
        ]
        outputs = [Agent(model).run_sync("hi").output for model in models]
    assert outputs == ["one", "two", "three"]
    assert ssl_builds == ([] if deferred else ["httpx2"])


async def test_https_builds_the_shared_context_once_at_the_first_connection(
    tls_server: Server, ssl_builds: list[str]
) -> None:
    first = provider.shared_ssl_context()
    assert provider.shared_ssl_context() is first
    assert first.verify_mode == ssl.CERT_REQUIRED and first.check_hostname
    clients = [_client(verify=provider.shared_ssl_context()) for _ in range(2)]
    assert ssl_builds == []  # clients made, nothing built yet
    for client in clients:
        async with client:
            response = await client.post(f"{tls_server.url}/echo", content=b"secret")
            assert response.content == b"secret"
            ssl_object = response.extensions["network_stream"].get_extra_info("ssl_object")
            assert ssl_object is not None and ssl_object.context is provider._built_ssl_context(
                "httpx2"
            )
    assert ssl_builds == ["httpx2"]


async def test_the_deferred_context_still_refuses_an_untrusted_server(
    tls_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider.shared_ssl_context.cache_clear()
    provider._built_ssl_context.cache_clear()
    monkeypatch.setattr(httpx2, "create_ssl_context", ssl.create_default_context)
    try:
        async with _client(verify=provider.shared_ssl_context()) as client:
            with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get(f"{tls_server.url}/ok")
    finally:
        provider.shared_ssl_context.cache_clear()
        provider._built_ssl_context.cache_clear()
