"""Where child journals live: the `JournalStore` protocol, in memory or in the run's store.

A child run writes its journal ahead through its own recorder, like any run; a
`JournalStore` is what it writes to (`append_events`), plus what a resuming parent reads:
a child's journal (`load`) and the children a run started (`children`).

By default a child's journal goes to the parent run's store (`StoredJournals`), so a tree
of runs survives a crash of the process and resumes as a tree; `MemoryJournalStore` keeps
them in the process only (runs without a store).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from legato.events import Journal, JournalEvent, Lineage, SpawnStarted
from legato.exceptions import JournalConflict
from legato.run._recorder import JournalSink

if TYPE_CHECKING:
    from legato.store import RunStore, SessionTurn

__all__ = ["ChildRecord", "JournalStore", "MemoryJournalStore", "StoredJournals"]


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

    @classmethod
    def from_event(cls, event: SpawnStarted) -> ChildRecord:
        """The record a parent's `SpawnStarted` event describes."""
        return cls(
            lineage=event.lineage,
            task=event.task,
            tools=event.tools,
            skills=event.skills,
            max_steps=event.max_steps,
            max_tokens=event.max_tokens,
            background=event.background,
        )


@runtime_checkable
class JournalStore(JournalSink, Protocol):
    """Durable journals of child runs, and the parent-child links between them.

    A child's recorder writes through `append_events` (see `legato.run.JournalSink`).
    """

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

    def append_events(
        self,
        run_id: str,
        events: Sequence[JournalEvent],
        *,
        start: int,
        session: str | None = None,
        turn: SessionTurn | None = None,
    ) -> None:
        """Store events at `start` (the run's length so far, or `JournalConflict`).

        Children have no sessions: `turn` is never given here.
        """
        stored = self._events.setdefault(run_id, [])
        if start != len(stored):
            raise JournalConflict(run_id, start)
        stored.extend(events)

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


class StoredJournals:
    """Child journals in a `RunStore` (SQLite, PostgreSQL), beside their parent's.

    A child is a stored run like any other; its link is the parent's `SpawnStarted`
    event, which the parent's recorder commits before the child starts.
    """

    __slots__ = ("runs",)

    def __init__(self, runs: RunStore) -> None:
        self.runs = runs

    def append_events(
        self,
        run_id: str,
        events: Sequence[JournalEvent],
        *,
        start: int,
        session: str | None = None,
        turn: SessionTurn | None = None,
    ) -> None:
        """Store a child's events (one transaction)."""
        self.runs.append_events(run_id, events, start=start, session=session, turn=turn)

    async def load(self, run_id: str) -> Journal | None:
        """The child's stored journal, or None."""
        if self.runs.run_info(run_id) is None:
            return None
        return self.runs.load_run(run_id)

    async def link(self, record: ChildRecord) -> None:
        """Nothing to do: the parent's `SpawnStarted` event is the link."""

    async def children(self, parent_run_id: str) -> Sequence[ChildRecord]:
        """The children the parent's stored journal shows it started, first start first."""
        if self.runs.run_info(parent_run_id) is None:
            return []
        found: dict[str, ChildRecord] = {}
        for event in self.runs.load_run(parent_run_id):
            if isinstance(event, SpawnStarted) and event.lineage.run_id not in found:
                found[event.lineage.run_id] = ChildRecord.from_event(event)
        return list(found.values())
