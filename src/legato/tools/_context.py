"""`RunContext`: what a tool may know about the run calling it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol

from typing_extensions import TypeVar

from legato.messages import Message, Usage
from legato.tools._contract import StateAccess

if TYPE_CHECKING:
    from legato.events import Journal

__all__ = ["RunContext", "RunScope"]

DepsT = TypeVar("DepsT", default=None)


class RunScope(Protocol):
    """What a tool may ask of the run it belongs to, beyond its own call.

    Sub-agents use it to stream their events through the parent's stream and to keep
    background children alive no longer than the parent run.
    """

    def emit(self, event: Any) -> None:
        """Send an event into the run's stream (journal events are also journaled)."""
        ...

    def start_task(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Start a task owned by the run: it is cancelled and awaited when the run ends."""
        ...


@dataclass(frozen=True, kw_only=True)
class RunContext(Generic[DepsT]):
    """Handed to a tool whose signature has a parameter typed `RunContext[...]`.

    The parameter is found by its type, never by its name, and never appears in the
    schema the model sees.
    """

    deps: DepsT
    """The dependencies passed to `agent.run(..., deps=...)`."""
    run_id: str
    """The id of the run making the call."""
    step: int = 0
    """The model step that issued the call (1 for the first model response)."""
    tool_call_id: str | None = None
    """The id of the call being executed."""
    tool_name: str | None = None
    messages: Sequence[Message] = field(default_factory=lambda: ())
    """The conversation so far, read-only."""
    usage: Usage = field(default_factory=Usage)
    """Usage of the run so far."""
    retry: int = 0
    """How many times this tool has already failed in this run."""
    scope: RunScope | None = None
    """The run's scope (event stream and owned tasks); None outside a run."""
    state: StateAccess | None = None
    """The run's verified state: a draft the tool may write when it has a contract, a
    read-only snapshot otherwise; None when the agent has no state."""
    journal: Journal | None = None
    """The run's journal so far, to read (never append to it); None outside a run. A
    resumed run's journal starts with what was recorded before the interruption."""
