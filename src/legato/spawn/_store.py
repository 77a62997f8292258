"""Where child journals live until the SQLite store takes over: the `JournalStore` protocol."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from legato.events import Journal, JournalEvent, Lineage

__all__ = ["ChildRecord", "JournalStore", "MemoryJournalStore"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildRecord:
    """What a parent asked of a child: enough to resume the child from its journal."""

    lineage: Lineage
    task: str
    tools: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    max_steps: int | None = None
    max_tokens: int | None = None
    background: bool = False


@runtime_checkable
class JournalStore(Protocol):
    """Durable journals of runs, and the parent-child links between them.

    Every journal event of a child is appended as it happens, so an interrupted child can
    be resumed from what was stored. The SQLite store implements the same four methods.
    """

    async def append(self, run_id: str, event: JournalEvent) -> None:
        """Record one more event of a run."""
        ...

    async def load(self, run_id: str) -> Journal | None:
        """The run's journal so far, or None if nothing was stored."""
        ...

    async def link(self, record: ChildRecord) -> None:
        """Remember that a parent started a child (idempotent per child run id)."""
        ...

    async def children(self, parent_run_id: str) -> Sequence[ChildRecord]:
        """The children a run started, in the order they were linked."""
        ...


class MemoryJournalStore:
    """An in-process `JournalStore` (lost when the process ends)."""

    __slots__ = ("_children", "_events")

    def __init__(self) -> None:
        self._events: dict[str, list[JournalEvent]] = {}
        self._children: dict[str, dict[str, ChildRecord]] = {}

    async def append(self, run_id: str, event: JournalEvent) -> None:
        """Record an event."""
        self._events.setdefault(run_id, []).append(event)

    async def load(self, run_id: str) -> Journal | None:
        """A copy of the run's journal."""
        events = self._events.get(run_id)
        return None if events is None else Journal(events)

    async def link(self, record: ChildRecord) -> None:
        """Remember a child."""
        linked = self._children.setdefault(record.lineage.parent_run_id, {})
        linked.setdefault(record.lineage.run_id, record)

    async def children(self, parent_run_id: str) -> Sequence[ChildRecord]:
        """The children of a run."""
        return list(self._children.get(parent_run_id, {}).values())
