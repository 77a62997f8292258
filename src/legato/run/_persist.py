"""Persisting a run as it happens: its journal to a `RunStore`, its turn to a session."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from legato.events import Compacted, RunEvent, is_journal_event
from legato.run._loop import RunDriver

if TYPE_CHECKING:
    from legato.store import RunStore, SessionStore

__all__ = ["continue_context", "persisted"]


def continue_context(driver: RunDriver[Any], carried: Compacted | None) -> None:
    """Start a session's run from the compacted view its previous run ended with.

    The view is recorded as a `Compacted` event (reason `carried_over`), so the journal
    shows exactly what the model saw, and no summary is computed twice.
    """
    if carried is None or carried.upto > len(driver.state.messages):
        return
    event = replace(carried, reason="carried_over")
    driver.journal.append(event)
    driver.state.apply(event)


async def persisted(
    driver: RunDriver[Any],
    *,
    runs: RunStore | None,
    sessions: SessionStore | None,
    session: str | None,
    carry_context: bool = True,
) -> AsyncGenerator[RunEvent]:
    """Drive `driver`, storing each journal event as it is recorded.

    The session gets the run's new messages as one turn, in one transaction, only when
    the run finishes: a failed or abandoned run leaves the stored conversation as it was
    (its journal, ending in `RunFailed`, is still stored). With `carry_context`, the
    run's latest compaction is saved with the turn for the session's next run.
    """
    saved = 0
    run_id = driver.state.run_id

    def flush() -> None:
        nonlocal saved
        events = driver.journal.events
        if runs is not None and len(events) > saved:
            runs.append_events(run_id, events[saved:], start=saved, session=session)
            saved = len(events)

    # closing this stream early (break, aclose) closes the run's own stream at once, so the
    # run ends and cancels what it owns instead of lingering until garbage collection
    async with contextlib.aclosing(driver.events()) as events:
        try:
            async for event in events:
                if is_journal_event(event):
                    flush()
                yield event
        finally:
            flush()
    state = driver.state
    if session is not None and sessions is not None and state.finished:
        latest = next(
            (e for e in reversed(driver.journal.events) if isinstance(e, Compacted)), None
        )
        sessions.append_turn(
            session,
            state.messages[state.new_message_index :],
            run_id=run_id,
            context=latest if carry_context else None,
        )
