"""Where approval requests wait and decisions land: the `ApprovalStore` and its kinds.

A store is shared by the run that asks and whoever decides. It owns the rules of a
decision's life, the same in every kind: a decision is accepted only with the request's
token and before the request expires, once; it is claimed (applied) by exactly one
resumer, however many processes resume the run. `MemoryApprovalStore` keeps them in this
process; `StoredApprovals` puts the same rules on the approvals table of a legato store
(`SQLiteApprovalStore`, `PostgresApprovalStore`), one conditional update per change.

It must not decide anything itself (handlers and people do, `legato._approval_handlers`)
nor know which calls need a decision (`legato.approvals`). Policy layer: the store
classes it builds on are resources, imported lazily.
"""

from __future__ import annotations

import asyncio
import hmac
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from legato._approval_decisions import Decision, decision_from_json
from legato._requests import ApprovalRequest
from legato.exceptions import DecisionAlreadyUsed, DecisionTokenInvalid
from legato.messages import JsonValue

if TYPE_CHECKING:
    from pathlib import Path

    from legato.store import (
        ApprovalRecord,
        ApprovalTable,
        ConnectionPool,
        PostgresStore,
        SQLiteStore,
    )

__all__ = [
    "ApprovalStore",
    "MemoryApprovalStore",
    "PostgresApprovalStore",
    "SQLiteApprovalStore",
    "StoredApprovals",
]


@runtime_checkable
class ApprovalStore(Protocol):
    """Where requests wait and decisions land; shared by the run and the approvers.

    Implementations must make `decide` and `claim` atomic: a token is accepted once, and a
    decision is claimed by exactly one resumer, even across processes.
    """

    async def put(self, request: ApprovalRequest) -> None:
        """Record a new pending request."""
        ...

    async def get(self, request_id: str) -> ApprovalRequest | None:
        """The request with this id, decided or not."""
        ...

    async def pending(self, run_id: str | None = None) -> list[ApprovalRequest]:
        """Requests without a decision (of one run, or all), oldest first."""
        ...

    async def decide(self, request_id: str, token: str, decision: Decision) -> None:
        """Record a decision; `DecisionTokenInvalid` / `DecisionAlreadyUsed` if not acceptable."""
        ...

    async def claim(self, request_id: str) -> Decision | None:
        """Take the decision (once): None while undecided, `DecisionAlreadyUsed` if taken."""
        ...

    async def decision(self, request_id: str) -> Decision | None:
        """The decision recorded for a request, claimed or not (a read; claims nothing)."""
        ...


class MemoryApprovalStore:
    """An `ApprovalStore` in this process's memory (safe to use from several threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[str, ApprovalRequest] = {}
        self._decisions: dict[str, Decision] = {}
        self._claimed: set[str] = set()

    async def put(self, request: ApprovalRequest) -> None:
        """Record a new pending request."""
        with self._lock:
            self._requests.setdefault(request.id, request)

    async def get(self, request_id: str) -> ApprovalRequest | None:
        """The request with this id."""
        with self._lock:
            return self._requests.get(request_id)

    async def pending(self, run_id: str | None = None) -> list[ApprovalRequest]:
        """Undecided requests, oldest first."""
        return self._undecided(run_id)

    def pending_now(self, run_id: str | None = None) -> int:
        """How many requests wait for a decision right now (synchronous; for probes)."""
        return len(self._undecided(run_id))

    def _undecided(self, run_id: str | None) -> list[ApprovalRequest]:
        with self._lock:
            return [
                r
                for r in self._requests.values()
                if r.id not in self._decisions and (run_id is None or r.run_id == run_id)
            ]

    async def decide(self, request_id: str, token: str, decision: Decision) -> None:
        """Accept a decision presented with the request's token, once."""
        with self._lock:
            request = self._requests.get(request_id)
            if request is None or not hmac.compare_digest(request.token, token):
                msg = f"the decision token does not belong to request {request_id!r}"
                raise DecisionTokenInvalid(msg)
            if request_id in self._decisions:
                msg = f"request {request_id!r} was already decided; a token is used once"
                raise DecisionAlreadyUsed(msg)
            if request.expires_at is not None and time.time() > request.expires_at:
                msg = f"request {request_id!r} expired; the run asks again when resumed"
                raise DecisionTokenInvalid(msg)
            self._decisions[request_id] = decision

    async def decision(self, request_id: str) -> Decision | None:
        """The decision recorded for a request, without claiming it."""
        with self._lock:
            return self._decisions.get(request_id)

    async def claim(self, request_id: str) -> Decision | None:
        """Take the decision exactly once."""
        with self._lock:
            if request_id in self._claimed:
                msg = f"the decision on request {request_id!r} was already applied"
                raise DecisionAlreadyUsed(msg)
            decision = self._decisions.get(request_id)
            if decision is not None:
                self._claimed.add(request_id)
            return decision


