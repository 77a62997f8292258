"""An httpcore network backend on plain asyncio, for the provider SDKs' HTTP clients.

The async HTTP stack the SDKs share (httpx2 over httpcore2) reaches the network through
anyio: each read and write enters a cancel scope, asks sniffio which library is running and
goes through anyio's stream wrappers. This backend does the same job with one asyncio
protocol per connection: a read that finds data already buffered returns it without
awaiting, and a timeout is one timer handle armed only when the read has to wait. The
connection pool, HTTP/1.1 parsing, TLS settings, proxies and limits stay httpcore's own.

`async_transport` builds an `AsyncHTTPTransport` of httpx2 (the OpenAI, Anthropic and Gemini
SDKs) or httpx (Ollama) that uses it; where the installed httpcore does not expose the hook,
or a proxy is configured, the transport keeps its default backend.

`use_aiohttp` decides whether a provider's async client goes on its SDK's own aiohttp
transport instead (`openai[aiohttp]`, `anthropic[aiohttp]`, `google-genai[aiohttp]`), which
the SDKs document for concurrency: its connection pool stays flat under thousands of
requests in flight, where httpcore's rescans every queued request on each change.
"""

# The stream and backend methods take `timeout` arguments because httpcore calls them so.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import os
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from functools import cache
from types import ModuleType
from typing import Any, Literal, cast

from legato.exceptions import MissingDependency

__all__ = [
    "AsyncioBackend",
    "AsyncioStream",
    "aiohttp_installed",
    "async_transport",
    "proxy_configured",
    "use_aiohttp",
]

_HIGH_WATER = 256 * 1024
"""Bytes buffered from the peer before reading from the socket pauses."""


