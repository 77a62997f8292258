"""Journal events and messages as the JSON text every store keeps (pydantic, built lazily)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from legato.events import JournalEvent
from legato.messages import Message

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = ["dump_event", "dump_message", "event_adapter", "load_event", "load_message"]


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
