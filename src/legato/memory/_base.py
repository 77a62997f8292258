"""Memory values and the `MemoryStore` / `Embedder` protocols."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, runtime_checkable

__all__ = [
    "Embedder",
    "Forgotten",
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
    expires_at: float | None = None
    """Unix time from which the item is never recalled or listed (None: it does not expire).
    An item derived from others expires no later than they do."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Forgotten:
    """What `forget` (or `purge_expired`) removed: the items, and their traces in the store.

    Besides the items, the store that shares the memory's database is redacted where
    legato put memory text: `recall` results and `remember` calls in stored session
    messages and run journals, recall blocks in journaled instructions, and summaries made
    from them (see `docs/memory.md`, "What forgetting removes").
    """

    items: tuple[str, ...] = ()
    """Ids of the deleted items: those selected and everything derived from them."""
    messages: int = 0
    """Stored session messages in which memory text was redacted."""
    sessions: tuple[str, ...] = ()
    """The sessions those messages belong to."""
    contexts: tuple[str, ...] = ()
    """Sessions whose carried-over compacted view was dropped (their next run compacts
    again from the redacted messages)."""
    events: int = 0
    """Run journal events in which memory text or a summary was redacted."""
    runs: tuple[str, ...] = ()
    """The runs those events belong to."""


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
        ttl: float | None = None,
        expires_at: float | None = None,
    ) -> MemoryItem:
        """Store an item; `derived_from` names the items it was made from.

        `ttl` (seconds from now) or `expires_at` (Unix time) makes it expire.
        """
        ...

    def recall(
        self,
        query: str,
        *,
        limit: int = 5,
        kinds: Sequence[MemoryKind] | None = None,
        scope: str | None = None,
    ) -> list[Recalled]:
        """The items that best match `query`, best first (never an expired one)."""
        ...

    def get(self, item_id: str) -> MemoryItem:
        """One item; `MemoryItemNotFound` if there is none with that id (or it expired)."""
        ...

    def forget(
        self,
        item_id: str | None = None,
        *,
        run_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> Forgotten:
        """Delete items and every item derived from them, transitively, and their traces.

        Select by id, or everything produced by a run or by a tool call.
        """
        ...

    def purge_expired(self) -> Forgotten:
        """Forget every expired item (as `forget` does: derived items and traces too)."""
        ...

    def items(self, *, scope: str | None = None, limit: int = 1000) -> list[MemoryItem]:
        """Stored items that have not expired, newest first."""
        ...
