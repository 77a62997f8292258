"""MCP: use tools, resources and prompts of Model Context Protocol servers.

```python
from legato.mcp import MCPClient, StdioServer

time = MCPClient(StdioServer(command="mcp-server-time"), name="time")
agent = Agent(model, tools=[time])       # the server's tools, listed before each request
```

Servers that require OAuth: `HTTPServer(url=..., auth=MCPOAuth(authorize=ask_in_terminal()))`.

Needs the `mcp` extra (`pip install 'legato[mcp]'`); the SDK is imported on first use.
Serving legato tools over MCP lives in `legato.mcp.server`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from legato._agent_spec import McpHttp, McpStdio, register_mcp_factory
from legato.mcp._auth import (
    AuthorizationCode,
    Authorizer,
    FileTokenStore,
    MCPOAuth,
    MemoryTokenStore,
    TokenStore,
    ask_in_terminal,
    follow_redirect,
    parse_redirect,
)
from legato.mcp._client import (
    MCPClient,
    PromptArgumentInfo,
    PromptInfo,
    ResourceInfo,
    ResourceTemplateInfo,
    ToolCallResult,
)
from legato.mcp._config import HTTPServer, ServerSpec, StdioServer, parse_mcp_servers
from legato.mcp._convert import NameMap
from legato.mcp._handlers import (
    ElicitationHandler,
    ElicitationRequest,
    ElicitationResponse,
    ProgressHandler,
    ProgressUpdate,
    SamplingHandler,
    SamplingRequest,
    accept_defaults,
    sample_with,
)

__all__ = [
    "AuthorizationCode",
    "Authorizer",
    "ElicitationHandler",
    "ElicitationRequest",
    "ElicitationResponse",
    "FileTokenStore",
    "HTTPServer",
    "MCPClient",
    "MCPOAuth",
    "MemoryTokenStore",
    "NameMap",
    "ProgressHandler",
    "ProgressUpdate",
    "PromptArgumentInfo",
    "PromptInfo",
    "ResourceInfo",
    "ResourceTemplateInfo",
    "SamplingHandler",
    "SamplingRequest",
    "ServerSpec",
    "StdioServer",
    "TokenStore",
    "ToolCallResult",
    "accept_defaults",
    "agent_file_client",
    "ask_in_terminal",
    "clients_from_config",
    "follow_redirect",
    "parse_mcp_servers",
    "parse_redirect",
    "sample_with",
]


def clients_from_config(
    config: Mapping[str, Any] | str | Path, *, prefix_names: bool = False, **options: Any
) -> list[MCPClient]:
    """One `MCPClient` per entry of an `mcpServers` configuration.

    `prefix_names` prefixes each server's tool names with the server's name (useful when
    two servers offer tools of the same name); `options` go to every `MCPClient`.
    """
    return [
        MCPClient(spec, name=name, prefix=name if prefix_names else None, **options)
        for name, spec in parse_mcp_servers(config).items()
    ]


def agent_file_client(server: McpStdio | McpHttp, name: str) -> MCPClient:
    """The tool source of an agent file's `mcp:` entry (its secrets already read).

    Registered with `legato.agent_file.register_mcp_factory` when this package is imported.
    """
    if isinstance(server, McpStdio):
        target: ServerSpec = StdioServer(
            command=server.command, args=tuple(server.args), env=server.env or None, cwd=server.cwd
        )
    else:
        target = HTTPServer(url=server.url, headers=server.headers)
    return MCPClient(target, name=name)


# agent files reach MCP servers through this package, never by importing it (the layers)
register_mcp_factory(agent_file_client)
