"""What every store keeps as JSON text (pydantic, built lazily), and the rows both read back.

The SQL differs between the SQLite and PostgreSQL stores; the rows their queries return
(a run, a session, a carried-over view) are decoded the same way here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, Final, cast

from legato.events import Compacted, JournalEvent
from legato.messages import JsonValue, Message
from legato.store._base import ApprovalRecord, RunInfo, SessionInfo

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [
    "APPROVAL_COLUMNS",
    "approval_from_row",
    "RUN_COLUMNS",
    "SESSION_COLUMNS",
    "carried_view",
    "dump_event",
    "dump_message",
    "event_adapter",
    "load_event",
    "load_message",
    "run_from_row",
    "session_from_row",
]

RUN_COLUMNS: Final = "r.run_id, r.agent, r.model, r.session, r.created_at, r.status"
"""What `run_from_row` reads, in order (then the run's event count)."""
SESSION_COLUMNS: Final = "s.name, s.created_at, s.updated_at, s.forked_from"
"""What `session_from_row` reads, in order (then the message and turn counts)."""


@cache
def event_adapter() -> TypeAdapter[JournalEvent]:
    """The one adapter for journal events."""
    from pydantic import TypeAdapter

    return TypeAdapter(JournalEvent)


@cache
def _message_adapter() -> TypeAdapter[Message]:
    from pydantic import TypeAdapter

    return TypeAdapter(Message)


def dump_event(event: JournalEvent) -> str:
    """A journal event as JSON text."""
    return event_adapter().dump_json(event).decode()


def load_event(text: str) -> JournalEvent:
    """A journal event from its JSON text."""
    return event_adapter().validate_json(text)


def dump_message(message: Message) -> str:
    """A message as JSON text."""
    return _message_adapter().dump_json(message).decode()


def load_message(text: str) -> Message:
    """A message from its JSON text."""
    return _message_adapter().validate_json(text)


def run_from_row(row: Sequence[Any]) -> RunInfo:
    """A stored run from a row of `RUN_COLUMNS` and its event count."""
    return RunInfo(
        run_id=row[0],
        agent=row[1],
        model=row[2],
        session=row[3],
        created_at=row[4],
        status=row[5],
        events=int(row[6]),
    )


def session_from_row(row: Sequence[Any]) -> SessionInfo:
    """A session from a row of `SESSION_COLUMNS`, its message count and its turn count."""
    return SessionInfo(
        name=row[0],
        created_at=row[1],
        updated_at=row[2],
        forked_from=row[3],
        messages=int(row[4]),
        turns=int(row[5]),
    )


def carried_view(text: str | None) -> Compacted | None:
    """A session's stored compacted view (None when it has none)."""
    if text is None:
        return None
    event = load_event(text)
    return event if isinstance(event, Compacted) else None


APPROVAL_COLUMNS: Final = "request_id, run_id, payload, state, decision"
"""The columns `approval_from_row` reads, in order."""


def approval_from_row(row: Sequence[Any]) -> ApprovalRecord:
    """An `ApprovalRecord` from a row of `APPROVAL_COLUMNS` (JSON as text)."""
    return ApprovalRecord(
        request_id=row[0],
        run_id=row[1],
        payload=cast(JsonValue, json.loads(row[2])),
        state=row[3],
        decision=cast(JsonValue, json.loads(row[4])) if row[4] is not None else None,
    )
