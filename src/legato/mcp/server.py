"""Serve legato tools (and agents) over MCP: stdio or Streamable HTTP.

```python
from legato.mcp.server import build_server, serve_stdio

server = build_server([get_weather, my_toolset], name="weather")
asyncio.run(serve_stdio(server))
```

From the command line: `legato mcp serve module:obj [--http --port N]`.

A call arriving over MCP takes the same path as a local call: the tool's own
`validate` then `invoke`, with its timeout; errors become results with `isError` that
the client's model can read.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import inspect
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from legato._version import __version__
from legato.agent import Agent
from legato.events import ToolProgress
from legato.exceptions import ConfigurationError, ToolArgumentsInvalid, ToolError
from legato.mcp._client import PromptArgumentInfo
from legato.mcp._convert import content_to_mcp
from legato.mcp._handlers import ElicitationResponse
from legato.messages import Message, TextPart
from legato.run._scope import on_loop
from legato.tools import RunContext, Tool, Toolset, ToolSource, as_tool, to_content

if TYPE_CHECKING:
    import mcp
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

    from legato.approvals import ApprovalPolicy

__all__ = [
    "MCPRequest",
    "Prompt",
    "Resource",
    "ResourceTemplate",
    "agent_tool",
    "as_server",
    "build_server",
    "current_request",
    "serve_http",
    "serve_stdio",
]

ResourceData: TypeAlias = str | bytes
Servable: TypeAlias = Tool | ToolSource | Callable[..., Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class Resource:
    """A fixed resource the server offers; `read` returns its text or bytes."""

    uri: str
    name: str
    read: Callable[[], ResourceData | Awaitable[ResourceData]]
    description: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ResourceTemplate:
    """Resources named by a URI template; `read` gets the template's variables as keywords."""

    uri_template: str
    name: str
    read: Callable[..., ResourceData | Awaitable[ResourceData]]
    description: str | None = None
    mime_type: str | None = None


PromptOutput: TypeAlias = str | Message | Sequence[Message]


@dataclass(frozen=True, kw_only=True, slots=True)
class Prompt:
    """A prompt template; `render` gets the arguments as keywords and returns messages."""

    name: str
    render: Callable[..., PromptOutput | Awaitable[PromptOutput]]
    description: str | None = None
    arguments: tuple[PromptArgumentInfo, ...] = ()


_CURRENT: contextvars.ContextVar[MCPRequest | None] = contextvars.ContextVar(
    "legato_mcp_request", default=None
)


def current_request() -> MCPRequest | None:
    """The MCP request being served, inside a tool called over MCP (None elsewhere)."""
    return _CURRENT.get()


def _quiet_deprecations() -> warnings.catch_warnings[None]:
    from mcp import MCPDeprecationWarning

    guard = warnings.catch_warnings()
    guard.__enter__()
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    return guard


@dataclass(kw_only=True)
class MCPRequest:
    """What a tool called over MCP can do with the client: log, report progress, ask.

    Get it with `current_request()`.
    """

    context: ServerRequestContext[Any, Any] = field(repr=False)

    @property
    def progress_token(self) -> str | int | None:
        """The client's progress token, if it asked for progress."""
        meta = self.context.meta
        return meta.get("progress_token") if meta else None

    async def log(self, message: str, *, level: str = "info") -> None:
        """Send a log message to the client."""
        guard = _quiet_deprecations()
        try:
            await self.context.session.send_log_message(  # pyright: ignore[reportDeprecated] - 2026 deprecation; 2025-11-25 clients use it
                level=cast(Any, level), data=message, related_request_id=self.context.request_id
            )
        finally:
            guard.__exit__(None, None, None)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress (a no-op when the client did not ask for it)."""
        await self.context.session.report_progress(progress, total, message)

    async def sample(self, prompt: str, *, max_tokens: int = 256) -> str:
        """Ask the client's model for a completion; returns its text."""
        import mcp

        guard = _quiet_deprecations()
        try:
            result = await self.context.session.create_message(  # pyright: ignore[reportDeprecated] - as above
                messages=[
                    mcp.types.SamplingMessage(
                        role="user", content=mcp.types.TextContent(type="text", text=prompt)
                    )
                ],
                max_tokens=max_tokens,
                related_request_id=self.context.request_id,
            )
        finally:
            guard.__exit__(None, None, None)
        content = result.content
        return content.text if isinstance(content, mcp.types.TextContent) else ""

    async def close_sse_stream(self) -> None:
        """Close this request's SSE stream (Streamable HTTP); the client resumes it."""
        close = self.context.close_sse_stream
        if close is not None:
            await close()

    async def elicit(self, message: str, schema: Mapping[str, Any]) -> ElicitationResponse:
        """Ask the user (through the client) for input matching `schema`."""
        result = await self.context.session.elicit_form(
            message, dict(schema), related_request_id=self.context.request_id
        )
        return ElicitationResponse(action=result.action, content=result.content)


