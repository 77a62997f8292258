"""`MCPClient`: one MCP server as a legato tool source, plus its resources and prompts."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from legato._version import __version__
from legato.exceptions import (
    ConfigurationError,
    MCPConnectionError,
    MCPError,
    MissingDependency,
    ToolDefinitionError,
    ToolError,
)
from legato.mcp._config import HTTPServer, ServerSpec, StdioServer
from legato.mcp._connection import Callbacks, Connection, sdk_error_mapper
from legato.mcp._convert import (
    NameMap,
    content_from_mcp,
    prompt_messages_from_mcp,
    resource_contents_from_mcp,
)
from legato.mcp._handlers import (
    ElicitationHandler,
    ElicitationRequest,
    ProgressHandler,
    ProgressUpdate,
    SamplingHandler,
    SamplingRequest,
)
from legato.messages import ContentPart, JsonValue, Message, TextPart
from legato.tools import RunContext, SideEffects, Tool

if TYPE_CHECKING:
    import mcp
    from mcp.client.session import ClientRequestContext, IncomingMessage

__all__ = [
    "MCPClient",
    "PromptArgumentInfo",
    "PromptInfo",
    "ResourceInfo",
    "ResourceTemplateInfo",
    "ToolCallResult",
]

logger = logging.getLogger("legato.mcp")
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallResult:
    """What an MCP tool returned."""

    content: tuple[ContentPart, ...]
    structured: JsonValue = None
    """The `structuredContent`, if the tool sent one."""
    is_error: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ResourceInfo:
    """A resource a server lists."""

    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ResourceTemplateInfo:
    """A parameterised resource (RFC 6570 URI template)."""

    uri_template: str
    name: str
    description: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptArgumentInfo:
    """One argument of a prompt."""

    name: str
    description: str | None = None
    required: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class PromptInfo:
    """A prompt a server lists."""

    name: str
    description: str | None = None
    arguments: tuple[PromptArgumentInfo, ...] = ()


def _side_effects(annotations: mcp.types.ToolAnnotations | None) -> SideEffects:
    if annotations is not None and annotations.read_only_hint:
        return "none"
    if annotations is not None and annotations.idempotent_hint:
        return "idempotent"
    return "irreversible"


def _sink_meta(spec: mcp.types.Tool) -> dict[str, JsonValue]:
    """The sink kinds a server announces (`_meta["legato/sinks"]`), kept as metadata.

    They only type the matching: the injection defence still treats every string
    parameter of a side-effecting MCP tool as a sink, whatever the server says.
    """
    meta = cast(object, spec.meta)
    sinks = cast(dict[str, object], meta).get("legato/sinks") if isinstance(meta, dict) else None
    if not isinstance(sinks, dict):
        return {}
    kinds = {str(k): v for k, v in cast(dict[object, object], sinks).items() if isinstance(v, str)}
    return {"mcp_sinks": cast(dict[str, JsonValue], kinds)}


def _require_sdk() -> None:
    try:
        import mcp.client  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError as exc:
        package = "mcp"
        raise MissingDependency(package, "mcp") from exc


class MCPClient:
    """A connection to one MCP server, usable as a legato tool source.

    ```python
    time = MCPClient(StdioServer(command="mcp-server-time"), name="time")
    async with time:
        agent = Agent(model, tools=[time])
        await agent.run("What time is it in Tokyo?")
    ```

    One long-lived session per server, owned by one task and reused by every call and
    every run; it connects on first use (or on `async with`), and reconnects when the
    server died. Requests have timeouts; a cancelled call is cancelled on the server.

    Args:
        server: A `StdioServer`, an `HTTPServer`, or an in-process SDK server (tests).
        name: The server's name in errors and logs.
        prefix: Prepended (with `_`) to every tool name.
        include: Only these MCP tool names (or those the predicate accepts).
        exclude: Leave these MCP tool names out.
        timeout: Seconds any request may take.
        connect_timeout: Seconds to start the server and finish the handshake.
        sampling: Answers the server's sampling requests (default: refused).
        elicitation: Answers the server's elicitation requests (default: refused).
        roots: Directories exposed to the server as roots: paths, or objects with a
            `root` path attribute (e.g. the agent's workspace).
        on_progress: Receives progress updates of tool calls (in a run they also reach
            the run's stream as `ToolProgress` events, with or without this callback).

    A tool listing that is not valid MCP (e.g. an `inputSchema` that is not an object
    schema) raises `MCPProtocolError`; a valid tool legato cannot use is left out and
    recorded in `rejected_tools`.
    """

    def __init__(
        self,
        server: ServerSpec | object,
        *,
        name: str | None = None,
        prefix: str | None = None,
        include: Iterable[str] | Callable[[str], bool] | None = None,
        exclude: Iterable[str] = (),
        timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        sampling: SamplingHandler | None = None,
        elicitation: ElicitationHandler | None = None,
        roots: Sequence[str | os.PathLike[str] | object] = (),
        on_progress: ProgressHandler | None = None,
    ) -> None:
        self._server = server
        self._name = name or _default_name(server)
        self._names = NameMap(prefix)
        self._include = include
        self._exclude = frozenset(exclude)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._sampling = sampling
        self._elicitation = elicitation
        self._roots = [_root_path(r) for r in roots]
        self._on_progress = on_progress
        self._conn: Connection | None = None
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._tools: dict[str, Tool] | None = None
        self._stale = True
        self.rejected_tools: dict[str, str] = {}
        """MCP tools left out because their definition is unusable: name -> reason."""
        self.connections = 0
        """How many times a session was opened (1 + reconnects)."""
        self.tool_list_changes = 0
        """How many `tools/list_changed` notifications arrived (even before initialize)."""

    # -- identity and lifecycle --------------------------------------------------------------

    @property
    def name(self) -> str:
        """The server's name."""
        return self._name

    def __repr__(self) -> str:
        return f"MCPClient(name={self._name!r})"

    async def __aenter__(self) -> MCPClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the session now (otherwise it opens on first use)."""
        await self._connection()

    async def close(self) -> None:
        """End the session; a stdio server process is terminated."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    @property
    def connected(self) -> bool:
        """Whether a live session is open."""
        return self._conn is not None and not self._conn.broken

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            self._locks = {loop: asyncio.Lock()}  # locks of finished loops are dropped
            lock = self._locks[loop]
        return lock

    async def _connection(self) -> Connection:
        conn = self._conn
        if conn is not None and not conn.broken and conn.loop is asyncio.get_running_loop():
            return conn
        _require_sdk()
        async with self._lock():
            conn = self._conn
            if conn is not None and not conn.broken and conn.loop is asyncio.get_running_loop():
                return conn
            if conn is not None:
                await conn.close()
                self._conn = None
            import mcp

            fresh = Connection(
                server_name=self._name,
                target=self._server,
                callbacks=self._callbacks(),
                timeout=self.timeout,
                client_info=mcp.types.Implementation(name="legato", version=__version__),
            )
            await fresh.open(self.connect_timeout)
            self._conn = fresh
            self._stale = True
            self.connections += 1
            return fresh

    async def _request(self, what: str, send: Callable[[mcp.Client], Awaitable[T]]) -> T:
        conn = await self._connection()
        convert = sdk_error_mapper(self._name, what)
        try:
            return await send(conn.client)
        except MCPError:
            raise
        except Exception as exc:
            mapped = convert(exc)
            if mapped is None:
                raise
            if isinstance(mapped, MCPConnectionError):
                conn.broken = True
                mapped = conn.explain(mapped)
            raise mapped from exc

    # -- server-initiated requests and notifications ------------------------------------------

    def _callbacks(self) -> Callbacks:
        return Callbacks(
            sampling=self._on_sampling if self._sampling is not None else None,
            elicitation=self._on_elicitation if self._elicitation is not None else None,
            list_roots=self._on_list_roots if self._roots else None,
            logging=self._on_log,
            message=self._on_message,
        )

    async def _on_message(self, message: IncomingMessage) -> None:
        import mcp

        if isinstance(message, Exception):
            logger.warning("MCP server %r sent an invalid message: %s", self._name, message)
            return
        if isinstance(message, mcp.types.ToolListChangedNotification):
            self._stale = True
            self.tool_list_changes += 1

    async def _on_log(self, params: mcp.types.LoggingMessageNotificationParams) -> None:
        level = {"debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO}.get(
            params.level, logging.WARNING
        )
        logger.log(level, "MCP server %r: %s", self._name, params.data)

    async def _on_sampling(
        self, context: ClientRequestContext, params: mcp.types.CreateMessageRequestParams
    ) -> mcp.types.CreateMessageResult | mcp.types.ErrorData:
        import mcp

        handler = self._sampling
        assert handler is not None  # installed only with a handler
        messages = tuple(
            Message(
                role="user" if m.role == "user" else "assistant",
                parts=content_from_mcp(m.content if isinstance(m.content, list) else [m.content]),
            )
            for m in params.messages
        )
        request = SamplingRequest(
            server=self._name,
            messages=messages,
            system_prompt=params.system_prompt,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            stop_sequences=tuple(params.stop_sequences or ()),
        )
        try:
            answer = await handler(request)
        except Exception as exc:
            return mcp.types.ErrorData(code=mcp.types.INVALID_REQUEST, message=str(exc))
        text = answer if isinstance(answer, str) else answer.text
        return mcp.types.CreateMessageResult(
            role="assistant",
            content=mcp.types.TextContent(type="text", text=text),
            model="legato",
            stop_reason="endTurn",
        )

    async def _on_elicitation(
        self, context: ClientRequestContext, params: mcp.types.ElicitRequestParams
    ) -> mcp.types.ElicitResult | mcp.types.ErrorData:
        import mcp

        handler = self._elicitation
        assert handler is not None  # installed only with a handler
        if not isinstance(params, mcp.types.ElicitRequestFormParams):
            return mcp.types.ErrorData(
                code=mcp.types.INVALID_REQUEST, message="URL elicitation is not supported"
            )
        schema: dict[str, JsonValue] = dict(params.requested_schema)
        try:
            answer = await handler(
                ElicitationRequest(server=self._name, message=params.message, schema=schema)
            )
        except Exception as exc:
            return mcp.types.ErrorData(code=mcp.types.INVALID_REQUEST, message=str(exc))
        content = dict(answer.content) if answer.content is not None else None
        return mcp.types.ElicitResult(action=answer.action, content=content)

    async def _on_list_roots(
        self, context: ClientRequestContext
    ) -> mcp.types.ListRootsResult | mcp.types.ErrorData:
        import mcp

        return mcp.types.ListRootsResult(
            roots=[
                mcp.types.Root(uri=root.as_uri(), name=root.name)  # pyright: ignore[reportArgumentType]
                for root in self._roots
            ]
        )

    # -- tools ----------------------------------------------------------------------------------

    def _wanted(self, mcp_name: str) -> bool:
        if mcp_name in self._exclude:
            return False
        include = self._include
        if include is None:
            return True
        if callable(include):
            return include(mcp_name)
        return mcp_name in set(include)

    async def list_tools(self) -> Sequence[Tool]:
        """The server's tools as legato tools (refreshed after `tools/list_changed`)."""
        if self._tools is None or self._stale or not self.connected:
            await self.refresh()
        assert self._tools is not None
        return list(self._tools.values())

    async def list_mcp_tools(self) -> list[mcp.types.Tool]:
        """The raw tool definitions, every page."""
        import mcp

        tools: list[mcp.types.Tool] = []
        cursor: str | None = None
        while True:
            params = mcp.types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._request(
                "tools/list",
                lambda c, p=params: c.session.list_tools(params=p),
            )
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def refresh(self) -> None:
        """Fetch the tool list again."""
        self._stale = False
        listed = await self.list_mcp_tools()
        tools: dict[str, Tool] = {}
        rejected: dict[str, str] = {}
        for spec in listed:
            if not self._wanted(spec.name):
                continue
            try:
                built = self._build_tool(spec)
            except ToolDefinitionError as exc:
                rejected[spec.name] = str(exc)
                logger.warning("MCP server %r: skipping tool %r: %s", self._name, spec.name, exc)
                continue
            tools[built.name] = built
        self._tools = tools
        self.rejected_tools = rejected

    def _build_tool(self, spec: mcp.types.Tool) -> Tool:
        schema = cast(object, spec.input_schema)
        if not isinstance(schema, dict):
            msg = "inputSchema is not a JSON object"
            raise ToolDefinitionError(msg)
        legato_name = self._names.legato_name(spec.name)
        mcp_name = spec.name

        async def call(ctx: RunContext[Any], /, **arguments: Any) -> Any:
            return await self._call_as_tool(mcp_name, legato_name, arguments, ctx)

        return Tool.from_schema(
            name=legato_name,
            description=spec.description or spec.title or "",
            parameters=cast(dict[str, JsonValue], schema),
            function=call,
            side_effects=_side_effects(spec.annotations),
            metadata={"mcp_server": self._name, "mcp_name": mcp_name, **_sink_meta(spec)},
        )

    async def _call_as_tool(
        self, mcp_name: str, legato_name: str, arguments: dict[str, Any], ctx: RunContext[Any]
    ) -> Any:
        try:
            if self._stale:
                await self.refresh()
        except MCPError as exc:
            raise ToolError(str(exc)) from exc
        assert self._tools is not None
        if legato_name not in self._tools:
            available = ", ".join(sorted(self._tools)) or "none"
            msg = (
                f"tool {legato_name!r} is no longer offered by MCP server {self._name!r} "
                f"(it was removed after it was listed); available now: {available}"
            )
            raise ToolError(msg)
        try:
            result = await self._call(mcp_name, arguments, None, ctx.tool_call_id, ctx)
        except MCPError as exc:
            raise ToolError(str(exc)) from exc
        if result.is_error:
            text = "\n".join(p.text for p in result.content if isinstance(p, TextPart))
            raise ToolError(text or f"MCP tool {mcp_name!r} failed without a message")
        return list(result.content) if result.content else ""

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        request_timeout: float | None = None,
        tool_call_id: str | None = None,
    ) -> ToolCallResult:
        """Call a tool by its MCP name; an error the tool reports is in `is_error`.

        Raises `MCPTimeout` (the call is then cancelled on the server),
        `MCPConnectionError` (the server died; the next request reconnects) or
        `MCPRequestFailed` (e.g. an unknown tool).
        """
        return await self._call(name, arguments, request_timeout, tool_call_id, None)

    async def _call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        request_timeout: float | None,
        tool_call_id: str | None,
        ctx: RunContext[Any] | None,
    ) -> ToolCallResult:
        progress = self._progress_callback(name, tool_call_id, ctx)
        wait = request_timeout if request_timeout is not None else self.timeout
        result = await self._request(
            f"tools/call {name!r}",
            lambda c: c.session.call_tool(
                name, dict(arguments or {}), read_timeout_seconds=wait, progress_callback=progress
            ),
        )
        structured: JsonValue = result.structured_content
        return ToolCallResult(
            content=content_from_mcp(result.content, structured),
            structured=structured,
            is_error=bool(result.is_error),
        )

    def _progress_callback(
        self, name: str, tool_call_id: str | None, ctx: RunContext[Any] | None
    ) -> Any:
        """The SDK's progress callback: the run's stream (via `ctx`) and `on_progress`.

        None when neither wants progress: the request then carries no progress token, so
        the server sends none.
        """
        handler = self._on_progress
        run = ctx if ctx is not None and ctx.scope is not None else None
        if handler is None and run is None:
            return None
        server = self._name

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if run is not None:  # first, synchronously: notifications keep their order
                try:
                    run.report_progress(progress, total, message)
                except ToolError as exc:
                    logger.warning("MCP server %r sent unusable progress: %s", server, exc)
            if handler is None:
                return
            update = ProgressUpdate(
                server=server,
                tool=name,
                tool_call_id=tool_call_id,
                progress=progress,
                total=total,
                message=message,
            )
            outcome = handler(update)
            if inspect.isawaitable(outcome):
                await outcome

        return on_progress

    # -- resources and prompts -------------------------------------------------------------------

    async def list_resources(self) -> list[ResourceInfo]:
        """The resources the server lists (every page)."""
        import mcp

        out: list[ResourceInfo] = []
        cursor: str | None = None
        while True:
            params = mcp.types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._request(
                "resources/list", lambda c, p=params: c.session.list_resources(params=p)
            )
            out.extend(
                ResourceInfo(
                    uri=str(r.uri), name=r.name, description=r.description, mime_type=r.mime_type
                )
                for r in page.resources
            )
            cursor = page.next_cursor
            if not cursor:
                return out

    async def list_resource_templates(self) -> list[ResourceTemplateInfo]:
        """The resource templates the server lists (every page)."""
        import mcp

        out: list[ResourceTemplateInfo] = []
        cursor: str | None = None
        while True:
            params = mcp.types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._request(
                "resources/templates/list",
                lambda c, p=params: c.session.list_resource_templates(params=p),
            )
            out.extend(
                ResourceTemplateInfo(
                    uri_template=t.uri_template,
                    name=t.name,
                    description=t.description,
                    mime_type=t.mime_type,
                )
                for t in page.resource_templates
            )
            cursor = page.next_cursor
            if not cursor:
                return out

    async def read_resource(self, uri: str) -> tuple[ContentPart, ...]:
        """A resource's contents as content parts (text, image or document)."""
        result = await self._request(
            f"resources/read {uri!r}", lambda c: c.session.read_resource(uri)
        )
        return tuple(resource_contents_from_mcp(c) for c in result.contents)

    async def list_prompts(self) -> list[PromptInfo]:
        """The prompts the server lists (every page)."""
        import mcp

        out: list[PromptInfo] = []
        cursor: str | None = None
        while True:
            params = mcp.types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._request(
                "prompts/list", lambda c, p=params: c.session.list_prompts(params=p)
            )
            out.extend(
                PromptInfo(
                    name=p.name,
                    description=p.description,
                    arguments=tuple(
                        PromptArgumentInfo(
                            name=a.name, description=a.description, required=bool(a.required)
                        )
                        for a in p.arguments or ()
                    ),
                )
                for p in page.prompts
            )
            cursor = page.next_cursor
            if not cursor:
                return out

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[Message]:
        """A prompt, filled with `arguments`, as legato messages."""
        result = await self._request(
            f"prompts/get {name!r}",
            lambda c: c.session.get_prompt(name, dict(arguments) if arguments else None),
        )
        return prompt_messages_from_mcp(result.messages)

    async def ping(self) -> None:
        """Check the server answers."""
        await self._request("ping", lambda c: c.session.send_ping())


def _root_path(root: object) -> Path:
    value = cast(object, getattr(root, "root", None))
    if isinstance(root, str | os.PathLike):
        value = cast(object, root)
    if not isinstance(value, str | os.PathLike):
        msg = f"a root must be a path or have a 'root' path attribute, got {root!r}"
        raise ConfigurationError(msg)
    return Path(cast(str, value)).resolve()


def _default_name(server: object) -> str:
    if isinstance(server, StdioServer):
        return Path(server.command).name
    if isinstance(server, HTTPServer):
        return server.url
    return str(getattr(server, "name", None) or type(server).__name__)
