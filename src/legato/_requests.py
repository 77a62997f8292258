"""Approval requests and parked runs: the data a parked run leaves behind.

Plain values in the foundation layer, so the `RunParked` exception carries data and no
policy object; `legato.approvals` (policies, stores, handlers) builds on them and exports
them too.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from legato._values import value_class
from legato.messages import JsonValue

if TYPE_CHECKING:
    from legato.events import Journal

__all__ = ["ApprovalRequest", "ParkedRun", "arguments_hash", "canonical_json"]


def canonical_json(value: JsonValue) -> str:
    """The one JSON text of a value: sorted keys, no whitespace (hashes are taken of this)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def arguments_hash(arguments: JsonValue) -> str:
    """SHA-256 (hex) of the canonical JSON of a call's arguments."""
    return hashlib.sha256(canonical_json(arguments).encode()).hexdigest()


@value_class
class ApprovalRequest:
    """A call waiting for a decision, bound to exactly that call."""

    id: str
    token: str = field(repr=False)
    """The single-use decision token; whoever decides must present it."""
    run_id: str
    step: int
    call_id: str
    tool: str
    arguments: JsonValue
    arguments_hash: str
    rule: str
    """Why approval is needed (the policy rule or the hook that asked)."""
    created_at: float = field(default_factory=time.time)
    expires_at: float | None = None
    """Unix time after which no decision is accepted (None: never)."""

    @classmethod
    def create(
        cls,
        *,
        run_id: str,
        step: int,
        call_id: str,
        tool: str,
        arguments: JsonValue,
        rule: str,
        ttl: float | None = None,
    ) -> ApprovalRequest:
        """A new request with a fresh id and token."""
        now = time.time()
        return cls(
            created_at=now,
            expires_at=None if ttl is None else now + ttl,
            id=f"apr_{secrets.token_hex(8)}",
            token=secrets.token_urlsafe(24),
            run_id=run_id,
            step=step,
            call_id=call_id,
            tool=tool,
            arguments=arguments,
            arguments_hash=arguments_hash(arguments),
            rule=rule,
        )

    def to_json(self) -> str:
        """The request as JSON (the token included: keep it where approvers can reach it)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ApprovalRequest:
        """Load a request written by `to_json`."""
        data: dict[str, Any] = json.loads(text)
        return cls(**data)


@dataclass(frozen=True, kw_only=True)
class ParkedRun:
    """A run stopped for decisions: its journal and the requests it waits on."""

    run_id: str
    journal: Journal
    requests: tuple[ApprovalRequest, ...]

    def request_for(self, tool: str) -> ApprovalRequest:
        """The pending request for a call of `tool` (the first, if several)."""
        for request in self.requests:
            if request.tool == tool:
                return request
        msg = f"no pending request for tool {tool!r}"
        raise KeyError(msg)
