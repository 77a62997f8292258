"""A versioned tool registry: tools may come and go while runs use them, never silently.

`ToolRegistry` is a `ToolSource`. Each entry has a version; the tools it lists are guarded
copies that remember the entry version they were listed at. Calling one after its entry
was removed or replaced raises `PhantomTool` (a tool error the model sees) instead of
running a tool that no longer exists, or a different tool under the same name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from legato.exceptions import PhantomTool, ToolDefinitionError
from legato.tools import RunContext, Tool

__all__ = ["ToolRegistry"]


@dataclass(frozen=True, slots=True)
class _Entry:
    tool: Tool
    version: int


class ToolRegistry:
    """Tools that can be added, replaced and removed at run time, each change versioned."""

    def __init__(
        self, tools: Iterable[Tool] = (), *, name: str = "registry", enforce: bool = True
    ) -> None:
        self._name = name
        self._version = 0
        self._entries: dict[str, _Entry] = {}
        self.enforce = enforce
        for t in tools:
            self.add(t)

    @property
    def name(self) -> str:
        """The registry's name."""
        return self._name

    @property
    def version(self) -> int:
        """Bumped by every change."""
        return self._version

    def add(self, tool: Tool) -> int:
        """Add a tool; returns the registry version."""
        if tool.name in self._entries:
            msg = f"registry {self._name!r} already has a tool named {tool.name!r}; use replace()"
            raise ToolDefinitionError(msg)
        return self._set(tool)

    def replace(self, tool: Tool) -> int:
        """Put a new definition in place of the tool of the same name."""
        if tool.name not in self._entries:
            msg = f"registry {self._name!r} has no tool named {tool.name!r} to replace"
            raise ToolDefinitionError(msg)
        return self._set(tool)

    def remove(self, name: str) -> int:
        """Take a tool out."""
        if self._entries.pop(name, None) is None:
            msg = f"registry {self._name!r} has no tool named {name!r}"
            raise ToolDefinitionError(msg)
        self._version += 1
        return self._version

    def _set(self, tool: Tool) -> int:
        self._version += 1
        self._entries[tool.name] = _Entry(tool, self._version)
        return self._version

    async def list_tools(self) -> Sequence[Tool]:
        """Guarded copies of the tools as they are now."""
        return [self._guarded(e) for e in self._entries.values()]

    def check(self, name: str, version: int) -> None:
        """Raise `PhantomTool` unless `name` is still the entry listed at `version`."""
        if not self.enforce:
            return
        entry = self._entries.get(name)
        if entry is None:
            msg = (
                f"tool {name!r} was removed after you were shown it (registry version "
                f"{self._version}); it was not called. Use the tools you are shown now."
            )
            raise PhantomTool(name, msg)
        if entry.version != version:
            msg = (
                f"tool {name!r} was replaced after you were shown it; it was not called. "
                "Check its current definition and call it again."
            )
            raise PhantomTool(name, msg)

    def _guarded(self, entry: _Entry) -> Tool:
        original, version = entry.tool, entry.version

        async def guarded(ctx: RunContext[Any], /, **kwargs: Any) -> Any:
            self.check(original.name, version)
            return await original.invoke(kwargs, ctx)

        return replace(original, function=guarded, context_parameter="ctx", context_positional=True)