class _Connection(asyncio.Protocol):
    """The protocol behind one stream: a receive buffer and the waiters on it."""

    def __init__(self, core: ModuleType) -> None:
        self.core = core
        """httpcore or httpcore2: the error types the pool above understands."""
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.error: BaseException | None = None
        self._reader: asyncio.Future[None] | None = None
        self._drain: asyncio.Future[None] | None = None
        self._paused_reading = False

    # -- protocol callbacks -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _HIGH_WATER and self.transport is not None:
            self._paused_reading = True
            self.transport.pause_reading()
        self._wake_reader()

    def eof_received(self) -> bool | None:
        self.eof = True
        self._wake_reader()
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        if exc is not None:
            self.error = exc
        self._wake_reader()
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def pause_writing(self) -> None:
        if self._drain is None:
            self._drain = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def _wake_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None and not reader.done():
            reader.set_result(None)

    # -- used by the stream -----------------------------------------------------------------

    def take(self, max_bytes: int) -> bytes:
        if len(self.buffer) <= max_bytes:
            data = bytes(self.buffer)
            self.buffer.clear()
        else:
            data = bytes(self.buffer[:max_bytes])
            del self.buffer[:max_bytes]
        if self._paused_reading and len(self.buffer) <= _HIGH_WATER // 4:
            self._paused_reading = False
            if self.transport is not None:
                self.transport.resume_reading()
        return data

    async def wait_readable(self, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        waiter = self._reader = loop.create_future()
        await _within(waiter, timeout, self.core.ReadTimeout)

    async def wait_writable(self, timeout: float | None) -> None:
        if self._drain is not None:
            await _within(asyncio.shield(self._drain), timeout, self.core.WriteTimeout)


async def _within(
    waiter: asyncio.Future[None], timeout: float | None, error: type[Exception]
) -> None:
    """Wait for `waiter`; past `timeout` seconds, raise `error`."""
    if timeout is None:
        await waiter
        return
    expired: list[bool] = []

    def expire() -> None:
        if not waiter.done():
            expired.append(True)
            waiter.cancel()

    timer = asyncio.get_running_loop().call_later(timeout, expire)
    try:
        await waiter
    except asyncio.CancelledError:
        if not expired:
            raise
        msg = f"no progress within {timeout:g}s"
        raise error(msg) from None
    finally:
        timer.cancel()


class AsyncioStream:
    """One connection (TCP, Unix or TLS over either) read and written through asyncio."""

    def __init__(self, connection: _Connection) -> None:
        self._conn = connection
        self._core = connection.core

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        conn = self._conn
        if not conn.buffer:
            if conn.eof:
                if conn.error is not None:
                    raise self._core.ReadError(str(conn.error))
                return b""
            await conn.wait_readable(timeout)
            if not conn.buffer:
                if conn.error is not None:
                    raise self._core.ReadError(str(conn.error))
                return b""
        return conn.take(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        conn = self._conn
        transport = conn.transport
        if transport is None or transport.is_closing():
            raise self._core.WriteError(str(conn.error or "the connection is closed"))
        try:
            transport.write(buffer)
        except (OSError, RuntimeError) as exc:
            raise self._core.WriteError(str(exc)) from exc
        await conn.wait_writable(timeout)
        if conn.error is not None:
            raise self._core.WriteError(str(conn.error))

    async def aclose(self) -> None:
        transport = self._conn.transport
        if transport is not None and not transport.is_closing():
            transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> AsyncioStream:
        conn = self._conn
        transport = conn.transport
        if transport is None:
            msg = "the connection is closed"
            raise self._core.ConnectError(msg)
        loop = asyncio.get_running_loop()
        try:
            secure = await loop.start_tls(
                transport,
                conn,
                ssl_context,
                server_hostname=server_hostname,
                ssl_handshake_timeout=timeout,
            )
        except TimeoutError as exc:
            transport.close()
            raise self._core.ConnectTimeout(str(exc)) from exc
        except (OSError, ssl.SSLError, ConnectionError) as exc:
            transport.close()
            raise self._core.ConnectError(str(exc)) from exc
        if secure is None:  # pragma: no cover - only for a protocol that never connects
            msg = "TLS did not start"
            raise self._core.ConnectError(msg)
        conn.transport = secure
        return self

    def get_extra_info(self, info: str) -> Any:
        transport = self._conn.transport
        if transport is None:
            return None
        if info == "ssl_object":
            return transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return transport.get_extra_info("sockname")
        if info == "server_addr":
            return transport.get_extra_info("peername")
        if info == "socket":
            return transport.get_extra_info("socket")
        if info == "is_readable":
            # An idle keep-alive connection that is readable was closed (or spoken to) by
            # the server: the pool drops it instead of sending a request into it.
            conn = self._conn
            if conn.eof or conn.buffer or transport.is_closing():
                return True
            sock = transport.get_extra_info("socket")
            return sock is None or _readable(sock)
        return None


def _readable(sock: Any) -> bool:
    import select

    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class AsyncioBackend:
    """Connections for httpcore (or httpcore2) made with asyncio's own transports."""

    def __init__(self, core: ModuleType) -> None:
        """A backend for the pools of `core`, the httpcore or httpcore2 module."""
        self._core = core

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> AsyncioStream:
        loop = asyncio.get_running_loop()
        return await self._connect(
            lambda conn: loop.create_connection(
                lambda: conn,
                host,
                port,
                local_addr=(local_address, 0) if local_address else None,
                happy_eyeballs_delay=0.25,
            ),
            f"{host}:{port}",
            timeout,
            socket_options,
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> AsyncioStream:
        loop = asyncio.get_running_loop()
        return await self._connect(
            lambda conn: loop.create_unix_connection(lambda: conn, path),
            path,
            timeout,
            socket_options,
        )

    async def _connect(
        self,
        connect: Callable[[_Connection], Awaitable[object]],
        where: str,
        timeout: float | None,
        socket_options: Iterable[Any] | None,
    ) -> AsyncioStream:
        conn = _Connection(self._core)
        try:
            async with asyncio.timeout(timeout):
                await connect(conn)
        except TimeoutError as exc:
            msg = f"no connection to {where} in time"
            raise self._core.ConnectTimeout(msg) from exc
        except OSError as exc:
            raise self._core.ConnectError(str(exc)) from exc
        if socket_options and conn.transport is not None:
            sock: socket.socket | None = conn.transport.get_extra_info("socket")
            if sock is not None:
                for option in socket_options:
                    sock.setsockopt(*option)
        return AsyncioStream(conn)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def async_transport(http: ModuleType, **kwargs: Any) -> Any:
    """`http.AsyncHTTPTransport(**kwargs)` (`http` is httpx or httpx2), on `AsyncioBackend`.

    A proxied transport keeps httpcore's default backend, which also speaks SOCKS.
    """
    transport = http.AsyncHTTPTransport(**kwargs)
    pool = getattr(transport, "_pool", None)
    core = importlib.import_module(type(pool).__module__.partition(".")[0])
    if type(pool) is getattr(core, "AsyncConnectionPool", None) and hasattr(
        pool, "_network_backend"
    ):
        pool._network_backend = AsyncioBackend(core)  # pyright: ignore[reportOptionalMemberAccess]
    return transport


# -- which transport ------------------------------------------------------------------------------

TransportChoice = Literal["auto", "aiohttp", "httpx"]


@cache
def aiohttp_installed() -> bool:
    """Whether aiohttp can be imported (looked up without importing it)."""
    return importlib.util.find_spec("aiohttp") is not None


_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")


def proxy_configured() -> bool:
    """Whether the environment names a proxy (`HTTP(S)_PROXY`, `ALL_PROXY`, any case).

    The httpx2 transport reads the same variables, speaks SOCKS too and applies `NO_PROXY`
    as it always did; `auto` keeps it whenever one is set.
    """
    return any(os.environ.get(name) or os.environ.get(name.upper()) for name in _PROXY_VARIABLES)


def use_aiohttp(choice: TransportChoice, *, extra: str) -> bool:
    """Whether a provider's async client goes on its SDK's aiohttp transport.

    Args:
        choice: `ProviderSettings.transport`.
        extra: The legato extra that installs aiohttp for this provider (named by the error).

    Raises:
        MissingDependency: `choice` is `aiohttp` and aiohttp is not installed.
    """
    if choice == "httpx":
        return False
    if not aiohttp_installed():
        if choice == "aiohttp":
            package = "aiohttp"
            raise MissingDependency(package, extra)
        return False
    return choice == "aiohttp" or not proxy_configured()
