"""`ToolCatalog`: keep a large tool set out of the context until the model asks for it.

An agent connected to many MCP servers can hold hundreds of tools; sending every schema
with every request costs tokens and attention. Above `threshold` tools, a catalog sends
only a `search_tools` meta-tool (whose description carries a compact index: the tool
names) plus the tools loaded so far. The model calls `search_tools` with a query or with
names from the index; the matching tools are loaded and their full schemas are sent from
the next request on. Below the threshold the catalog is transparent.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from legato.exceptions import ToolDefinitionError, ToolError
from legato.tools._tool import Tool
from legato.tools._toolset import Toolset, ToolSource, as_tool

__all__ = ["ToolCatalog", "tokenize"]

_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")
_STOP = frozenset(
    "a an and are as at be by for from in into is it its of on or the this to with your you "
    "my me i please can could would should that which".split()
)


# Words tool descriptions and requests use for the same few operations, mapped to one.
_VERBS = {
    "add": "create",
    "make": "create",
    "new": "create",
    "open": "create",
    "setup": "create",
    "remove": "delete",
    "erase": "delete",
    "drop": "delete",
    "destroy": "delete",
    "rid": "delete",
    "fetch": "get",
    "read": "get",
    "show": "get",
    "view": "get",
    "look": "get",
    "detail": "get",
    "enumerate": "list",
    "browse": "list",
    "all": "list",
    "every": "list",
    "edit": "update",
    "modify": "update",
    "change": "update",
    "rename": "update",
    "adjust": "update",
    "find": "search",
    "lookup": "search",
}


def _stem(word: str) -> str:
    for suffix, keep in (
        ("ies", "y"),
        ("sses", "ss"),
        ("ing", ""),
        ("ed", ""),
        ("es", ""),
        ("s", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: len(word) - len(suffix)] + keep
    return word


def tokenize(text: str) -> list[str]:
    """Lower-cased, crudely stemmed words of `text` (splits snake_case and camelCase).

    Common synonyms of the basic operations (make/add -> create, remove -> delete, ...)
    become one word, so "remove a file" finds `delete_file`.
    """
    words = (w.lower() for w in _WORD.findall(text))
    stems = (_stem(w) for w in words if w not in _STOP)
    return [_VERBS.get(w, w) for w in stems]


def _tool_text(t: Tool) -> str:
    props = t.parameters.get("properties")
    params = " ".join(props) if isinstance(props, dict) else ""
    return f"{t.name} {t.name} {t.description} {params}"


class _Index:
    """BM25 over tool names, descriptions and parameter names."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tools = list(tools)
        self.docs = [Counter(tokenize(_tool_text(t))) for t in self.tools]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.average = (sum(self.lengths) / len(self.lengths)) if self.lengths else 1.0
        df: Counter[str] = Counter()
        for doc in self.docs:
            df.update(doc.keys())
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}

    def search(self, query: str, limit: int) -> list[Tool]:
        terms = tokenize(query)
        scored: list[tuple[float, int]] = []
        for i, doc in enumerate(self.docs):
            score = 0.0
            norm = 1.2 * (0.25 + 0.75 * self.lengths[i] / self.average)
            for term in terms:
                tf = doc.get(term, 0)
                if tf:
                    score += self.idf[term] * tf * 2.2 / (tf + norm)
            if score > 0:
                scored.append((score, i))
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [self.tools[i] for _, i in scored[:limit]]


