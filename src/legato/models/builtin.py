"""Tools the provider runs itself, asked for in neutral form.

```python
from legato.models import ModelSettings
from legato.models.builtin import CodeExecution, WebSearch

settings = ModelSettings(
    builtin_tools=(WebSearch(max_uses=3, allowed_domains=("python.org",)), CodeExecution())
)
assert settings.builtin_tools is not None and settings.builtin_tools[0].kind == "web_search"
```

Each provider that offers a tool translates it into its own request shape; a provider that
does not, or an option it does not accept, raises `UnsupportedFeature` (naming both) before
the request is sent. Which provider runs which tool is a capability flag of its profile
(`ModelProfile.builtin_tools`); the table in docs/providers.md is generated from those
flags. What the tools did comes back in the message's `provider_details` (kept in the
journal with it), and searches are counted in `Usage.web_searches` and priced where the
provider charges for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = [
    "BUILTIN_KINDS",
    "BuiltinKind",
    "BuiltinTool",
    "CodeExecution",
    "FileSearch",
    "MCPConnector",
    "UserLocation",
    "WebFetch",
    "WebSearch",
]

BuiltinKind = Literal["web_search", "web_fetch", "code_execution", "file_search", "mcp"]
BUILTIN_KINDS: tuple[BuiltinKind, ...] = (
    "web_search",
    "web_fetch",
    "code_execution",
    "file_search",
    "mcp",
)
"""Every kind of provider-run tool, in the order the docs' table lists them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UserLocation:
    """Where the user is, roughly, to localise search results."""

    city: str | None = None
    region: str | None = None
    country: str | None = None
    """Two-letter ISO country code, e.g. `FR`."""
    timezone: str | None = None
    """IANA time zone, e.g. `Europe/Paris`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSearch:
    """Search the web (Anthropic, OpenAI Responses, Gemini's Google Search)."""

    max_uses: int | None = None
    """Searches allowed in one response (Anthropic only)."""
    allowed_domains: tuple[str, ...] | None = None
    """Only these domains (Anthropic, OpenAI)."""
    blocked_domains: tuple[str, ...] | None = None
    """Never these domains (Anthropic, Gemini)."""
    user_location: UserLocation | None = None
    """Localise results (Anthropic, OpenAI)."""
    kind: Literal["web_search"] = "web_search"


@dataclass(frozen=True, slots=True, kw_only=True)
class WebFetch:
    """Fetch the pages at URLs the conversation names (Anthropic web fetch, Gemini URL context)."""

    max_uses: int | None = None
    """Fetches allowed in one response (Anthropic only)."""
    allowed_domains: tuple[str, ...] | None = None
    """Only these domains (Anthropic only)."""
    blocked_domains: tuple[str, ...] | None = None
    """Never these domains (Anthropic only)."""
    kind: Literal["web_fetch"] = "web_fetch"


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeExecution:
    """Run code in the provider's sandbox (Anthropic, OpenAI's code interpreter, Gemini)."""

    kind: Literal["code_execution"] = "code_execution"


@dataclass(frozen=True, slots=True, kw_only=True)
class FileSearch:
    """Search files already uploaded to the provider (OpenAI vector stores, Gemini stores)."""

    stores: tuple[str, ...]
    """The provider's ids of the stores to search (vector store ids, file search stores)."""
    max_results: int | None = None
    kind: Literal["file_search"] = "file_search"


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPConnector:
    """An MCP server the provider calls itself (Anthropic's MCP connector, OpenAI's `mcp`).

    legato's own MCP client (`legato.mcp`) runs servers on this side instead, through the
    effect gate; a connector's calls are made by the provider and never pass the gate.
    """

    name: str
    """The label the provider shows the model."""
    url: str
    """The server's Streamable HTTP URL (the provider must be able to reach it)."""
    authorization: str | None = None
    """An OAuth bearer token for the server."""
    allowed_tools: tuple[str, ...] | None = None
    """Only these tools of the server."""
    kind: Literal["mcp"] = "mcp"


BuiltinTool: TypeAlias = WebSearch | WebFetch | CodeExecution | FileSearch | MCPConnector
"""A tool the provider runs itself."""
