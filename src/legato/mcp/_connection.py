"""One live connection to an MCP server, owned by one task.

The SDK's client is a stack of anyio task groups and cancel scopes: it must be entered
and left by the same task. A `Connection` starts an owner task that enters the SDK
client, reports when the handshake is done, and waits to be told to stop; requests are
sent from any task of the same event loop. Stopping cancels the owner task, which
leaves the SDK client in its own task, so the server process is terminated and every
task the SDK started ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from legato.exceptions import (
    MCPAuthorizationError,
    MCPConnectionError,
    MCPError,
    MCPProtocolError,
    MCPTimeout,
)
from legato.mcp._auth import OAuthSession
from legato.mcp._config import HTTPServer, ServerSpec, StdioServer

if TYPE_CHECKING:
    import mcp
    from mcp.client.session import (
        ElicitationFnT,
        ListRootsFnT,
        LoggingFnT,
        MessageHandlerFnT,
        SamplingFnT,
    )

__all__ = ["Callbacks", "Connection"]

logger = logging.getLogger("legato.mcp")

_STDERR_TAIL = 2000


@dataclass(frozen=True, kw_only=True, slots=True)
class Callbacks:
    """The SDK callbacks a connection installs (None: not advertised)."""

    sampling: SamplingFnT | None
    elicitation: ElicitationFnT | None
    list_roots: ListRootsFnT | None
    logging: LoggingFnT
    message: MessageHandlerFnT


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        group: BaseExceptionGroup[BaseException] = exc  # pyright: ignore[reportUnknownVariableType]
        return [leaf for sub in group.exceptions for leaf in _leaves(sub)]
    return [exc]


@contextlib.asynccontextmanager
async def _http_transport(
    spec: HTTPServer, oauth: OAuthSession | None, on_refused: Callable[[int | None], None]
) -> AsyncGenerator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    endpoint = httpx2.URL(spec.url)

    async def note_refusal(response: httpx2.Response) -> None:
        # The transport turns a 401/403 into a generic JSON-RPC error; keep the status of
        # the endpoint's latest answer (None once it answers otherwise).
        if response.request.url == endpoint:
            status = response.status_code
            on_refused(status if status in (401, 403) else None)

    # The SDK's defaults: 30 s to connect or write, 300 s between bytes of a held stream.
    timeout = httpx2.Timeout(30.0, read=300.0)
    auth = oauth.auth if oauth is not None else None
    async with (
        httpx2.AsyncClient(
            headers=dict(spec.headers),
            timeout=timeout,
            auth=auth,
            event_hooks={"response": [note_refusal]},
        ) as http,
        streamable_http_client(spec.url, http_client=http) as streams,
    ):
        yield streams


@contextlib.asynccontextmanager
async def _sse_transport(spec: HTTPServer, oauth: OAuthSession | None) -> AsyncGenerator[Any]:
    from mcp.client.sse import sse_client

    auth = oauth.auth if oauth is not None else None
    async with sse_client(spec.url, headers=dict(spec.headers), auth=auth) as streams:
        yield streams


class Connection:
    """A connected SDK client and the task that owns it."""

    def __init__(
        self,
        *,
        server_name: str,
        target: ServerSpec | object,
        callbacks: Callbacks,
        timeout: float | None,
        client_info: mcp.types.Implementation,
    ) -> None:
        self.server_name = server_name
        self.loop = asyncio.get_running_loop()
        self.broken = False
        """Set when the connection died; the next request reconnects."""
        self._target = target
        self._callbacks = callbacks
        self._timeout = timeout
        self._client_info = client_info
        self._ready: asyncio.Future[mcp.Client] = self.loop.create_future()
        self._stop = asyncio.Event()
        self._stderr: IO[str] | None = None
        self._saved_stderr = ""
        self._protocol_errors: list[str] = []
        self._task: asyncio.Task[None] | None = None
        self._oauth: OAuthSession | None = None
        self._refused: int | None = None
        self._deadline: tuple[asyncio.Timeout, float] | None = None

    # -- lifecycle --------------------------------------------------------------------------

    async def open(self, connect_timeout: float) -> mcp.Client:
        """Start the owner task and wait for the handshake (or fail with a typed error)."""
        self._task = asyncio.create_task(self._own(), name=f"mcp:{self.server_name}")
        try:
            async with asyncio.timeout(connect_timeout) as deadline:
                self._deadline = (deadline, connect_timeout)
                return await asyncio.shield(self._ready)
        except TimeoutError:
            detail = self._detail()
            await self.close()
            if self._protocol_errors:
                msg = (
                    f"no valid answer to initialize within {connect_timeout:g}s; it sent "
                    f"invalid messages: {self._protocol_errors[0]}{detail}"
                )
                raise MCPProtocolError(msg, server=self.server_name) from None
            msg = f"no answer to initialize within {connect_timeout:g}s{detail}"
            raise MCPTimeout(msg, server=self.server_name) from None
        except BaseException:
            await self.close()
            raise
        finally:
            self._deadline = None

    def _person_waiting(self, waiting: bool) -> None:
        """Stop the connect timeout while a person approves access (then restart it)."""
        if self._deadline is None:
            return
        deadline, seconds = self._deadline
        deadline.reschedule(None if waiting else self.loop.time() + seconds)

    async def close(self) -> None:
        """Stop the owner task (terminating a stdio server) and wait for it."""
        self.broken = True
        task = self._task
        if asyncio.get_running_loop() is not self.loop:
            # The old loop is gone (asyncio.run cancelled the owner task when it ended,
            # which terminated the server); nothing of it can be awaited from here.
            self._close_stderr()
            return
        self._stop.set()
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._close_stderr()
        if not self._ready.done():
            self._ready.cancel()

    def _close_stderr(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    @property
    def client(self) -> mcp.Client:
        """The connected SDK client."""
        return self._ready.result()

    def note_protocol_error(self, error: Exception) -> None:
        """Remember an invalid message the server sent (reported if the handshake fails)."""
        self._protocol_errors.append(f"{type(error).__name__}: {error}"[:300])

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.note_protocol_error(message)
        await self._callbacks.message(message)

    # -- the owner task ---------------------------------------------------------------------

    async def _own(self) -> None:
        import mcp

        cb = self._callbacks
        try:
            transport = self._transport()
            async with mcp.Client(
                transport,  # pyright: ignore[reportArgumentType]
                mode="legacy",
                read_timeout_seconds=self._timeout,
                sampling_callback=cb.sampling,
                elicitation_callback=cb.elicitation,
                list_roots_callback=cb.list_roots,
                logging_callback=cb.logging,
                message_handler=self._on_message,
                client_info=self._client_info,
                cache=None,
            ) as client:
                self._ready.set_result(client)
                await self._stop.wait()
        except asyncio.CancelledError:
            if not self._ready.done():
                self._ready.cancel()
            raise
        except (Exception, BaseExceptionGroup) as exc:  # every start failure goes to `open`
            self.broken = True
            if not self._ready.done():
                self._ready.set_exception(self._start_error(exc))
            else:
                logger.debug("MCP server %r: connection ended: %r", self.server_name, exc)
        finally:
            self._saved_stderr = self._detail()
            self._close_stderr()

    def _transport(self) -> object:
        target = self._target
        if isinstance(target, StdioServer):
            from mcp.client.stdio import StdioServerParameters, stdio_client

            self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
            params = StdioServerParameters(
                command=target.command,
                args=list(target.args),
                env=dict(target.env) if target.env is not None else None,
                cwd=target.cwd,
            )
            return stdio_client(params, errlog=self._stderr)
        if isinstance(target, HTTPServer):
            if target.auth is not None:
                self._oauth = OAuthSession(
                    target.auth, target.url, self.server_name, on_person=self._person_waiting
                )
            if target.transport == "sse":
                return _sse_transport(target, self._oauth)
            return _http_transport(target, self._oauth, self._note_refused)
        return target  # an in-process SDK server

    def _note_refused(self, status: int | None) -> None:
        self._refused = status

    def _auth_failure(self, *, handshake: bool) -> MCPError | None:
        """The authorization failure behind a broken connection, if there was one.

        A failed OAuth flow, or, during the handshake, the endpoint's refusal (401/403).
        """
        if self._oauth is not None and self._oauth.failure is not None:
            return self._oauth.failure
        status = self._refused
        if status is None or not handshake:
            return None
        target = self._target
        credentials = isinstance(target, HTTPServer) and (
            target.auth is not None or any(k.lower() == "authorization" for k in target.headers)
        )
        if not credentials:
            msg = (
                f"the server requires authorization (HTTP {status}): "
                "pass HTTPServer(auth=MCPOAuth(...))"
            )
        else:
            msg = f"the server refused the credentials (HTTP {status})"
        return MCPAuthorizationError(msg, server=self.server_name)

    def _start_error(self, exc: BaseException) -> MCPError:
        failure = self._auth_failure(handshake=True)
        if failure is not None:
            return failure
        leaves = _leaves(exc)
        first = next((e for e in leaves if isinstance(e, MCPError)), None)
        if first is not None:
            return first
        detail = self._detail()
        text = "; ".join(f"{type(e).__name__}: {e}" for e in leaves)
        if any(isinstance(e, OSError) for e in leaves):
            return MCPConnectionError(
                f"cannot start or reach it: {text}{detail}", server=self.server_name
            )
        if self._protocol_errors:
            return MCPProtocolError(
                f"invalid messages during initialize: {self._protocol_errors[0]}{detail}",
                server=self.server_name,
            )
        return MCPConnectionError(f"initialize failed: {text}{detail}", server=self.server_name)

    def _detail(self) -> str:
        err = self._stderr
        if err is None:
            return self._saved_stderr
        try:
            err.flush()
            err.seek(0)
            text = err.read()[-_STDERR_TAIL:].strip()
        except (OSError, ValueError):
            return ""
        return f"\nserver stderr:\n{text}" if text else ""

    def stderr_tail(self) -> str:
        """The end of a stdio server's stderr (empty for other transports)."""
        return self._detail()

    def explain(self, error: MCPConnectionError) -> MCPError:
        """What to raise for a connection that broke during a request.

        A failed authorization flow ends the transport, so the request itself only sees a
        closed connection: the authorization error is the real cause. Otherwise `error`,
        with the end of a stdio server's stderr.
        """
        failure = self._auth_failure(handshake=False)
        if failure is not None:
            return failure
        tail = self.stderr_tail()
        return MCPConnectionError(f"{error.detail}{tail}", server=error.server) if tail else error


def sdk_error_mapper(server: str, what: str) -> Callable[[BaseException], MCPError | None]:
    """Map an exception from an SDK request to legato's MCP errors (None: not ours)."""

    def convert(exc: BaseException) -> MCPError | None:
        from mcp import MCPError as SDKError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT
        from pydantic import ValidationError

        if isinstance(exc, SDKError):
            if exc.code == CONNECTION_CLOSED:
                return MCPConnectionError(
                    f"the connection closed during {what} (did the server exit?)", server=server
                )
            if exc.code == REQUEST_TIMEOUT:
                return MCPTimeout(f"{what}: {exc.message}", server=server)
            from legato.exceptions import MCPRequestFailed

            return MCPRequestFailed(f"{what}: {exc.message}", server=server, code=exc.code)
        if isinstance(exc, ValidationError):
            return MCPProtocolError(f"{what}: invalid result: {exc}", server=server)
        if isinstance(exc, OSError | EOFError):
            return MCPConnectionError(f"{what}: {type(exc).__name__}: {exc}", server=server)
        import anyio

        if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError):
            return MCPConnectionError(f"the connection is closed ({what})", server=server)
        return None

    return convert
