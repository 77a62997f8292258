"""Running one child run: its journal, its stream into the parent, its limits, its resume.

A child is a full legato run (`RunDriver`) with its own journal, stored event by event in a
`JournalStore`. Its events reach the parent's stream as `ChildEvent`s tagged with its
`Lineage` (a grandchild's events pass through unchanged, already tagged deeper). The
parent's journal records `SpawnStarted` and `SpawnFinished`. A child found in the store
is resumed from its journal, or, when it had finished, its result is read back without
running anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from legato.events import (
    ChildEvent,
    ContextSliced,
    Journal,
    Lineage,
    ModelResponded,
    RunEvent,
    RunFailed,
    RunStarted,
    SpawnFinished,
    SpawnOutcome,
    SpawnStarted,
    UserPrompt,
    is_journal_event,
)
from legato.messages import JsonValue, Usage
from legato.run import RunConfig, RunDriver, RunState
from legato.spawn._store import ChildRecord, JournalStore

__all__ = [
    "ChildOutcome",
    "PreparedChild",
    "current_lineage",
    "execute_child",
    "outcome_from_journal",
    "prepare_child",
    "tree_usage",
]

_LINEAGE: ContextVar[Lineage | None] = ContextVar("legato_spawn_lineage", default=None)

Emit = Callable[[RunEvent], None]


def current_lineage() -> Lineage | None:
    """The lineage of the child run the current task belongs to (None in a root run)."""
    return _LINEAGE.get()


def current_depth() -> int:
    """0 in a root run, 1 in its children, ..."""
    lineage = _LINEAGE.get()
    return 0 if lineage is None else lineage.depth


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildOutcome:
    """How a child run ended, and what it produced."""

    lineage: Lineage
    outcome: SpawnOutcome
    output: JsonValue = None
    error: str | None = None
    usage: Usage = Usage()
    steps: int = 0
    from_journal: bool = False

    @property
    def ok(self) -> bool:
        """The child finished with an output."""
        return self.outcome == "ok"

    @property
    def text(self) -> str:
        """The output as text for the parent model (JSON for structured output)."""
        if isinstance(self.output, str):
            return self.output
        return json.dumps(self.output, ensure_ascii=False)

    def finished_event(self) -> SpawnFinished:
        """The parent's journal record of this end."""
        return SpawnFinished(
            lineage=self.lineage,
            outcome=self.outcome,
            output=self.output,
            error=self.error,
            usage=self.usage,
            steps=self.steps,
            from_journal=self.from_journal,
        )


_FAILED_OUTCOMES: dict[str, SpawnOutcome] = {
    "ChildTimeout": "timeout",
    "BudgetExceeded": "budget",
    "RunCancelled": "cancelled",
}


def tree_usage(journal: Journal) -> Usage:
    """A run's usage plus that of all its descendants (their `SpawnFinished` records)."""
    usage = RunState.from_events(list(journal.events)).usage
    for event in journal:
        if isinstance(event, SpawnFinished):
            usage = usage + event.usage
    return usage


def outcome_from_journal(lineage: Lineage, journal: Journal) -> ChildOutcome | None:
    """The outcome recorded in a child's journal, or None while the child is unfinished."""
    state = RunState.from_events(list(journal.events))
    if state.finished:
        return ChildOutcome(
            lineage=lineage,
            outcome="ok",
            output=state.output,
            usage=tree_usage(journal),
            steps=state.step,
            from_journal=True,
        )
    if state.failed is not None:
        return ChildOutcome(
            lineage=lineage,
            outcome=_FAILED_OUTCOMES.get(state.failed.error_type, "error"),
            error=f"{state.failed.error_type}: {state.failed.message}",
            usage=tree_usage(journal),
            steps=state.step,
            from_journal=True,
        )
    return None


@dataclass(kw_only=True)
class PreparedChild:
    """A child ready to run: a fresh or resumed journal, or an outcome read from the store."""

    record: ChildRecord
    journal: Journal
    resumed: bool = False
    finished: ChildOutcome | None = None

    @property
    def lineage(self) -> Lineage:
        """The child's place in the tree."""
        return self.record.lineage


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildStart:
    """The first events of a fresh child, built only when the child is not in the store."""

    started: RunStarted
    prompt: UserPrompt
    sliced: ContextSliced | None = None