class ToolCatalog:
    """A tool source that shows a large tool set through a `search_tools` meta-tool.

    ```python
    catalog = ToolCatalog(github, jira, slack, threshold=40)
    agent = Agent(model, tools=[catalog])
    ```

    Args:
        sources: Tool sources (toolsets, MCP clients), tools or functions.
        threshold: Up to this many tools, all are sent as usual.
        max_results: Tools a query loads at most.
        max_loaded: Tools kept loaded at most (the least recently used are dropped).
        index: `names` puts every tool name in the meta-tool's description (the model can
            load by name); `none` leaves it out (the model finds tools by query only).
        name: The catalog's name.
        native: Let the provider search where it can: every tool not yet loaded goes
            to the model deferred (Anthropic's tool search, OpenAI's `defer_loading`), and
            `search_tools` goes only to providers without a tool search of their own
            (where the deferred tools are left out, as without `native`).

    The loaded set belongs to the catalog, so give each agent (or conversation) its own
    catalog, or call `reset()` between runs.
    """

    def __init__(
        self,
        *sources: ToolSource | Tool | Callable[..., Any],
        threshold: int = 40,
        max_results: int = 5,
        max_loaded: int = 30,
        index: Literal["names", "none"] = "names",
        name: str = "catalog",
        native: bool = False,
    ) -> None:
        if threshold < 0 or max_results < 1 or max_loaded < 1:
            msg = "threshold must be >= 0 and max_results, max_loaded >= 1"
            raise ToolDefinitionError(msg)
        loose = [s for s in sources if isinstance(s, Tool) or not isinstance(s, ToolSource)]
        self._sources: list[ToolSource] = [
            s for s in sources if isinstance(s, ToolSource) and not isinstance(s, Tool)
        ]
        if loose:
            self._sources.insert(0, Toolset([as_tool(t) for t in loose], name=f"{name}-tools"))
        self._name = name
        self.threshold = threshold
        self.max_results = max_results
        self.max_loaded = max_loaded
        self._index_mode = index
        self.native = native
        self._loaded: OrderedDict[str, None] = OrderedDict()
        self._tools: dict[str, Tool] = {}
        self._index: _Index | None = None
        self._indexed: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The catalog's name."""
        return self._name

    @property
    def loaded(self) -> list[str]:
        """Names of the tools loaded so far, oldest first."""
        return list(self._loaded)

    def reset(self) -> None:
        """Forget the loaded tools."""
        self._loaded.clear()

    async def all_tools(self) -> list[Tool]:
        """Every tool of every source (the first of two tools with one name wins)."""
        tools: dict[str, Tool] = {}
        for source in self._sources:
            for t in await source.list_tools():
                tools.setdefault(t.name, t)
        self._tools = tools
        names = tuple(tools)
        if names != self._indexed:
            self._index = _Index(list(tools.values()))
            self._indexed = names
        return list(tools.values())

    async def list_tools(self) -> Sequence[Tool]:
        """All tools when few; otherwise `search_tools` and the loaded tools."""
        tools = await self.all_tools()
        if len(tools) <= self.threshold:
            return tools
        loaded = [self._tools[n] for n in self._loaded if n in self._tools]
        if not self.native:
            return [self._search_tool(), *loaded]
        # The provider's own tool search where it has one (the other tools go deferred);
        # `search_tools` where it has none (the deferred tools are then not sent).
        search = dataclasses.replace(self._search_tool(), search_fallback=True)
        rest = [
            dataclasses.replace(t, defer_loading=True)
            for n, t in self._tools.items()
            if n not in self._loaded
        ]
        return [search, *loaded, *rest]

    def search(self, query: str, limit: int | None = None) -> list[Tool]:
        """The tools best matching `query` (call `all_tools` or `list_tools` first)."""
        if self._index is None:
            return []
        return self._index.search(query, limit or self.max_results)

    def load(self, names: Iterable[str]) -> list[str]:
        """Load tools by name; return the names that exist."""
        found: list[str] = []
        for n in names:
            if n in self._tools:
                self._loaded[n] = None
                self._loaded.move_to_end(n)
                found.append(n)
        while len(self._loaded) > self.max_loaded:
            self._loaded.popitem(last=False)
        return found

    def _search_tool(self) -> Tool:
        index = ""
        if self._index_mode == "names":
            index = " Tools available: " + ", ".join(sorted(self._tools)) + "."
        description = (
            f"Find and load tools among {len(self._tools)}. Give a short description of the "
            "task as `query`, or exact tool `names`; the matching tools (their full "
            "descriptions and parameters) become callable from your next step." + index
        )
        return Tool.from_schema(
            name="search_tools",
            description=description,
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What the tool should do."},
                    "names": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Exact tool names to load.",
                    },
                },
            },
            function=self._run_search,
            metadata={"catalog": self._name},
        )

    async def _run_search(self, query: str = "", names: list[str] | None = None) -> str:
        picked = self.load(names or [])
        unknown = sorted(set(names or ()) - set(picked))
        if query:
            picked += [n for n in self.load(t.name for t in self.search(query)) if n not in picked]
        if not picked:
            hint = f" Unknown names: {unknown}." if unknown else ""
            msg = f"no tools match.{hint} Try other words, or names from the list."
            raise ToolError(msg)
        lines = [
            f"- {n}: {self._tools[n].description.splitlines()[0] if self._tools[n].description else ''}"
            for n in picked
        ]
        note = f"\nUnknown names: {unknown}" if unknown else ""
        return "Loaded; you can call these tools now:\n" + "\n".join(lines) + note
