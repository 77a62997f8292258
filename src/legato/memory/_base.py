"""Memory values and the `MemoryStore` / `Embedder` protocols."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, runtime_checkable

__all__ = [
    "Embedder",
    "MemoryItem",
    "MemoryKind",
    "MemoryStore",
    "Provenance",
    "Recalled",
    "Source",
]

MemoryKind: TypeAlias = Literal["fact", "episode", "preference"]
"""A `fact` about the world, an `episode` (what happened), a user's `preference`."""

Source: TypeAlias = Literal["user", "tool", "model", "agent", "import"]
"""Who produced an item: a user message, a tool result, the model (via the `remember`
tool), the program itself, or an import."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """Where a memory item came from."""

    source: Source = "agent"
    run_id: str | None = None
    """The run that produced it."""
    event_seq: int | None = None
    """The journal position of the producing event, when known."""
    tool_call_id: str | None = None
    """The tool call that produced it (the `remember` call, or a tool whose result it is)."""
    message_index: int | None = None
    """The index of the user message it came from, in the run's conversation."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryItem:
    """One remembered item."""

    id: str
    kind: MemoryKind
    text: str
    provenance: Provenance
    derived_from: tuple[str, ...] = ()
    """Items this one was derived from (a summary of episodes, a fact from a preference);
    forgetting any of them forgets this one too."""
    scope: str = ""
    """A namespace (a user, a project); empty for the global scope."""
    created_at: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Recalled:
    """An item found by a search, with its score (higher is better)."""

    item: MemoryItem
    score: float


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors, for optional semantic search next to full-text search."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, all of one length."""
        ...


@runtime_checkable
class MemoryStore(Protocol):
    """Long-term memory with provenance."""

    def remember(
        self,
        text: str,
        *,
        kind: MemoryKind = "fact",
        provenance: Provenance | None = None,
        derived_from: Sequence[str] = (),
        scope: str = "",
    ) -> MemoryItem:
        """Store an item; `derived_from` names the items it was made from."""
        ...

    def recall(
        self,
        query: str,
        *,
        limit: int = 5,
        kinds: Sequence[MemoryKind] | None = None,
        scope: str | None = None,
    ) -> list[Recalled]:
        """The items that best match `query`, best first."""
        ...

    def get(self, item_id: str) -> MemoryItem:
        """One item; `MemoryItemNotFound` if there is none with that id."""
        ...

    def forget(
        self,
        item_id: str | None = None,
        *,
        run_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> list[str]:
        """Delete items and every item derived from them, transitively; return their ids.

        Select by id, or everything produced by a run or by a tool call.
        """
        ...

    def items(self, *, scope: str | None = None, limit: int = 1000) -> list[MemoryItem]:
        """Stored items, newest first."""
        ...
