"""Provider-run tools (`legato.models.builtin`) in each wire's request shape.

One function per wire API. Each raises `UnsupportedFeature`, naming the provider and the
option, for an option its provider does not accept; whether the provider runs the kind at
all is checked earlier against its profile (`check_request`). Shapes follow the providers'
request types as their SDKs declare them (Anthropic `WebSearchTool20250305Param`,
`WebFetchTool20250910Param`, `CodeExecutionTool20250825Param`, beta `mcp_servers` /
`mcp_toolset`; OpenAI Responses `WebSearchToolParam`, `FileSearchToolParam`,
`CodeInterpreter`, `Mcp`; Gemini `Tool.google_search` / `url_context` / `code_execution` /
`file_search`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, assert_never, cast

from legato.exceptions import UnsupportedFeature
from legato.models.builtin import (
    BuiltinTool,
    CodeExecution,
    FileSearch,
    MCPConnector,
    UserLocation,
    WebFetch,
    WebSearch,
)

__all__ = ["ANTHROPIC_MCP_BETA", "anthropic_builtin", "gemini_builtin", "responses_builtin"]

Obj = dict[str, Any]

_ANTHROPIC, _OPENAI, _GEMINI = "anthropic", "openai", "gemini"

ANTHROPIC_MCP_BETA = "mcp-client-2025-11-20"
"""The `anthropic-beta` header value the MCP connector needs."""


def _refuse(provider: str, tool: BuiltinTool, option: str, reason: str) -> UnsupportedFeature:
    return UnsupportedFeature(provider, f"{tool.kind}.{option}", reason)


def _unoffered(provider: str, tool: BuiltinTool) -> UnsupportedFeature:
    return UnsupportedFeature(provider, f"the built-in tool {tool.kind!r}")


def _set(out: Obj, **fields: object) -> Obj:
    """`out` with the fields that are not None (tuples as lists)."""
    for key, value in fields.items():
        if value is not None:
            out[key] = list(cast(tuple[object, ...], value)) if isinstance(value, tuple) else value
    return out


def _location(where: UserLocation) -> Obj:
    return _set(
        {"type": "approximate"},
        city=where.city,
        region=where.region,
        country=where.country,
        timezone=where.timezone,
    )


def _one_domain_list(provider: str, tool: WebSearch | WebFetch) -> None:
    if tool.allowed_domains is not None and tool.blocked_domains is not None:
        raise _refuse(
            provider, tool, "blocked_domains", "give allowed_domains or blocked_domains, not both"
        )


# -- Anthropic Messages -------------------------------------------------------------------------


def anthropic_builtin(tools: Iterable[BuiltinTool]) -> tuple[list[Obj], list[Obj]]:
    """(entries for `tools`, entries for `mcp_servers`)."""
    out: list[Obj] = []
    servers: list[Obj] = []
    for tool in tools:
        match tool:
            case WebSearch():
                _one_domain_list(_ANTHROPIC, tool)
                entry = _set(
                    {"type": "web_search_20250305", "name": "web_search"},
                    max_uses=tool.max_uses,
                    allowed_domains=tool.allowed_domains,
                    blocked_domains=tool.blocked_domains,
                )
                if tool.user_location is not None:
                    entry["user_location"] = _location(tool.user_location)
                out.append(entry)
            case WebFetch():
                _one_domain_list(_ANTHROPIC, tool)
                out.append(
                    _set(
                        {"type": "web_fetch_20250910", "name": "web_fetch"},
                        max_uses=tool.max_uses,
                        allowed_domains=tool.allowed_domains,
                        blocked_domains=tool.blocked_domains,
                    )
                )
            case CodeExecution():
                out.append({"type": "code_execution_20250825", "name": "code_execution"})
            case MCPConnector():
                servers.append(
                    _set(
                        {"type": "url", "url": tool.url, "name": tool.name},
                        authorization_token=tool.authorization,
                    )
                )
                toolset: Obj = {"type": "mcp_toolset", "mcp_server_name": tool.name}
                if tool.allowed_tools is not None:
                    toolset["default_config"] = {"enabled": False}
                    toolset["configs"] = {name: {"enabled": True} for name in tool.allowed_tools}
                out.append(toolset)
            case FileSearch():
                raise _unoffered(_ANTHROPIC, tool)
            case _:
                assert_never(tool)
    return out, servers


# -- OpenAI Responses -----------------------------------------------------------------------------


def responses_builtin(tools: Iterable[BuiltinTool]) -> list[Obj]:
    """Entries for the Responses `tools` list."""
    out: list[Obj] = []
    for tool in tools:
        match tool:
            case WebSearch():
                if tool.max_uses is not None:
                    raise _refuse(_OPENAI, tool, "max_uses", "OpenAI has no per-tool limit")
                if tool.blocked_domains is not None:
                    raise _refuse(_OPENAI, tool, "blocked_domains", "OpenAI only allows lists")
                entry: Obj = {"type": "web_search"}
                if tool.allowed_domains is not None:
                    entry["filters"] = {"allowed_domains": list(tool.allowed_domains)}
                if tool.user_location is not None:
                    entry["user_location"] = _location(tool.user_location)
                out.append(entry)
            case CodeExecution():
                out.append({"type": "code_interpreter", "container": {"type": "auto"}})
            case FileSearch():
                out.append(
                    _set(
                        {"type": "file_search", "vector_store_ids": list(tool.stores)},
                        max_num_results=tool.max_results,
                    )
                )
            case MCPConnector():
                out.append(
                    _set(
                        {
                            "type": "mcp",
                            "server_label": tool.name,
                            "server_url": tool.url,
                            "require_approval": "never",
                        },
                        authorization=tool.authorization,
                        allowed_tools=tool.allowed_tools,
                    )
                )
            case WebFetch():
                raise _unoffered(_OPENAI, tool)
            case _:
                assert_never(tool)
    return out


# -- Gemini ---------------------------------------------------------------------------------------


def gemini_builtin(tools: Iterable[BuiltinTool]) -> list[Obj]:
    """Entries for the `tools` list of a `GenerateContentConfig`."""
    out: list[Obj] = []
    for tool in tools:
        match tool:
            case WebSearch():
                for option in ("max_uses", "allowed_domains", "user_location"):
                    if getattr(tool, option) is not None:
                        raise _refuse(_GEMINI, tool, option, "Google Search does not take it")
                search: Obj = {}
                if tool.blocked_domains is not None:
                    search["exclude_domains"] = list(tool.blocked_domains)
                out.append({"google_search": search})
            case WebFetch():
                for option in ("max_uses", "allowed_domains", "blocked_domains"):
                    if getattr(tool, option) is not None:
                        raise _refuse(_GEMINI, tool, option, "URL context does not take it")
                out.append({"url_context": {}})
            case CodeExecution():
                out.append({"code_execution": {}})
            case FileSearch():
                out.append(
                    {
                        "file_search": _set(
                            {"file_search_store_names": list(tool.stores)}, top_k=tool.max_results
                        )
                    }
                )
            case MCPConnector():
                raise _unoffered(_GEMINI, tool)
            case _:
                assert_never(tool)
    return out
