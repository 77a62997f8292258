"""What a wire renderer returns, and the helpers they share."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from legato.simulator._scenario import ErrorKind, SimCall, SimTurn

__all__ = [
    "JsonReply",
    "Obj",
    "Reply",
    "StreamReply",
    "Wire",
    "call_id",
    "dumps",
    "ndjson",
    "sse",
]

Obj: TypeAlias = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class JsonReply:
    """A whole JSON body."""

    body: Obj
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {})


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamReply:
    """A streamed body: one encoded event per item."""

    events: list[bytes]
    content_type: str = "text/event-stream"


Reply: TypeAlias = JsonReply | StreamReply


class Wire(Protocol):
    """One provider's wire format."""

    def reply(self, turn: SimTurn, request: Obj, *, stream: bool, seq: int) -> Reply:
        """Render a scripted turn as this provider's response."""
        ...

    def error(self, kind: ErrorKind, message: str) -> tuple[int, Obj]:
        """The status code and body this provider sends for an error."""
        ...

    def error_event(self, kind: ErrorKind, message: str) -> bytes:
        """An error reported inside an already-started stream."""
        ...

    def malformed_event(self) -> bytes:
        """A stream event whose JSON is broken."""
        ...


def dumps(obj: object) -> str:
    """Compact JSON, non-ASCII kept as is (so multi-byte characters reach the byte splitter)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def sse(data: object, event: str | None = None) -> bytes:
    """One server-sent event."""
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else dumps(data)
    return f"{head}data: {payload}\n\n".encode()


def ndjson(data: object) -> bytes:
    """One newline-delimited JSON line."""
    return (dumps(data) + "\n").encode()


def call_id(call: SimCall, seq: int, index: int, prefix: str = "call") -> str:
    """The call's id, or a stable made-up one."""
    return call.id or f"{prefix}_{seq}_{index}"


def ordered(turn: SimTurn, *, text: Callable[[], None], calls: Callable[[], None]) -> None:
    """Run the text and call emitters in the order the turn asks for."""
    if turn.text_first:
        text()
        calls()
    else:
        calls()
        text()
