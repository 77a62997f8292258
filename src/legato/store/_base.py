"""The store protocols: small boundaries a SQLite or PostgreSQL backend implements.

- `RunStore`: run journals (append events, load a run, list runs).
- `SessionStore`: stored conversations that `agent.run(..., session=...)` continues.
- `SessionCatalog`: list, rename and delete sessions.
- `ApprovalTable`: the rows of approvals parked until a person decides, claimed exactly
  once (`legato.approvals.StoredApprovals` puts the decision rules on top of it).

Values crossing these boundaries are neutral (`Message`, journal events, JSON), so a
backend needs nothing from the layers above.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from legato.events import Compacted, Journal, JournalEvent
from legato.exceptions import StoreNameInvalid
from legato.messages import JsonValue, Message

__all__ = [
    "ApprovalRecord",
    "ApprovalTable",
    "RunInfo",
    "RunStore",
    "SessionCatalog",
    "SessionInfo",
    "SessionStore",
    "SessionTurn",
    "check_names",
    "Store",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """One stored run."""

    run_id: str
    agent: str
    model: str
    session: str | None
    """The session the run belongs to, if any."""
    created_at: float
    """Unix time of its `RunStarted` event."""
    status: Literal["running", "parked", "finished", "failed"]
    events: int
    """How many journal events are stored."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionTurn:
    """A finished run's turn of its session, stored in the transaction that stores its end.

    A run's `RunFinished` and its session turn are committed together, so a crash can
    never leave a finished run whose conversation is missing from its session.
    """

    session: str
    messages: tuple[Message, ...]
    """The run's new messages."""
    context: Compacted | None = None
    """The run's latest compaction, which the session's next run continues from."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """One stored session."""

    name: str
    created_at: float
    updated_at: float
    messages: int
    turns: int
    forked_from: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRecord:
    """An approval request as stored."""

    request_id: str
    run_id: str
    payload: JsonValue
    state: Literal["parked", "decided", "claimed"]
    decision: JsonValue = None


@runtime_checkable
class RunStore(Protocol):
    """Where run journals live."""

    def append_events(
        self,
        run_id: str,
        events: Sequence[JournalEvent],
        *,
        start: int,
        session: str | None = None,
        turn: SessionTurn | None = None,
    ) -> None:
        """Store `events` as the run's events `start`, `start + 1`, ... in one transaction.

        The first event of a run (at `start=0`) must be its `RunStarted`. Appending at a
        position that is already taken raises `StoreError` (two writers of one run).
        `turn`, given with a run's `RunFinished`, is added to its session in the same
        transaction.
        """
        ...

    def load_run(self, run_id: str) -> Journal:
        """The run's journal; `JournalError` if there is no such run."""
        ...

    def list_runs(self, *, session: str | None = None, limit: int = 100) -> list[RunInfo]:
        """The newest runs first, optionally only those of one session."""
        ...

    def run_info(self, run_id: str) -> RunInfo | None:
        """One stored run, or None if the store does not have it."""
        ...


@runtime_checkable
class SessionStore(Protocol):
    """Conversations that continue across runs."""

    def load_session(self, name: str, *, create: bool = False) -> list[Message]:
        """The session's messages; `SessionNotFound` unless it exists or `create` is set."""
        ...

    def append_turn(
        self,
        name: str,
        messages: Sequence[Message],
        *,
        run_id: str | None,
        context: Compacted | None = None,
    ) -> int:
        """Add one turn's messages (atomically) and return the turn's number.

        `context` is the run's latest compaction, which the session's next run continues
        from (None: the model sees the whole conversation).
        """
        ...

    def session_context(self, name: str) -> Compacted | None:
        """The compaction the session's next run starts from, if any."""
        ...

    def undo_turn(self, name: str) -> list[Message]:
        """Remove the last turn and return the messages removed."""
        ...

    def fork_session(self, name: str, new_name: str, *, at: int | None = None) -> SessionInfo:
        """Copy a session into a new one, keeping messages `[0, at)` (all when None)."""
        ...


@runtime_checkable
class SessionCatalog(Protocol):
    """Listing and managing sessions."""

    def list_sessions(self) -> list[SessionInfo]:
        """Every session, the most recently updated first."""
        ...

    def rename_session(self, name: str, new_name: str) -> None:
        """Give a session another name (its runs follow it)."""
        ...

    def delete_session(self, name: str) -> None:
        """Delete a session and its messages (its run journals are kept)."""
        ...


@runtime_checkable
class ApprovalTable(Protocol):
    """Approvals parked in the store, so any process can decide them — exactly once.

    Each change is one conditional update, so a state moves once (parked → decided →
    claimed) however many processes race; the SQLite and PostgreSQL stores differ only in
    their SQL.
    """

    def park_approval(self, request_id: str, *, run_id: str, payload: JsonValue) -> None:
        """Record a pending approval request."""
        ...

    def decide_approval(self, request_id: str, decision: JsonValue) -> bool:
        """Decide the request once: True for exactly one caller, False after.

        One conditional write; a request whose run has ended (finished, failed) is refused.
        """
        ...

    def approvals(self, *, run_id: str | None = None) -> list[ApprovalRecord]:
        """Stored approvals, oldest first."""
        ...

    def approval(self, request_id: str) -> ApprovalRecord | None:
        """One stored approval, or None."""
        ...

    def claim_approval(self, request_id: str) -> bool:
        """Move a decided approval to claimed; True for exactly one caller."""
        ...


@runtime_checkable
class Store(RunStore, SessionStore, SessionCatalog, Protocol):
    """Everything `Agent(store=...)` needs: journals and sessions."""


def check_names(*names: tuple[str, str | None]) -> None:
    r"""Refuse a name the store would keep if it holds NUL: `StoreNameInvalid`.

    Each pair is what the name is (`"session name"`, `"run id"`) and its value (None: not
    given). PostgreSQL text cannot hold NUL (psycopg refuses the parameter) while SQLite
    stores it: checked before anything is read or written, a name with NUL is the same
    typed error on every backend. Payloads (events, messages, approvals) are JSON text,
    where NUL is escaped (`\u0000`), so they keep it.
    """
    for what, value in names:
        if value is not None and "\x00" in value:
            raise StoreNameInvalid(what, value)
