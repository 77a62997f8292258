"""Where an MCP server lives: a command to start (stdio) or a URL (HTTP), and `mcpServers` JSON."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias, cast

from legato.exceptions import ConfigurationError
from legato.mcp._auth import MCPOAuth

__all__ = ["HTTPServer", "ServerSpec", "StdioServer", "parse_mcp_servers"]


@dataclass(frozen=True, kw_only=True, slots=True)
class StdioServer:
    """A server started as a child process, spoken to over its stdin and stdout."""

    command: str
    """The program to run (looked up on PATH)."""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    """Extra environment variables (added to a minimal safe environment)."""
    cwd: str | None = None
    """The working directory of the process."""


@dataclass(frozen=True, kw_only=True, slots=True)
class HTTPServer:
    """A server reached over HTTP: Streamable HTTP (default) or the legacy SSE transport."""

    url: str
    headers: Mapping[str, str] = field(default_factory=lambda: {})
    """Sent with every request (e.g. an `Authorization` header)."""
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    auth: MCPOAuth | None = None
    """OAuth for servers that require authorization (see `MCPOAuth`)."""


ServerSpec: TypeAlias = StdioServer | HTTPServer
"""How to reach one MCP server."""

_HTTP_TYPES: dict[str, Literal["streamable_http", "sse"]] = {
    "http": "streamable_http",
    "streamable-http": "streamable_http",
    "streamable_http": "streamable_http",
    "streamableHttp": "streamable_http",
    "sse": "sse",
}


def _strings(value: object, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in cast(list[Any], value)):
        msg = f"{what} must be a list of strings"
        raise ConfigurationError(msg)
    return tuple(cast(list[str], value))


def _string_map(value: object, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        msg = f"{what} must be an object of strings"
        raise ConfigurationError(msg)
    items = cast(dict[Any, Any], value)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in items.items()):
        msg = f"{what} must be an object of strings"
        raise ConfigurationError(msg)
    return {str(k): str(v) for k, v in items.items()}


def _expand(text: str) -> str:
    return os.path.expandvars(text)


def _one_server(name: str, entry: object) -> ServerSpec:
    where = f"mcpServers.{name}"
    if not isinstance(entry, dict):
        msg = f"{where} must be an object"
        raise ConfigurationError(msg)
    spec = cast(dict[str, Any], entry)
    if "command" in spec:
        command = spec["command"]
        if not isinstance(command, str) or not command:
            msg = f"{where}.command must be a non-empty string"
            raise ConfigurationError(msg)
        env = _string_map(spec.get("env"), f"{where}.env")
        cwd = spec.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            msg = f"{where}.cwd must be a string"
            raise ConfigurationError(msg)
        return StdioServer(
            command=command,
            args=_strings(spec.get("args"), f"{where}.args"),
            env={k: _expand(v) for k, v in env.items()} or None,
            cwd=cwd,
        )
    url = spec.get("url") or spec.get("serverUrl")
    if isinstance(url, str) and url:
        kind = spec.get("type", spec.get("transport", "http"))
        transport = _HTTP_TYPES.get(str(kind))
        if transport is None:
            msg = f"{where}.type must be one of {sorted(_HTTP_TYPES)}, got {kind!r}"
            raise ConfigurationError(msg)
        headers = _string_map(spec.get("headers"), f"{where}.headers")
        return HTTPServer(
            url=url,
            headers={k: _expand(v) for k, v in headers.items()},
            transport=transport,
        )
    msg = f"{where} needs either 'command' (stdio) or 'url' (HTTP)"
    raise ConfigurationError(msg)


def parse_mcp_servers(config: Mapping[str, Any] | str | Path) -> dict[str, ServerSpec]:
    """Read the common `{"mcpServers": {name: {...}}}` format (Claude Desktop, Cursor, ...).

    `config` is the parsed JSON, a JSON string, or a path to a JSON file. Each entry has
    either `command` (with optional `args`, `env`, `cwd`) or `url` (with optional
    `headers` and `type`: `http` / `streamable-http` / `sse`). `${VAR}` in `env` and
    `headers` values is expanded from the environment. Disabled entries
    (`"disabled": true`) are skipped.
    """
    data: object
    if isinstance(config, Path):
        try:
            data = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            msg = f"cannot read MCP configuration {str(config)!r}: {exc}"
            raise ConfigurationError(msg) from exc
    elif isinstance(config, str):
        try:
            data = json.loads(config)
        except ValueError as exc:
            msg = f"MCP configuration is not valid JSON: {exc}"
            raise ConfigurationError(msg) from exc
    else:
        data = config
    if not isinstance(data, dict) or not isinstance(
        cast(dict[str, Any], data).get("mcpServers"), dict
    ):
        msg = "MCP configuration must be an object with an 'mcpServers' object"
        raise ConfigurationError(msg)
    servers = cast(dict[str, object], cast(dict[str, Any], data)["mcpServers"])
    specs: dict[str, ServerSpec] = {}
    for name, entry in servers.items():
        if isinstance(entry, dict) and cast(dict[str, Any], entry).get("disabled") is True:
            continue
        specs[name] = _one_server(name, cast(object, entry))
    return specs
