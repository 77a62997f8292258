"""`Toolset`: a named group of tools, and the `ToolSource` protocol agents read tools from."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from legato.exceptions import ToolDefinitionError
from legato.tools._tool import Tool

__all__ = ["ToolSource", "Toolset", "as_tool"]


@runtime_checkable
class ToolSource(Protocol):
    """Anything that can list tools: a `Toolset`, an MCP server, a catalog.

    `list_tools` is called before each model request, so a source whose tools change
    (an MCP server announcing `list_changed`) is seen as it is now.
    """

    @property
    def name(self) -> str:
        """A name for errors and logs."""
        ...

    async def list_tools(self) -> Sequence[Tool]:
        """The tools this source offers right now."""
        ...


def as_tool(item: Tool | Callable[..., Any]) -> Tool:
    """A `Tool` for a tool or a plain function."""
    if isinstance(item, Tool):
        return item
    if callable(item):
        return Tool.from_function(item)
    msg = f"not a tool or a function: {item!r}"
    raise ToolDefinitionError(msg)


class Toolset:
    """A named, immutable group of tools; filter and prefix it to make new groups."""

    __slots__ = ("_name", "_tools")

    def __init__(
        self, tools: Iterable[Tool | Callable[..., Any]] = (), *, name: str = "tools"
    ) -> None:
        built = [as_tool(t) for t in tools]
        by_name: dict[str, Tool] = {}
        for t in built:
            if t.name in by_name:
                msg = f"toolset {name!r}: two tools are named {t.name!r}"
                raise ToolDefinitionError(msg)
            by_name[t.name] = t
        self._name = name
        self._tools = by_name

    @property
    def name(self) -> str:
        """The toolset's name."""
        return self._name

    async def list_tools(self) -> Sequence[Tool]:
        """The tools, in definition order."""
        return list(self._tools.values())

    @property
    def tools(self) -> list[Tool]:
        """The tools, in definition order."""
        return list(self._tools.values())

    def get(self, name: str) -> Tool | None:
        """The tool with this name, if any."""
        return self._tools.get(name)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def filter(self, keep: Callable[[Tool], bool] | Iterable[str]) -> Toolset:
        """A toolset with only the tools `keep` accepts (a predicate or a set of names)."""
        if callable(keep):
            kept = [t for t in self._tools.values() if keep(t)]
        else:
            names = set(keep)
            unknown = names - set(self._tools)
            if unknown:
                msg = f"toolset {self._name!r} has no tools named {sorted(unknown)}"
                raise ToolDefinitionError(msg)
            kept = [t for t in self._tools.values() if t.name in names]
        return Toolset(kept, name=self._name)

    def prefixed(self, prefix: str, *, separator: str = "_") -> Toolset:
        """A toolset whose tool names start with `prefix` and `separator`."""
        renamed = [replace(t, name=f"{prefix}{separator}{t.name}") for t in self._tools.values()]
        return Toolset(renamed, name=f"{prefix}{separator}{self._name}")

    def __repr__(self) -> str:
        return f"Toolset(name={self._name!r}, tools={list(self._tools)})"