# -- tools -------------------------------------------------------------------------------------


SINKS_META = "legato/sinks"
"""The `_meta` key under which a served tool lists its sink parameters and their kinds."""


def agent_tool(
    agent: Agent[Any], *, name: str | None = None, description: str | None = None
) -> Tool:
    """A tool that runs `agent` on a prompt and returns its final output."""

    async def run(prompt: str) -> Any:
        result = await agent.run(prompt)
        return result.output

    return Tool.from_function(
        run,
        name=name or agent.name,
        description=description or f"Ask the {agent.name!r} agent. Args: prompt: the request.",
        side_effects="irreversible",
        sinks={"prompt": "text"},
    )


def _sources(items: Sequence[Servable | Agent[Any]]) -> list[ToolSource]:
    loose: list[Tool] = []
    sources: list[ToolSource] = []
    for item in items:
        if isinstance(item, Agent):
            loose.append(agent_tool(cast(Agent[Any], item)))
        elif isinstance(item, Tool) or not isinstance(item, ToolSource):
            loose.append(as_tool(item))
        else:
            sources.append(item)
    return [Toolset(loose, name="tools"), *sources] if loose else sources


async def _all_tools(sources: Sequence[ToolSource]) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}
    for source in sources:
        for t in await source.list_tools():
            tools.setdefault(t.name, t)
    return tools


def _error_result(text: str) -> mcp.types.CallToolResult:
    import mcp

    return mcp.types.CallToolResult(
        content=[mcp.types.TextContent(type="text", text=text)], is_error=True
    )


