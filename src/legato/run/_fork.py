"""Forking a run: a new run that shares a prefix of another's journal.

Nothing in the prefix runs again: its model responses and finished tool calls are part of
the new run's journal, and resuming the fork continues after them. A fork point inside a
call's flight (admitted, not finished) is refused, since the fork could not tell whether
that effect happened; so is one after the run ended.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from legato.events import (
    Journal,
    RunFailed,
    RunFinished,
    RunStarted,
    ToolCallAdmitted,
    ToolCallFinished,
    ToolCallRefused,
)
from legato.exceptions import JournalError

if TYPE_CHECKING:
    from legato.store import RunStore

__all__ = ["fork_journal", "fork_stored"]


def fork_journal(journal: Journal, at: int, *, run_id: str | None = None) -> Journal:
    """The first `at` events of `journal` as the journal of a new run (`run_id`, or a fresh id).

    Raises `JournalError` for a position outside the journal, inside a call's flight, or
    after the run's end.
    """
    events = list(journal.events)
    first = events[0] if events else None
    if not isinstance(first, RunStarted):
        msg = "a journal to fork must begin with RunStarted"
        raise JournalError(msg)
    if not 1 <= at <= len(events):
        msg = f"run {first.run_id}: cannot fork at event {at}; it has events 1 to {len(events)}"
        raise JournalError(msg)
    prefix = events[:at]
    if any(isinstance(e, RunFinished | RunFailed) for e in prefix):
        msg = f"run {first.run_id}: event {at} is after the run ended; fork before its end"
        raise JournalError(msg)
    open_calls: dict[str, str] = {}
    for event in prefix:
        if isinstance(event, ToolCallAdmitted):
            open_calls[event.call_id] = event.tool
        elif isinstance(event, ToolCallFinished):
            open_calls.pop(event.call.id, None)
        elif isinstance(event, ToolCallRefused):
            open_calls.pop(event.call_id, None)
    if open_calls:
        names = ", ".join(sorted(set(open_calls.values())))
        msg = (
            f"run {first.run_id}: event {at} is inside the flight of {names} (admitted, not "
            "finished); fork before its admission or after its finish"
        )
        raise JournalError(msg)
    started = replace(
        first,
        run_id=run_id or uuid.uuid4().hex,
        owner=None,
        forked_from=first.run_id,
        fork_at=at,
    )
    return Journal([started, *prefix[1:]])


def fork_stored(store: RunStore, run_id: str, at: int) -> str:
    """Fork a stored run at event `at` into a new stored run; returns the new run's id."""
    forked = fork_journal(store.load_run(run_id), at)
    new_id = forked.run_id
    assert new_id is not None
    store.append_events(new_id, forked.events, start=0)
    return new_id
