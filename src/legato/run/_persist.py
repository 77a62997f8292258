"""Persisting a run as it happens: its journal to a `RunStore`, its turn to a session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from legato.events import RunEvent, is_journal_event
from legato.run._loop import RunDriver

if TYPE_CHECKING:
    from legato.store import RunStore, SessionStore

__all__ = ["persisted"]


async def persisted(
    driver: RunDriver[Any],
    *,
    runs: RunStore | None,
    sessions: SessionStore | None,
    session: str | None,
) -> AsyncIterator[RunEvent]:
    """Drive `driver`, storing each journal event as it is recorded.

    The session gets the run's new messages as one turn, in one transaction, only when
    the run finishes: a failed or abandoned run leaves the stored conversation as it was
    (its journal, ending in `RunFailed`, is still stored).
    """
    saved = 0
    run_id = driver.state.run_id

    def flush() -> None:
        nonlocal saved
        events = driver.journal.events
        if runs is not None and len(events) > saved:
            runs.append_events(run_id, events[saved:], start=saved, session=session)
            saved = len(events)

    async for event in driver.events():
        if is_journal_event(event):
            flush()
        yield event
    flush()
    state = driver.state
    if session is not None and sessions is not None and state.finished:
        sessions.append_turn(session, state.messages[state.new_message_index :], run_id=run_id)