class _RequestScope:
    """The run scope of a tool called over MCP: what it reports goes to the client.

    `RunContext.report_progress` becomes MCP progress notifications (when the client asked
    for progress), sent in order and all before the call's result; tasks the tool starts
    end with the request. There is no run stream over MCP, so other events are dropped.
    """

    def __init__(self, request: MCPRequest | None) -> None:
        self._request = request
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[ToolProgress | None] = asyncio.Queue()
        self._sender: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._open = True

    def emit(self, event: Any) -> None:
        """No run stream to send to over MCP."""

    def start_task(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """A task that ends (cancelled) when the request does."""
        task = self._loop.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def progress(self, event: ToolProgress) -> None:
        """Queue a progress notification (from any thread)."""
        if self._request is not None and self._request.progress_token is not None:
            on_loop(self._loop, self._put, event)

    def _put(self, event: ToolProgress) -> None:
        if not self._open:
            return
        if self._sender is None:
            self._sender = self._loop.create_task(self._send(), name="mcp-progress")
        self._queue.put_nowait(event)

    async def _send(self) -> None:
        request = self._request
        assert request is not None
        while (event := await self._queue.get()) is not None:
            with contextlib.suppress(Exception):  # a client gone away: the result says so
                await request.progress(event.progress, event.total, event.message)

    async def close(self) -> None:
        """Send what is queued, then end the tasks the tool started."""
        self._open = False
        if self._sender is not None:
            self._queue.put_nowait(None)
            await self._sender
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def call_tool(
    tool: Tool, arguments: Mapping[str, Any] | None, request: MCPRequest | None
) -> mcp.types.CallToolResult:
    """Run one call the way a local run does: validate, then invoke with the tool's timeout.

    The effect gate and contracts hook in here (between `validate` and `invoke`), as in
    `legato.run._tools`, so calls over MCP are admitted exactly like local ones.
    """
    import mcp

    try:
        kwargs = tool.validate(dict(arguments or {}))
    except ToolArgumentsInvalid as exc:
        return _error_result(f"{exc}\nFix the arguments and call the tool again.")
    request_id = request.context.request_id if request is not None else None
    scope = _RequestScope(request)
    ctx: RunContext[Any] = RunContext(
        deps=None,
        run_id=f"mcp-{request_id}",
        tool_call_id=str(request_id) if request_id is not None else None,
        tool_name=tool.name,
        scope=scope,
    )
    token = _CURRENT.set(request)
    try:
        async with asyncio.timeout(tool.timeout):
            value = await tool.invoke(kwargs, ctx)
    except TimeoutError:
        return _error_result(f"tool {tool.name!r} timed out after {tool.timeout:g} seconds")
    except ToolError as exc:
        return _error_result(str(exc))
    except Exception as exc:
        return _error_result(f"{type(exc).__name__}: {exc}")
    finally:
        _CURRENT.reset(token)
        await scope.close()
    structured = cast(dict[str, Any], value) if isinstance(value, dict) else None
    return mcp.types.CallToolResult(
        content=content_to_mcp(to_content(value)), structured_content=structured
    )


# -- resources and prompts ---------------------------------------------------------------------


async def _resolve(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _contents(
    uri: str, data: ResourceData, mime_type: str | None
) -> mcp.types.TextResourceContents | mcp.types.BlobResourceContents:
    import mcp

    if isinstance(data, str):
        return mcp.types.TextResourceContents(
            uri=uri, text=data, mime_type=mime_type or "text/plain"
        )
    return mcp.types.BlobResourceContents(
        uri=uri,
        blob=base64.b64encode(data).decode(),
        mime_type=mime_type or "application/octet-stream",
    )


def _prompt_messages(output: PromptOutput) -> list[mcp.types.PromptMessage]:
    import mcp

    messages = (
        [Message.user(output)]
        if isinstance(output, str)
        else [output]
        if isinstance(output, Message)
        else list(output)
    )
    out: list[mcp.types.PromptMessage] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        parts = [p for p in message.parts if isinstance(p, TextPart) or hasattr(p, "media_type")]
        for block in content_to_mcp(cast(Any, parts)):
            out.append(mcp.types.PromptMessage(role=role, content=block))
    return out


# -- the server --------------------------------------------------------------------------------


_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Run this call?", "default": False},
        "reason": {"type": "string", "title": "Reason (told to the model)"},
    },
    "required": ["approve"],
}


async def _admitted(
    tool: Tool, arguments: Mapping[str, Any] | None, request: MCPRequest, policy: ApprovalPolicy
) -> mcp.types.CallToolResult | None:
    """None when the server's policy lets the call run; else the refusal the client gets.

    `ask` asks the client's user through MCP elicitation; a client that cannot elicit
    gets a refusal (nothing runs without a person's yes).
    """
    import json

    action, why = policy.action(tool, dict(arguments or {}))
    if action == "auto":
        return None
    if action == "deny":
        return _error_result(f"Not run: the server's approval policy denies {tool.name} ({why}).")
    shown = json.dumps(dict(arguments or {}), sort_keys=True, ensure_ascii=False)
    try:
        answer = await request.elicit(f"Allow {tool.name}({shown})? ({why})", _APPROVAL_SCHEMA)
    except Exception:  # the client cannot elicit (no capability, or it failed)
        return _error_result(
            f"Not run: {tool.name} needs a person's approval ({why}) and this client cannot "
            "ask its user (MCP elicitation)."
        )
    content = dict(answer.content or {})
    if answer.action == "accept" and content.get("approve") is True:
        return None
    reason = str(content.get("reason") or "").strip() or "no reason given"
    return _error_result(f"Not run: the user rejected this call ({reason}).")