def _started_event(record: ChildRecord, *, resumed: bool) -> SpawnStarted:
    return SpawnStarted(
        lineage=record.lineage,
        task=record.task,
        tools=record.tools,
        skills=record.skills,
        max_steps=record.max_steps,
        max_tokens=record.max_tokens,
        background=record.background,
        resumed=resumed,
    )


async def prepare_child(
    record: ChildRecord,
    *,
    store: JournalStore,
    emit: Emit,
    make_start: Callable[[], ChildStart],
) -> PreparedChild:
    """Find the child in the store (resume or read back) or record a fresh start."""
    run_id = record.lineage.run_id
    journal = await store.load(run_id)
    if journal is not None:
        emit(_started_event(record, resumed=True))
        done = outcome_from_journal(record.lineage, journal)
        if done is not None:
            emit(done.finished_event())
        return PreparedChild(record=record, journal=journal, resumed=True, finished=done)
    start = make_start()
    if start.sliced is not None:
        emit(start.sliced)
    await store.link(record)
    journal = Journal([start.started, start.prompt])
    await store.append(run_id, start.started)
    await store.append(run_id, start.prompt)
    emit(_started_event(record, resumed=False))
    return PreparedChild(record=record, journal=journal)


class _BudgetSpent(Exception):
    pass


async def execute_child(
    prepared: PreparedChild,
    *,
    config: RunConfig[Any],
    store: JournalStore,
    emit: Emit,
    max_tokens: int | None = None,
    time_limit: float | None = None,
) -> ChildOutcome:
    """Run (or resume) the child to its end; every failure becomes an outcome, not a raise.

    Cancellation (the parent ending) still propagates, after the child's own tasks are
    cancelled.
    """
    if prepared.finished is not None:
        return prepared.finished
    lineage = prepared.lineage
    token = _LINEAGE.set(lineage)
    driver = RunDriver(config, journal=prepared.journal)
    stored = skip = len(prepared.journal)
    if not prepared.resumed:
        skip = 0
    seen = 0
    failure: tuple[SpawnOutcome, str, str] | None = None
    try:
        async with asyncio.timeout(time_limit):
            async with contextlib.aclosing(driver.events()) as events:
                async for event in events:
                    if is_journal_event(event):
                        seen += 1
                        if seen > stored:
                            await store.append(lineage.run_id, event)
                        if seen <= skip:
                            continue
                    emit(
                        event
                        if isinstance(event, ChildEvent)
                        else ChildEvent(lineage=lineage, event=event)
                    )
                    if (
                        max_tokens is not None
                        and isinstance(event, ModelResponded)
                        and driver.state.usage.total_tokens > max_tokens
                    ):
                        raise _BudgetSpent
    except TimeoutError:
        failure = ("timeout", "ChildTimeout", f"did not finish within {time_limit or 0:g} seconds")
    except _BudgetSpent:
        used = driver.state.usage.total_tokens
        failure = (
            "budget",
            "BudgetExceeded",
            f"used {used} tokens, over its share of {max_tokens}",
        )
    except Exception as exc:
        failure = ("error", type(exc).__name__, str(exc))
    finally:
        _LINEAGE.reset(token)
    state = driver.state
    if failure is None:
        outcome = ChildOutcome(
            lineage=lineage,
            outcome="ok",
            output=state.output,
            usage=tree_usage(prepared.journal),
            steps=state.step,
        )
    else:
        kind, error_type, message = failure
        if state.failed is None:
            event = RunFailed(error_type=error_type, message=message)
            prepared.journal.append(event)
            state.apply(event)
            await store.append(lineage.run_id, event)
            emit(ChildEvent(lineage=lineage, event=event))
        outcome = ChildOutcome(
            lineage=lineage,
            outcome=kind,
            error=f"{error_type}: {message}",
            usage=tree_usage(prepared.journal),
            steps=state.step,
        )
    emit(outcome.finished_event())
    return outcome