class StoredApprovals:
    """An `ApprovalStore` over the approvals table of a legato store (`ApprovalTable`).

    The rules live here once: a decision is accepted only with the request's token and
    before it expires, once; it is claimed by exactly one resumer. Each state change is one
    conditional update in the store (parked → decided → claimed), so the guarantees hold
    across processes and machines; the SQLite and PostgreSQL stores differ only in SQL.
    """

    def __init__(self, table: ApprovalTable, *, in_thread: bool = False) -> None:
        """Keep approvals in `table`; `in_thread` runs its calls off the event loop."""
        self._table = table
        self._in_thread = in_thread

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._in_thread:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    async def put(self, request: ApprovalRequest) -> None:
        """Record a new pending request (recording the same request again changes nothing)."""
        if await self._run(self._table.approval, request.id) is not None:
            return
        payload = cast(JsonValue, asdict(request))
        await self._run(
            lambda: self._table.park_approval(request.id, run_id=request.run_id, payload=payload)
        )

    async def get(self, request_id: str) -> ApprovalRequest | None:
        """The request with this id, decided or not."""
        record: ApprovalRecord | None = await self._run(self._table.approval, request_id)
        return _request_of(record.payload) if record is not None else None

    async def pending(self, run_id: str | None = None) -> list[ApprovalRequest]:
        """Undecided requests (of one run, or all), oldest first."""
        records: list[ApprovalRecord] = await self._run(
            lambda: self._table.approvals(run_id=run_id)
        )
        return [_request_of(r.payload) for r in records if r.state == "parked"]

    async def decide(self, request_id: str, token: str, decision: Decision) -> None:
        """Accept a decision presented with the request's token, once (across processes)."""
        request = await self.get(request_id)
        if request is None or not hmac.compare_digest(request.token, token):
            msg = f"the decision token does not belong to request {request_id!r}"
            raise DecisionTokenInvalid(msg)
        if request.expires_at is not None and time.time() > request.expires_at:
            msg = f"request {request_id!r} expired; the run asks again when resumed"
            raise DecisionTokenInvalid(msg)
        verdict = cast(JsonValue, asdict(decision))
        if not await self._run(self._table.decide_approval, request_id, verdict):
            record: ApprovalRecord | None = await self._run(self._table.approval, request_id)
            if record is not None and record.state == "parked":  # its run has ended
                msg = (
                    f"request {request_id!r} belongs to run {request.run_id}, which has ended; "
                    "a decision for it is refused (nothing was run)"
                )
                raise DecisionTokenInvalid(msg)
            msg = f"request {request_id!r} was already decided; a token is used once"
            raise DecisionAlreadyUsed(msg)

    async def decision(self, request_id: str) -> Decision | None:
        """The decision recorded for a request, without claiming it."""
        record: ApprovalRecord | None = await self._run(self._table.approval, request_id)
        if record is None or record.decision is None:
            return None
        return decision_from_json(cast(Mapping[str, Any], record.decision))

    async def claim(self, request_id: str) -> Decision | None:
        """Take the decision exactly once: one conditional update decides who gets it."""
        won: bool = await self._run(self._table.claim_approval, request_id)
        decision = await self.decision(request_id)
        if decision is None:
            return None
        if not won:
            msg = f"the decision on request {request_id!r} was already applied"
            raise DecisionAlreadyUsed(msg)
        return decision


def _request_of(payload: JsonValue) -> ApprovalRequest:
    if isinstance(payload, str):  # written by an older legato as JSON text
        return ApprovalRequest.from_json(payload)
    return ApprovalRequest(**cast(dict[str, Any], payload))


class SQLiteApprovalStore(StoredApprovals):
    """Approvals in a legato SQLite database (`legato.store.SQLiteStore`).

    A run parks in one process and is decided and resumed from another.
    """

    def __init__(self, store: SQLiteStore | str | Path = ".legato/legato.db") -> None:
        """Use an open `SQLiteStore`, or open one at a path."""
        from legato.store import SQLiteStore

        self.store = store if isinstance(store, SQLiteStore) else SQLiteStore(store)
        super().__init__(self.store)


class PostgresApprovalStore(StoredApprovals):
    """Approvals in a legato PostgreSQL database (`legato.store.PostgresStore`).

    A run parks on one machine and is decided and resumed from another. Database calls run
    in a worker thread, off the event loop.
    """

    def __init__(self, store: PostgresStore | str | ConnectionPool) -> None:
        """Use an open `PostgresStore`, or open one from a DSN or a connection pool."""
        from legato.store import PostgresStore

        self.store = store if isinstance(store, PostgresStore) else PostgresStore(store)
        super().__init__(self.store, in_thread=True)

    def close(self) -> None:
        """Close the store's connection."""
        self.store.close()