class _Handlers:
    """The request handlers of a server built by `build_server`."""

    def __init__(
        self,
        sources: list[ToolSource],
        resources: Sequence[Resource],
        resource_templates: Sequence[ResourceTemplate],
        prompts: Sequence[Prompt],
        approvals: ApprovalPolicy | None = None,
    ) -> None:
        from mcp import UriTemplate

        self.sources = sources
        self.approvals = approvals
        self.resources = list(resources)
        self.resource_templates = list(resource_templates)
        self.templates = [(UriTemplate.parse(t.uri_template), t) for t in resource_templates]
        self.prompts = {p.name: p for p in prompts}

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: mcp.types.PaginatedRequestParams | None
    ) -> mcp.types.ListToolsResult:
        import mcp

        listed = await _all_tools(self.sources)
        return mcp.types.ListToolsResult(
            tools=[
                mcp.types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=dict(t.parameters),
                    annotations=mcp.types.ToolAnnotations(
                        read_only_hint=t.side_effects == "none",
                        idempotent_hint=t.side_effects != "irreversible",
                        destructive_hint=t.side_effects == "irreversible",
                    ),
                    _meta={SINKS_META: dict(t.sinks)} if t.sinks else None,
                )
                for t in listed.values()
            ]
        )

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mcp.types.CallToolRequestParams
    ) -> mcp.types.CallToolResult:
        tool = (await _all_tools(self.sources)).get(params.name)
        if tool is None:
            return _error_result(f"unknown tool {params.name!r}")
        request = MCPRequest(context=ctx)
        if self.approvals is not None:
            refused = await _admitted(tool, params.arguments, request, self.approvals)
            if refused is not None:
                return refused
        return await call_tool(tool, params.arguments, request)

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: mcp.types.PaginatedRequestParams | None
    ) -> mcp.types.ListResourcesResult:
        import mcp

        return mcp.types.ListResourcesResult(
            resources=[
                mcp.types.Resource(
                    uri=r.uri, name=r.name, description=r.description, mime_type=r.mime_type
                )
                for r in self.resources
            ]
        )

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: mcp.types.PaginatedRequestParams | None
    ) -> mcp.types.ListResourceTemplatesResult:
        import mcp

        return mcp.types.ListResourceTemplatesResult(
            resource_templates=[
                mcp.types.ResourceTemplate(
                    uri_template=t.uri_template,
                    name=t.name,
                    description=t.description,
                    mime_type=t.mime_type,
                )
                for t in self.resource_templates
            ]
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: mcp.types.ReadResourceRequestParams
    ) -> mcp.types.ReadResourceResult:
        import mcp

        uri = str(params.uri)
        for fixed in self.resources:
            if fixed.uri == uri:
                data = await _resolve(fixed.read())
                return mcp.types.ReadResourceResult(
                    contents=[_contents(uri, data, fixed.mime_type)]
                )
        for parsed, template in self.templates:
            variables = parsed.match(uri)
            if variables is not None:
                data = await _resolve(template.read(**variables))
                return mcp.types.ReadResourceResult(
                    contents=[_contents(uri, data, template.mime_type)]
                )
        raise mcp.MCPError(code=mcp.types.INVALID_PARAMS, message=f"unknown resource {uri!r}")

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: mcp.types.PaginatedRequestParams | None
    ) -> mcp.types.ListPromptsResult:
        import mcp

        return mcp.types.ListPromptsResult(
            prompts=[
                mcp.types.Prompt(
                    name=p.name,
                    description=p.description,
                    arguments=[
                        mcp.types.PromptArgument(
                            name=a.name, description=a.description, required=a.required
                        )
                        for a in p.arguments
                    ],
                )
                for p in self.prompts.values()
            ]
        )

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: mcp.types.GetPromptRequestParams
    ) -> mcp.types.GetPromptResult:
        import mcp

        prompt = self.prompts.get(params.name)
        if prompt is None:
            raise mcp.MCPError(
                code=mcp.types.INVALID_PARAMS, message=f"unknown prompt {params.name!r}"
            )
        arguments = dict(params.arguments or {})
        missing = [a.name for a in prompt.arguments if a.required and a.name not in arguments]
        if missing:
            raise mcp.MCPError(
                code=mcp.types.INVALID_PARAMS, message=f"missing prompt arguments: {missing}"
            )
        output = await _resolve(prompt.render(**arguments))
        return mcp.types.GetPromptResult(
            description=prompt.description, messages=_prompt_messages(output)
        )


def build_server(
    tools: Sequence[Servable | Agent[Any]] = (),
    *,
    name: str = "legato",
    instructions: str | None = None,
    resources: Sequence[Resource] = (),
    resource_templates: Sequence[ResourceTemplate] = (),
    prompts: Sequence[Prompt] = (),
    handlers: Mapping[str, Any] | None = None,
    approvals: ApprovalPolicy | None = None,
) -> Server[Any]:
    """An MCP server (the SDK's low-level `Server`) offering legato tools, resources, prompts.

    `tools` takes tools, functions, toolsets, other tool sources (an `MCPClient` too: a
    proxy) and agents (each becomes a tool taking a `prompt`). `handlers` passes further
    `on_*` handlers to the SDK server (completion, subscriptions, logging level).
    `approvals` decides each call before it runs: `auto` runs it, `deny` refuses it, `ask`
    asks the client's user through MCP elicitation (refused when the client cannot ask).
    """
    from mcp.server.lowlevel import Server

    h = _Handlers(_sources(tools), resources, resource_templates, prompts, approvals)
    options: dict[str, Any] = {"on_list_tools": h.list_tools, "on_call_tool": h.call_tool}
    if resources or resource_templates:
        options |= {
            "on_list_resources": h.list_resources,
            "on_list_resource_templates": h.list_resource_templates,
            "on_read_resource": h.read_resource,
        }
    if prompts:
        options |= {"on_list_prompts": h.list_prompts, "on_get_prompt": h.get_prompt}
    options |= dict(handlers or {})
    guard = _quiet_deprecations()
    try:
        return Server(name, version=__version__, instructions=instructions, **options)
    finally:
        guard.__exit__(None, None, None)


def as_server(
    obj: object, *, name: str | None = None, approvals: ApprovalPolicy | None = None
) -> Server[Any]:
    """An MCP server for `obj`: an SDK server as is; tools, toolsets, agents, lists wrapped.

    `approvals` applies to the wrapped ones (an SDK server's own handlers decide its calls).
    """
    from mcp.server.lowlevel import Server

    if isinstance(obj, Server):
        return cast(Server[Any], obj)
    if isinstance(obj, list | tuple):
        items = cast(Sequence[Servable | Agent[Any]], obj)
        return build_server(items, name=name or "legato", approvals=approvals)
    if isinstance(obj, Agent | Tool | ToolSource) or callable(obj):
        item = cast(Servable | Agent[Any], obj)
        default = getattr(cast(object, obj), "name", None)
        return build_server(
            [item],
            name=name or (default if isinstance(default, str) else "legato"),
            approvals=approvals,
        )
    msg = f"cannot serve {obj!r}: expected tools, a toolset, an agent or an MCP server"
    raise ConfigurationError(msg)


async def serve_stdio(server: Server[Any]) -> None:
    """Serve over this process's stdin and stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(
    server: Server[Any],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    retry_interval_ms: int | None = 100,
) -> None:
    """Serve over Streamable HTTP at `http://host:port/path` until cancelled.

    Localhost servers keep DNS-rebinding protection on (Host and Origin are checked).
    """
    import uvicorn

    app = server.streamable_http_app(
        streamable_http_path=path,
        event_store=_memory_event_store(),
        retry_interval=retry_interval_ms,
        host=host,
    )
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()


def _memory_event_store() -> Any:
    """An in-memory SSE event store, so a client reconnecting with `Last-Event-ID` resumes."""
    from mcp.server.streamable_http import EventMessage, EventStore

    class MemoryEventStore(EventStore):
        def __init__(self) -> None:
            self._events: list[tuple[str, str, Any]] = []

        async def store_event(self, stream_id: str, message: Any) -> str:
            event_id = str(len(self._events) + 1)
            self._events.append((stream_id, event_id, message))
            return event_id

        async def replay_events_after(
            self, last_event_id: str, send_callback: Callable[[Any], Awaitable[None]]
        ) -> str | None:
            stream = next((s for s, e, _ in self._events if e == last_event_id), None)
            if stream is None:
                return None
            for s, event_id, message in self._events:
                if s == stream and int(event_id) > int(last_event_id) and message is not None:
                    await send_callback(EventMessage(message, event_id))
            return stream

    return MemoryEventStore()
